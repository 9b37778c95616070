"""What every section of ``clinieval analyze`` shares: the options and the analysis under way.

Why a module of its own: :mod:`clinieval.analysis.analyze` (the score columns, subgroups, runs)
and :mod:`clinieval.analysis.analyze_human` (the human reference: ranks, judge-vs-human scores,
raters) both read the table through one :class:`Context`, which neither may import from the
other without a cycle. It holds the column roles (:class:`AnalyzeOptions`), the rows of each
item's primary rater, the cells of a column averaged over runs, and the list of statistics the
data leaves undefined.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from clinieval.analysis import rank_agreement, rankings
from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.table import LongTable, Row
from clinieval.errors import UserError

__all__ = ["JSON", "AnalyzeOptions", "Context", "about", "cell", "ranking_json"]

JSON = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class AnalyzeOptions:
    """Which columns mean what, and the resampling settings.

    ``scores`` empty means every numeric column not named elsewhere. ``lower_is_better`` names
    score columns where smaller is better (a rank, an error). With ``rater``, the first rater
    listed on an item is the primary one for every per-item statistic (MedAlign used one primary
    ranking per instruction) and the other raters feed only the inter-rater statistics. With
    ``run``, each (item, model) value is the mean over runs, and run-level means give each
    model's spread over runs and EHRNoteQA's rank instability.

    ``resamples`` is the number of bootstrap resamples (CIs, paired bootstrap, Kendall CIs) and
    also the number of random sign patterns of the paired permutation test, which is exact over
    all 2^n patterns when 2^n <= ``resamples``. ``human_label`` names whoever produced
    ``human_rank`` / ``human_score`` ("clinician" by default; "computed reference" for a ranking
    derived from another column) and is carried into the output and every heading of the report.
    """

    item: str = "item"
    model: str = "model"
    scores: tuple[str, ...] = ()
    lower_is_better: frozenset[str] = frozenset()
    human_rank: str | None = None
    human_score: str | None = None
    correct: str | None = None
    cluster: str | None = None
    groups: tuple[str, ...] = ()
    rater: str | None = None
    run: str | None = None
    gold_rank: rank_agreement.GoldRule = "smallest"
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    human_label: str = "clinician"

    def named(self) -> list[str]:
        """Columns given a role other than score."""
        roles = [self.item, self.model, self.human_rank, self.human_score, self.cluster, self.rater, self.run]
        return [c for c in (*roles, *self.groups) if c is not None]


@dataclass
class Context:
    """One analysis under way: the table, its options, the primary rows (see
    :class:`AnalyzeOptions`) and the statistics found undefined so far."""

    table: LongTable
    options: AnalyzeOptions
    primary: list[Row]
    undefined: list[str] = field(default_factory=list)

    @cached_property
    def clusters(self) -> dict[str, str] | None:
        """Item → cluster label (from the item's first row), worked out once for every score
        column; None without ``--cluster``."""
        t, o = self.table, self.options
        if o.cluster is None:
            return None
        out: dict[str, str] = {}
        for row in self.primary:
            label = t.text(row, o.cluster)
            if label is None:
                raise UserError(f"{row.where}: column {o.cluster!r} (the cluster) is empty")
            out.setdefault(str(t.text(row, o.item)), label)
        return out

    def enough(self, what: str, found: int, minimum: int, unit: str) -> bool:
        """Whether ``found`` reaches ``minimum``; if not, the statistic is recorded as undefined.

        For statistics whose library function takes too few values as a caller's mistake (a
        UserError): here the data simply does not define them."""
        if found >= minimum:
            return True
        self.undefined.append(f"{what}: needs at least {minimum} {unit}, found {found}")
        return False

    def guard(self, what: str, compute: Callable[[], T]) -> T | None:
        """Run one statistic; an undefined one is recorded with its reason and gives None."""
        try:
            return compute()
        except UndefinedStatisticError as e:
            self.undefined.append(f"{what}: {e}")
            return None

    def models(self) -> list[str]:
        """The models of the primary rows, in table order."""
        return list(dict.fromkeys(str(self.table.text(r, self.options.model)) for r in self.primary))

    def cells(self, rows: Sequence[Row], column: str) -> dict[tuple[str, str], float | None]:
        """(item, model) → value; repeated runs are averaged, other repeats are an error."""
        t, o = self.table, self.options
        sums: dict[tuple[str, str], list[float]] = defaultdict(list)
        seen: dict[tuple[str, str], str] = {}
        for row in rows:
            key = (str(t.text(row, o.item)), str(t.text(row, o.model)))
            if o.run is None and key in seen:
                raise UserError(
                    f"{row.where}: item {key[0]!r} and model {key[1]!r} already appear at {seen[key]}; "
                    "give one row per item and model (or name the --rater or --run column)"
                )
            seen.setdefault(key, row.where)
            value = t.number(row, column)
            if value is not None:
                sums[key].append(value)
        return {k: (sum(sums[k]) / len(sums[k]) if sums[k] else None) for k in seen}

    def score_table(self, column: str, *, higher_is_better: bool) -> ScoreTable:
        """``column`` over the primary rows as an item x model table."""
        cells = self.cells(self.primary, column)
        return ScoreTable.from_rows(
            ((i, m, v) for (i, m), v in cells.items()), higher_is_better=higher_is_better
        )


def _h2h_json(h: rankings.HeadToHead) -> JSON:
    return {
        "models": list(h.models),
        "rates": [list(r) for r in h.rates],
        "battles": [list(b) for b in h.battles],
    }


def ranking_json(ctx: Context, what: str, table: ScoreTable, skipped: str) -> JSON:
    """Mean rank (re-ranked per item, ties averaged), win rates and head-to-head matrices. With
    one model only the mean rank: the rest (``skipped``, named in the undefined entry) is None."""
    out: JSON = {"mean_rank": rankings.mean_ranks(table)}
    if not ctx.enough(f"{what}: {skipped}", len(table.models), 2, "models"):
        none: dict[str, float | None] = dict.fromkeys(table.models)
        return {
            **out,
            "win_rate": none,
            "win_rate_non_tied": dict(none),
            "head_to_head": None,
            "head_to_head_non_tied": None,
        }
    return {
        **out,
        "win_rate": rankings.win_rates(table),
        "win_rate_non_tied": rankings.win_rates(table, exclude_ties=True),
        "head_to_head": _h2h_json(rankings.head_to_head(table)),
        "head_to_head_non_tied": _h2h_json(rankings.head_to_head(table, exclude_ties=True)),
    }


def about(table: LongTable, what: str, compute: Callable[[], T]) -> T:
    """``compute()``; a UserError from the statistics below, which know numbers but not files, is
    raised again (same class) naming the table and the column it was computing, unless it names
    the table already (a row, a cell)."""
    try:
        return compute()
    except UserError as e:
        if str(table.path) in str(e):
            raise
        raise type(e)(f"{table.path}: {what}: {e}") from None


def cell(table: ScoreTable, item: str, model: str) -> float | None:
    """One cell of ``table``; None where the item or the model is not in it, or the cell is empty."""
    if not table.has_item(item) or model not in table.models:
        return None
    return table.row(item)[table.models.index(model)]  # row() looks the item up in the table's index
