"""What a benchmark hands the suite: its options, its data checked, its plan, its run, its scores.

A suite must run each benchmark through the benchmark's own code (no second implementation), yet
the suite layer sits below the benchmarks and may not import them. So each benchmark offers one
:class:`SuitePart` (``Benchmark.suite()``), and the suite only calls these methods, in this order:

1. ``prepare`` for every benchmark the suite file names, before any model is opened: reads the
   options table and the data folder and refuses bad ones with one :class:`~clinieval.errors.UserError`
   naming the file and field (a suite with a bad data folder fails before any model call);
2. ``plan`` for every model: the steps one model x benchmark cell will take and how many model
   calls each costs (``clinieval suite plan`` prints them; the progress view counts them);
2b. ``check`` for every cell still to run, before any cell runs: every check the benchmark's own
   command makes before its first model call (the model reachable and serving, its tokenizer and
   context size, room for the record, log-likelihoods where scored, the judge), so a suite whose
   plan passes starts every cell (:mod:`clinieval.suite.preflight`);
3. ``run`` for every cell: the benchmark's own arms and judge passes into the cell's folder,
   resuming whatever is already there (a killed suite asks nothing finished again);
4. ``headline`` for every finished cell: the per-item scores the leaderboard ranks on;
5. ``report``: the benchmark's own report over all the suite's models, which the leaderboard links.

``review_items`` is asked only by ``clinieval suite sample``, of a finished suite whose scores a
judge decided: the judged items as clinicians review them, so the judge can be calibrated.

Options are a frozen dataclass per benchmark (``options``): its fields, their types, defaults and
the docstring under each become the suite file's schema (:mod:`clinieval.suite.schema`), so the
JSON Schema, the validation and the documentation cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clinieval.models.spec import BackendOptions

if TYPE_CHECKING:
    from clinieval.models.base import Model
    from clinieval.review.items import ReviewItem


@dataclass(frozen=True, slots=True)
class SuiteModel:
    """A model under test: its name on the leaderboard (the suite file's key) and its spec (any
    spec the CLI accepts, endpoint pools included)."""

    name: str
    spec: str


@dataclass(frozen=True, slots=True)
class SuiteJudge:
    """The judge a benchmark that judges uses (None in :class:`Cell` when the suite names none):
    its spec and how many times each answer is judged (distinct requests)."""

    spec: str
    repeats: int


@dataclass(frozen=True, slots=True)
class Shared:
    """What the suite file sets for every benchmark: how models are reached, how many items each
    benchmark evaluates at most (None: all), the seed, the judge, and progress bars (the suite
    draws its own view, so the benchmarks' own bars are off under it)."""

    backend: BackendOptions = field(default_factory=BackendOptions)
    concurrency: int | None = None
    limit: int | None = None
    seed: int = 0
    judge: SuiteJudge | None = None
    progress: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """A benchmark's options and data, read and checked, before any model call.

    ``items``: how many items each model will answer (after ``limit``); ``clusters``: whether items
    share patients (the leaderboard then resamples a patient's items together); ``data_files``:
    the files whose content hash the suite manifest records; ``payload``: the benchmark's own
    loaded data and options, opaque to the suite and handed back to every later call.
    """

    benchmark: str
    options: Any
    items: int
    data_files: Sequence[Path]
    describe: str
    payload: Any = None
    clustered: bool = False


@dataclass(frozen=True, slots=True)
class Cell:
    """One model x benchmark: where its runs live (``out``, the suite's ``DIR/<benchmark>/<model>``),
    the model, and the suite's shared settings (the judge resolved for this benchmark)."""

    model: SuiteModel
    out: Path
    shared: Shared


@dataclass(frozen=True, slots=True)
class Step:
    """One piece of a cell's work, for the plan and the progress view: what it is (``"arm mc"``,
    ``"judge x5"``), who answers it (a model spec), and how many model calls it costs in full."""

    what: str
    asks: str
    calls: int


@dataclass(frozen=True, slots=True)
class Headline:
    """One model's per-item headline scores on one benchmark, what the leaderboard ranks on.

    ``scores`` maps item id to the item's score (repeats already averaged; higher is better, on
    the scale ``metric`` names). An item whose model call failed is left out and counted in
    ``failed``, never scored 0. ``clusters`` maps item id to its patient where items share
    patients. ``judge_runs`` holds, when a judge decides the score, one mapping per judge repeat
    (item id -> that repeat's score): the leaderboard ranks the models in each to show how much a
    judge's ranking moves between runs (EHRNoteQA, Table 6). ``runs`` are the run folders behind
    the scores (the per-item results browser is built from them).
    """

    metric: str
    scores: Mapping[str, float]
    clusters: Mapping[str, str] | None = None
    judge_runs: Sequence[Mapping[str, float]] = ()
    runs: Sequence[Path] = ()
    failed: int = 0
    scale: tuple[float, float] = (0.0, 1.0)
    deterministic: Mapping[str, float] | None = None
    """Where a judge decides ``scores`` and the benchmark also scores the same answers without one
    (EHRNoteQA's letter extraction): that scorer's per-item values, for the page's agreement line."""
    deterministic_name: str = ""
    unparsed: int = 0
    """Items left out because the judge replied without a verdict in every repeat: not a failed
    call (the replies are cached, so a rerun asks nothing and reads the same), counted apart from
    ``failed`` and never a reason to exit 3."""


class CheckedModels(Protocol):
    """The models of a suite's check pass, each opened and checked (``Model.check``) once however
    many cells use it, and closed when the pass ends."""

    async def checked(self, spec: str, make: Callable[[str], Model] | None = None) -> Model:
        """The model ``spec`` names, opened with the suite's backend options (or by ``make``, for
        a benchmark with models of its own) and checked; a refusal is a UserError."""
        ...


class SuitePart(Protocol):
    """A benchmark as a suite runs it (see the module docstring for the order of calls)."""

    @property
    def name(self) -> str:
        """The benchmark's name: its ``[benchmarks.NAME]`` table in a suite file."""
        ...

    @property
    def judged(self) -> bool:
        """Whether a judge model takes part in this benchmark's score (``judge``, ``judge_repeats``
        in its table mean something); a suite file that sets them for one that has none is refused."""
        ...

    @property
    def options(self) -> type[Any]:
        """The frozen dataclass of this benchmark's suite options (``data`` included where the
        benchmark reads a data folder): the schema of its table in a suite file."""
        ...

    @property
    def metric(self) -> str:
        """The headline metric in a few words, as the plan and leaderboard name it."""
        ...

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        """Read and check the data ``options`` names (relative paths against ``base``, the suite
        file's folder); no model is opened. Bad data is one UserError naming the file."""
        ...

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        """The steps of one cell and the model calls each costs when nothing is done yet."""
        ...

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        """Every check the benchmark's own command makes before its first model call, for what
        :meth:`run` would run in ``cell``, through the same code; nothing is asked or written."""
        ...

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        """Run the cell through the benchmark's own code into ``cell.out``, resuming what is there."""
        ...

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        """The cell's per-item headline scores, read from what ``run`` recorded."""
        ...

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        """Write the benchmark's own report over ``cells`` (every model of the suite) into ``out``;
        the page the leaderboard links for this benchmark (None: the benchmark has none)."""
        ...

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        """Write a small synthetic data set into ``folder`` for ``clinieval suite demo`` and return
        the options table that reads it (an empty mapping: the benchmark's default data)."""
        ...

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """The items ``items`` as the benchmark's own review shows them (the question, the record
        the models saw, the reference), each with one answer per cell of ``cells`` that answered it
        (``source``: the cell's model name; the caller re-keys the answers blind), read from what
        ``run`` recorded: the clinician sample of ``clinieval suite sample``. Never the judge's
        verdict. A part whose score no judge decides returns nothing."""
        ...
