"""The one interface every model backend implements.

Backends are small classes behind a :class:`Model` protocol; the runner, the cache and the
scorers only ever see this protocol, so a new backend never touches them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from clinieval.types import JSON, GenerationConfig, LoglikOutput, Message, ModelOutput


@runtime_checkable
class Model(Protocol):
    """A language model the harness can ask questions of."""

    @property
    def name(self) -> str:
        """Short human-readable name, used in run directory names and tables."""
        ...

    @property
    def identity(self) -> JSON:
        """Everything that decides the model's answers; part of every cache key."""
        ...

    @property
    def max_concurrency(self) -> int:
        """How many requests are worth keeping in flight at once."""
        ...

    def render(self, messages: Sequence[Message]) -> str:
        """The exact text the model sees for ``messages`` when scoring continuations."""
        ...

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        """Answer a conversation. Failures come back as ``ModelOutput.error_kind``, not raised."""
        ...

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        """Summed log-probability of each continuation following ``prompt``."""
        ...

    async def tokenize(self, text: str) -> list[int]:
        """Token ids with the model's own tokenizer."""
        ...

    async def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` with the model's own tokenizer."""
        ...

    async def check(self) -> None:
        """Fail fast with a UserError if the model cannot be used at all (before a run starts)."""
        ...

    async def aclose(self) -> None:
        """Release connections or memory."""
        ...


def render_plain(messages: Sequence[Message]) -> str:
    """Render a conversation for a model without a chat template.

    System and user turns are joined with blank lines; the text then reads as an ordinary
    completion prompt, which is how base models (e.g. Gemma-3-270M) are evaluated.
    """
    return "\n\n".join(m.content for m in messages)


def split_continuation(prompt: str, continuation: str) -> tuple[str, str]:
    """Move trailing spaces of the prompt onto the continuation.

    Tokenizers attach a leading space to the following word, so ``"Answer: " + "yes"`` must be
    scored as ``"Answer:"`` followed by ``" yes"`` to give the token sequence the model prefers.
    """
    stripped = prompt.rstrip(" ")
    return stripped, prompt[len(stripped) :] + continuation
