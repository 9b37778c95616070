"""What a benchmark offers the rest of clinieval: a name, a line of description, its commands,
its task factory, its scorers, its judge rubrics and the files of its own that clinician review
can import.

Each package under :mod:`clinieval.benchmarks` exposes one object satisfying :class:`Benchmark`,
and ``clinieval.benchmarks.BENCHMARKS`` lists them; the CLI mounts their commands and
``clinieval run NAME`` asks them, in order, which one ``NAME`` means. Nothing below this layer
knows that any benchmark exists (tests/test_import_layers.py keeps it so), which is what lets a
new benchmark arrive as one folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from clinieval.errors import UserError

if TYPE_CHECKING:
    import typer

    from clinieval.judge.catalog import RubricEntry
    from clinieval.review.sources import ReviewSource
    from clinieval.scoring.scorers import Scorer
    from clinieval.suite.part import SuitePart
    from clinieval.task import PromptTemplate, Task


S = TypeVar("S", bound=str)


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What ``clinieval run NAME`` asks of a benchmark: the name as typed, where its data is
    (None: the benchmark's default, usually ``shared/data/NAME``), a split (None: the
    benchmark's default), scorers that replace the benchmark's own (None: its own), the
    tokenizer and context length that a long record's budget is counted with (None: the model's
    own; a benchmark whose records always fit ignores both), and a prompt that replaces the
    benchmark's own (``--prompt FILE``; None: its own). The caller puts the prompt on the task
    whatever the benchmark does with it; a benchmark reads it only when its defaults depend on
    it (the JSONL task's scorer). ``fields`` are ``--field NAME=COLUMN`` values, read only by the
    task over a user's own file (the JSONL task); ``clinieval run`` refuses them for any other."""

    name: str
    data: Path | None = None
    split: str | None = None
    scorers: Sequence[Scorer] | None = None
    budget_tokenizer: str | None = None
    max_context: int | None = None
    prompt: PromptTemplate | None = None
    fields: tuple[str, ...] = ()


class Benchmark(Protocol):
    """One benchmark, as the CLI and ``clinieval run`` see it."""

    @property
    def name(self) -> str:
        """The command group (``clinieval NAME ...``) and the name ``clinieval run`` accepts."""
        ...

    @property
    def description(self) -> str:
        """One line, shown in ``clinieval --help`` and ``clinieval benchmarks``."""
        ...

    def matches(self, name: str) -> bool:
        """Whether ``clinieval run NAME`` means this benchmark (a name, or a file it reads)."""
        ...

    def task(self, request: TaskRequest) -> Task:
        """The single-arm task ``clinieval run`` evaluates."""
        ...

    def commands(self) -> typer.Typer | None:
        """The benchmark's own commands, mounted as ``clinieval NAME``; None when it has none."""
        ...

    def scorers(self) -> Sequence[Scorer]:
        """Scorers of this benchmark that ``clinieval score --scorer NAME`` may apply to a run."""
        ...

    def rubrics(self) -> Sequence[RubricEntry]:
        """Judge rubrics of this benchmark that ``clinieval judge --rubric NAME`` may apply to a run."""
        ...

    def review_sources(self) -> Sequence[ReviewSource]:
        """The benchmark's files ``clinieval review import`` reads, each turned into review items."""
        ...

    def suite(self) -> SuitePart | None:
        """How ``clinieval suite`` runs this benchmark for each model; None: a suite cannot name it."""
        ...


@dataclass(frozen=True, slots=True)
class BenchmarkBase:
    """What most benchmarks share: ``clinieval run`` claims the benchmark by its name, and it has
    no commands, scorers or rubrics of its own. A benchmark subclasses this and writes ``task``."""

    name: str
    description: str

    def matches(self, name: str) -> bool:
        return name == self.name

    def commands(self) -> typer.Typer | None:
        return None

    def scorers(self) -> Sequence[Scorer]:
        return ()

    def rubrics(self) -> Sequence[RubricEntry]:
        return ()

    def review_sources(self) -> Sequence[ReviewSource]:
        return ()

    def suite(self) -> SuitePart | None:
        return None


def own_scorers(task: Task, request: TaskRequest) -> Task:
    """``task`` with the scorers the request names instead of its own, when it names any."""
    if request.scorers:
        task.scorers = list(request.scorers)
    return task


def find_benchmark(benchmarks: Sequence[Benchmark], name: str) -> Benchmark:
    """The first benchmark that says ``name`` is its own, or one error listing what is known."""
    for benchmark in benchmarks:
        if benchmark.matches(name):
            return benchmark
    known = ", ".join(b.name for b in benchmarks if b.name != "jsonl")
    raise UserError(
        f"unknown task {name!r}; known: {known}, or the path of your own .jsonl, .json or .csv file"
    )


def check_split(request: TaskRequest, splits: Sequence[S], default: S) -> S:
    """The requested split (as the element of ``splits``, so a Literal type survives), its
    default when none was asked for, or one error naming the choices."""
    split = request.split or default
    for known in splits:
        if split == known:
            return known
    raise UserError(f"--split {split!r}: {request.name} has splits {', '.join(splits)}")
