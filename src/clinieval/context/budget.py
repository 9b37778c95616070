"""The token budget a record may use (MedAlign's rule).

EHR tokens allowed = model max context - tokens reserved for generation (256 by default) - tokens
of the prompt template and the instruction, counted as the prompt rendered with an empty record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clinieval.context.tokenizers import Tokenizer
from clinieval.models.base import render_plain
from clinieval.task import PromptTemplate
from clinieval.types import JSON, Message, Sample

DEFAULT_RESERVE = 256


@dataclass(frozen=True, slots=True)
class Budget:
    """``tokens = max_context - reserve - template_tokens`` (never below zero)."""

    max_context: int
    reserve: int = DEFAULT_RESERVE
    template_tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_context <= 0:
            raise ValueError(f"max_context must be positive, not {self.max_context}")
        if self.reserve < 0 or self.template_tokens < 0:
            raise ValueError("reserve and template_tokens must not be negative")

    @property
    def tokens(self) -> int:
        return max(0, self.max_context - self.reserve - self.template_tokens)

    def to_dict(self) -> JSON:
        return {
            "max_context": self.max_context,
            "reserve": self.reserve,
            "template_tokens": self.template_tokens,
            "budget": self.tokens,
        }


def prompt_counter(tokenizer: Tokenizer) -> Callable[[str], int]:
    """How a whole prompt is counted: as the backend feeds it when the tokenizer knows (llama.cpp
    adds BOS and parses chat special tokens), else as plain text."""
    count_prompt = getattr(tokenizer, "count_prompt", None)
    if callable(count_prompt):
        return lambda text: int(count_prompt(text))
    return tokenizer.count


def compute_budget(
    tokenizer: Tokenizer,
    template: PromptTemplate,
    sample: Sample,
    *,
    max_context: int,
    reserve: int = DEFAULT_RESERVE,
    render: Callable[[Sequence[Message]], str] = render_plain,
) -> Budget:
    """The budget for ``sample.context`` under ``template``: its prompt rendered with an empty record
    (instruction, choices, system text and chat markup included) is what the record cannot use."""
    empty = render(template.messages(sample, ""))
    return Budget(max_context=max_context, reserve=reserve, template_tokens=prompt_counter(tokenizer)(empty))
