"""The rubrics ``clinieval judge --rubric NAME`` may name, and how each is built.

A rubric object is fixed once built, but a user tunes some of them from the command line (how
many EHR excerpts MedAlign's judge sees), and each has its own sensible reply length (a yes/no
judge needs 16 tokens, a JSON verdict with a rationale 512). So the catalog holds
:class:`RubricEntry` values: a name, one line for the error that lists them, a builder from the
shared :class:`RubricOptions`, and the judge's generation defaults. The shared entries are
:data:`SHARED_RUBRICS`; each benchmark adds its own through ``Benchmark.rubrics()``, and the CLI
merges both with :func:`rubric_mapping`, so a name means one rubric everywhere and a clash is an
error, not a silent override (the same rule as ``scoring.catalog`` for scorers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from clinieval.errors import by_name, pick_named
from clinieval.judge.reference import ReferenceRubric
from clinieval.judge.rubric import Rubric
from clinieval.judge.run import DEFAULT_JUDGE_GENERATION
from clinieval.types import GenerationConfig

DEFAULT_SNIPPETS = 5
"""EHR excerpts shown to a rubric that shows them, unless ``--snippets`` says otherwise."""


@dataclass(frozen=True, slots=True)
class RubricOptions:
    """What the command line may tune in a rubric; a rubric ignores what it has no use for."""

    snippets: int = DEFAULT_SNIPPETS


@dataclass(frozen=True, slots=True)
class RubricEntry:
    """One rubric as the command line knows it.

    ``name`` must be the built rubric's name (its scores file and cache key); ``uses_snippets``
    says whether ``--snippets`` changes its prompt, so the advice for a judge prompt too long for
    its context names ``--snippets`` only where lowering it helps.
    """

    name: str
    description: str
    build: Callable[[RubricOptions], Rubric]
    generation: GenerationConfig = DEFAULT_JUDGE_GENERATION
    uses_snippets: bool = False

    def judge_generation(self, max_tokens: int | None, temperature: float) -> GenerationConfig:
        """The rubric's generation defaults with the reply limit (when given) and temperature asked for."""
        config = replace(self.generation, temperature=temperature)
        return config if max_tokens is None else replace(config, max_tokens=max_tokens)


def without_options(make: Callable[[], Rubric]) -> Callable[[RubricOptions], Rubric]:
    """A builder for a rubric the command line cannot tune: it ignores the options."""

    def build(_options: RubricOptions) -> Rubric:
        return make()

    return build


SHARED_RUBRICS: tuple[RubricEntry, ...] = (
    RubricEntry(
        name="reference_correct",
        description="yes/no: is the answer correct given the targets? For any task that has them",
        build=without_options(ReferenceRubric),
        generation=replace(DEFAULT_JUDGE_GENERATION, max_tokens=128),
    ),
)
"""Rubrics that need nothing a benchmark's loader adds: a user's own JSONL task can use them."""


def rubric_mapping(entries: Iterable[RubricEntry]) -> dict[str, RubricEntry]:
    """``name -> entry``, refusing two rubrics with one name."""
    return by_name(entries, "rubric")


def pick_rubric(known: Mapping[str, RubricEntry], name: str) -> RubricEntry:
    """The rubric called ``name``, or one error listing every known one with what it judges."""
    return pick_named(known, name, "rubric", lambda e: f"{e.name} ({e.description})")


__all__ = [
    "DEFAULT_SNIPPETS",
    "SHARED_RUBRICS",
    "RubricEntry",
    "RubricOptions",
    "pick_rubric",
    "rubric_mapping",
    "without_options",
]
