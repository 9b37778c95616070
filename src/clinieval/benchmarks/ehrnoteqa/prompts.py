"""EHRNoteQA's prompts as the public code writes them: the five-option prompt and the free-text one."""

from __future__ import annotations

from typing import Literal

from clinieval.task import LETTERS, PromptTemplate
from clinieval.types import GenerationConfig

Format = Literal["mc", "free"]
FORMATS: tuple[Format, ...] = ("mc", "free")

OPTION_LETTERS = LETTERS[:5]
"""The five option letters of the multiple-choice prompt."""

MC_PROMPT = PromptTemplate(
    user="Discharge Summary :\n{context}\n\nQuestion : {input}\nChoices :\n{options}\n\nAnswer :"
)
"""The public code's multiple-choice prompt (``{options}`` is the five ``X. text`` lines)."""

FREE_PROMPT = PromptTemplate(user="Discharge Summary :\n{context}\n\nQuestion : {input}\n\nAnswer :")
"""The same without the ``Choices`` block."""

PROMPTS: dict[Format, PromptTemplate] = {"mc": MC_PROMPT, "free": FREE_PROMPT}

GENERATION = GenerationConfig(temperature=0.0, max_tokens=600, seed=0)
"""Greedy decoding, at most 600 new tokens (the public code)."""
