"""MedAlign's prompt: the paper's Figure S9, the same for every model."""

from __future__ import annotations

from clinieval.task import PromptTemplate

MEDALIGN_PROMPT = PromptTemplate(
    user='Instruction: Answer the following question based on the EHR:\n###\nQuestion: """{input}"""\n'
    'EHR: """{context}"""'
)
"""The paper's prompt (Figure S9), used for every model; only ``EHR`` is ever truncated."""
