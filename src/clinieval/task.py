"""Tasks: a dataset, how to prompt for it, how to fit its context, and how to score it."""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.scoring.scorers import Scorer
from clinieval.types import JSON, GenerationConfig, Message, Sample


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """``str.format``-style templates over ``{input}``, ``{context}``, ``{choices}`` and ``{options}``.

    The question and the record are separate fields so a context policy can trim the record and
    never the question. ``{choices}`` is the choices joined by commas (``yes, no, maybe``);
    ``{options}`` is one lettered line per choice (``A. first`` / ``B. second`` ...), the layout of
    lettered multiple-choice prompts such as EHRNoteQA's.
    """

    user: str
    system: str | None = None

    def __post_init__(self) -> None:
        allowed = {"input", "context", "choices", "options"}
        for text in (self.user, self.system or ""):
            for _, name, _, _ in string.Formatter().parse(text):
                if name is not None and name not in allowed:
                    raise UserError(
                        f"prompt template field {{{name}}} is unknown; use {{input}}, {{context}}, "
                        "{choices} or {options}"
                    )

    def messages(self, sample: Sample, context: str) -> list[Message]:
        fields = {
            "input": sample.input,
            "context": context,
            "choices": ", ".join(sample.choices),
            "options": option_lines(sample.choices),
        }
        out: list[Message] = []
        if self.system:
            out.append(Message("system", self.system.format(**fields)))
        out.append(Message("user", self.user.format(**fields)))
        return out

    def to_dict(self) -> JSON:
        return {"system": self.system, "user": self.user}


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_lines(choices: Sequence[str]) -> str:
    """``A. first`` / ``B. second`` ..., one line per choice."""
    if len(choices) > len(LETTERS):
        raise UserError(f"{len(choices)} choices: lettered options stop at {len(LETTERS)}")
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def same_choices(sample: Sample) -> tuple[str, ...]:
    """The default log-likelihood continuations: the sample's choices as written."""
    return sample.choices


class ContextPolicy(Protocol):
    """Decides how much of a sample's record reaches the model, and records what was done."""

    @property
    def name(self) -> str: ...

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        """Return the context to use and a description of what was kept or cut."""
        ...


@runtime_checkable
class MultiStepPolicy(ContextPolicy, Protocol):
    """A policy that shows the model the record in several calls (multi-step refinement).

    The runner asks :meth:`plan` for the pieces, then calls the model once per piece in order
    with :meth:`step_messages`, passing the latest answer so far (None before any call
    succeeded); a failed call keeps the previous answer.
    """

    async def plan(self, sample: Sample, model: Model) -> tuple[list[str], JSON]:
        """The record's pieces in order, and a description of how it was cut."""
        ...

    def step_messages(
        self, sample: Sample, piece: str, index: int, total: int, previous: str | None
    ) -> list[Message]:
        """The conversation for step ``index`` (from 0) of ``total``."""
        ...


@dataclass(frozen=True, slots=True)
class FullContext:
    """Pass the record through untouched (short-context tasks such as PubMedQA)."""

    name: str = "full"

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        return sample.context, {"policy": self.name, "truncated": False}


@dataclass(slots=True)
class Task:
    """Everything needed to evaluate a model on one benchmark."""

    name: str
    load: Callable[[], list[Sample]]
    prompt: PromptTemplate
    scorers: Sequence[Scorer]
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    context_policy: ContextPolicy = field(default_factory=FullContext)
    data_files: list[Path] = field(default_factory=list)
    params: JSON = field(default_factory=dict)
    loglik_continuations: Callable[[Sample], tuple[str, ...]] = same_choices
    """What a log-likelihood request scores after the prompt (a task may score option letters
    and option texts in one request; its scorers know the layout)."""

    @property
    def needs_generation(self) -> bool:
        return any(s.needs == "generate" for s in self.scorers)

    @property
    def needs_loglikelihood(self) -> bool:
        return any(s.needs == "loglikelihood" for s in self.scorers)

    def check_samples(self, samples: Sequence[Sample]) -> None:
        """Refuse, before any model call, samples the scorers cannot score."""
        if not samples:
            raise UserError(f"task {self.name}: no samples to evaluate")
        for scorer in self.scorers:
            if scorer.needs_choices:
                bad = next((s for s in samples if not s.choices), None)
                if bad is not None:
                    raise UserError(
                        f"scorer {scorer.name} needs choices, but sample {bad.id!r} has none; "
                        "add a 'choices' list or use another scorer"
                    )

    def spec(self) -> JSON:
        """The parts of the task that decide its results (for the run fingerprint)."""
        return {
            "name": self.name,
            "params": self.params,
            "prompt": self.prompt.to_dict(),
            "context_policy": self.context_policy.name,
            "scorers": [s.name for s in self.scorers],
        }
