"""Ranking models: the :class:`ScoreTable` they are ranked from, ranks, head-to-head and win rates.

Everything here reads one representation, :class:`ScoreTable`: an items x models grid of
numbers, each cell a model's score (or a clinician's rank) on one item, with missing cells
allowed. It is built from long-format rows ``(item_id, model, value)`` — what a CSV or JSONL of
annotations holds — or from columns ``{model: [value per item]}``. ``higher_is_better`` says how
to read the values: True for metric scores and 1-5 ratings, False for ranks (1 = best).

Rules shared by every function:

- Values are compared exactly: two equal values are a tie. Round float scores first if noise
  in the last digits should count as a tie.
- A missing cell (``None`` in the input) takes no part in any comparison: a model without a
  value on an item is neither ranked nor in a battle there. NaN is refused as input, since it
  cannot be told apart from a bug; pass ``None`` for a missing value.
- Quantities that are 0/0 (a win rate with no battles, a Kendall tau of a constant ranking)
  are ``None`` or skipped and counted, never NaN.
- Rank 1 is the best model. Tied models share the average of the ranks they span by default
  (``ties="average"``: 1, 2.5, 2.5, 4), or the best of them (``ties="min"``, competition
  ranking: 1, 2, 2, 4).

How far two rankings agree (Kendall tau between a metric and clinicians or between clinicians,
rank instability over repeated runs, a judge's reproduction of reference orderings) is in
:mod:`clinieval.analysis.rank_agreement`, which follows the same rules.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import Literal

import numpy as np
import numpy.typing as npt

from clinieval.errors import UserError

__all__ = [
    "HeadToHead",
    "PairComparison",
    "PairOutcome",
    "ScoreTable",
    "cell_value",
    "check_ties",
    "compare_pair_outcomes",
    "head_to_head",
    "mean_ranks",
    "pair_outcomes",
    "rank_scores",
    "rank_table",
    "win_rate_errors",
    "win_rates",
]

Ties = Literal["average", "min"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def cell_value(value: float | None, where: str) -> float:
    """A cell as stored: NaN marks a missing value, so a NaN given as input is refused."""
    if value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{where} is {value!r}, not a number") from None
    if math.isnan(number):
        raise UserError(f"{where} is NaN; pass None for a missing value")
    return number


def check_ties(ties: str) -> None:
    """A UserError unless ``ties`` is a tie convention the rank functions know."""
    if ties not in ("average", "min"):
        raise UserError(f"ties must be 'average' or 'min', not {ties!r}")


def _duplicates(names: Sequence[str]) -> list[str]:
    return sorted(name for name, n in Counter(names).items() if n > 1)


@dataclass(frozen=True, eq=False)
class ScoreTable:
    """Items x models values; ``values[i, j]`` is model ``models[j]`` on item ``items[i]``.

    In ``values`` a missing cell is NaN (the only place NaN appears, and only as "missing"); the
    constructors take ``None`` for it. The array is copied and made read-only.
    """

    items: tuple[str, ...]
    models: tuple[str, ...]
    values: FloatArray
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        values = np.array(self.values, dtype=np.float64)
        if values.shape != (len(self.items), len(self.models)):
            raise UserError(
                f"values has shape {values.shape} but there are {len(self.items)} items and"
                f" {len(self.models)} models; give one row per item and one column per model"
            )
        for kind, names in (("item", self.items), ("model", self.models)):
            dup = _duplicates(names)
            if dup:
                raise UserError(f"duplicate {kind} name(s) {dup}; each {kind} must appear once")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, str, float | None]], *, higher_is_better: bool = True
    ) -> ScoreTable:
        """From long-format ``(item_id, model, value)`` rows; items and models keep first-seen order.

        A pair absent from the rows, or given with ``None``, is missing. A repeated pair is a
        UserError (average repeats, or pick one annotator, before building the table).
        """
        cells: dict[tuple[str, str], float] = {}
        items: dict[str, None] = {}
        models: dict[str, None] = {}
        for item, model, value in rows:
            if (item, model) in cells:
                raise UserError(
                    f"item {item!r} has two values for model {model!r}; give one row per item and model"
                )
            cells[(item, model)] = cell_value(value, f"value of item {item!r}, model {model!r}")
            items.setdefault(item)
            models.setdefault(model)
        if not cells:
            raise UserError("no rows given: a score table needs at least one (item, model, value) row")
        col = {m: j for j, m in enumerate(models)}
        row = {it: i for i, it in enumerate(items)}
        values = np.full((len(items), len(models)), np.nan)
        for (item, model), v in cells.items():
            values[row[item], col[model]] = v
        return cls(tuple(items), tuple(models), values, higher_is_better)

    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, Sequence[float | None]],
        *,
        items: Sequence[str] | None = None,
        higher_is_better: bool = True,
    ) -> ScoreTable:
        """From ``{model: [value per item]}``, all columns aligned; items default to "0", "1", ..."""
        if not columns:
            raise UserError("no models given: a score table needs at least one column")
        lengths = {m: len(v) for m, v in columns.items()}
        if len(set(lengths.values())) != 1:
            raise UserError(f"columns have different lengths {lengths}; give every model one value per item")
        n = next(iter(lengths.values()))
        names = tuple(items) if items is not None else tuple(str(i) for i in range(n))
        if len(names) != n:
            raise UserError(f"{len(names)} item names for columns of {n} values; give one name per row")
        values = np.array(
            [
                [cell_value(v, f"value {i} of model {m!r}") for i, v in enumerate(col)]
                for m, col in columns.items()
            ],
            dtype=np.float64,
        ).reshape(len(columns), n)
        return cls(names, tuple(columns), values.T, higher_is_better)

    @cached_property
    def _item_index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.items)}

    @cached_property
    def _goodness(self) -> FloatArray:
        good = self.values if self.higher_is_better else -self.values
        good.setflags(write=False)
        return good

    def present(self) -> npt.NDArray[np.bool_]:
        """Mask of the cells that hold a value."""
        return ~np.isnan(self.values)

    def goodness(self) -> FloatArray:
        """Values oriented so that higher is better (ranks are negated)."""
        return self._goodness

    def row(self, item: str) -> list[float | None]:
        """One item's values in model order, ``None`` where missing."""
        if item not in self._item_index:
            raise UserError(f"item {item!r} is not in the table")
        return [None if math.isnan(v) else float(v) for v in self.values[self._item_index[item]]]

    def has_item(self, item: str) -> bool:
        return item in self._item_index

    def item_goodness(self, item: str) -> FloatArray:
        """One item's values oriented so that higher is better, NaN where missing."""
        if item not in self._item_index:
            raise UserError(f"item {item!r} is not in the table")
        row: FloatArray = self._goodness[self._item_index[item]]
        return row

    def restrict(
        self, *, items: Sequence[str] | None = None, models: Sequence[str] | None = None
    ) -> ScoreTable:
        """The sub-table of the given items and models, in the order given."""
        items = self.items if items is None else tuple(items)
        models = self.models if models is None else tuple(models)
        model_index = {name: j for j, name in enumerate(self.models)}
        for kind, wanted, have in (("item", items, self._item_index), ("model", models, model_index)):
            unknown = [n for n in wanted if n not in have]
            if unknown:
                raise UserError(f"{kind}(s) {unknown} not in the table")
        rows = [self._item_index[i] for i in items]
        cols = [model_index[m] for m in models]
        return ScoreTable(tuple(items), tuple(models), self.values[np.ix_(rows, cols)], self.higher_is_better)


# --- ranks -------------------------------------------------------------------------------------


def _rank_desc(goodness: FloatArray, ties: Ties) -> FloatArray:
    """Ranks with 1 for the highest value."""
    from scipy.stats import rankdata

    return np.asarray(rankdata(-goodness, method=ties), dtype=np.float64)


def rank_scores(
    scores: Sequence[float], *, higher_is_better: bool = True, ties: Ties = "average"
) -> list[float]:
    """Ranks of one list of scores, 1 = best; ties share the average (or min) rank.

    Every score must be present: ``None`` or NaN is a UserError (drop the model first, or rank a
    :class:`ScoreTable`, which skips missing cells).
    """
    check_ties(ties)
    if len(scores) == 0:
        raise UserError("no scores to rank")
    if any(s is None for s in scores):
        raise UserError("a score to rank is None; drop missing scores first or use rank_table")
    arr = np.array([cell_value(s, f"score {i}") for i, s in enumerate(scores)], dtype=np.float64)
    return [float(r) for r in _rank_desc(arr if higher_is_better else -arr, ties)]


def rank_table(table: ScoreTable, *, ties: Ties = "average") -> ScoreTable:
    """Rank the models within each item (1 = best); missing cells stay missing.

    The result has ``higher_is_better=False``. Ranks run over the models present on the item,
    so on an item with two of four models scored the ranks are 1 and 2.
    """
    check_ties(ties)
    ranks = np.full(table.values.shape, np.nan)
    good = table.goodness()
    for i, mask in enumerate(table.present()):
        if mask.any():
            ranks[i, mask] = _rank_desc(good[i, mask], ties)
    return ScoreTable(table.items, table.models, ranks, higher_is_better=False)


def mean_ranks(
    table: ScoreTable, *, ties: Literal["average", "min", "as_given"] = "average"
) -> dict[str, float | None]:
    """Mean rank per model over the items it was ranked on (lower is better; MedAlign's "Rank").

    The table is re-ranked within each item with ``ties`` first. ``"as_given"`` averages the
    values as recorded instead, for a table of clinician ranks (``higher_is_better=False``) whose
    tie convention should be kept (e.g. dense ranks 1, 1, 2). ``None`` for a model with no value.
    """
    if ties == "as_given":
        if table.higher_is_better:
            raise UserError("ties='as_given' needs a table of ranks (higher_is_better=False)")
        ranks = table
    else:
        ranks = rank_table(table, ties=ties)
    out: dict[str, float | None] = {}
    for j, model in enumerate(ranks.models):
        col = ranks.values[:, j]
        col = col[~np.isnan(col)]
        out[model] = float(col.mean()) if col.size else None
    return out


# --- battles ------------------------------------------------------------------------------------


def _battles(table: ScoreTable) -> tuple[IntArray, IntArray, IntArray]:
    """Counts over items: wins[i, j] (i strictly better), ties[i, j], both[i, j] (both present)."""
    good = table.goodness()
    present = table.present()
    both = present[:, :, None] & present[:, None, :]
    wins = (both & (good[:, :, None] > good[:, None, :])).sum(axis=0)
    ties = (both & (good[:, :, None] == good[:, None, :])).sum(axis=0)
    n = len(table.models)
    off = ~np.eye(n, dtype=bool)
    return (
        np.where(off, wins, 0).astype(np.int64),
        np.where(off, ties, 0).astype(np.int64),
        np.where(off, both.sum(axis=0), 0).astype(np.int64),
    )


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """How ``model`` fared against ``opponent`` over the items where both have a value."""

    model: str
    opponent: str
    wins: int
    ties: int
    losses: int

    @property
    def battles(self) -> int:
        return self.wins + self.ties + self.losses

    def _share(self, count: int, total: int) -> float | None:
        return count / total if total else None

    def win_share(self, *, exclude_ties: bool = False) -> float | None:
        """Wins over all battles, or over the non-tied ones; ``None`` with no such battle."""
        return self._share(self.wins, self.wins + self.losses if exclude_ties else self.battles)

    def tie_share(self) -> float | None:
        return self._share(self.ties, self.battles)

    def loss_share(self, *, exclude_ties: bool = False) -> float | None:
        return self._share(self.losses, self.wins + self.losses if exclude_ties else self.battles)


def pair_outcomes(table: ScoreTable) -> list[PairOutcome]:
    """Win, tie and loss counts for every unordered pair of models, in table order (i before j).

    AutoMedEval's win/tie rates per pair of judged models: build one table from physician scores
    and one from judge scores, or use :func:`compare_pair_outcomes` for both side by side.
    """
    if len(table.models) < 2:
        raise UserError("pairwise outcomes need at least two models")
    wins, ties, _ = _battles(table)
    return [
        PairOutcome(table.models[i], table.models[j], int(wins[i, j]), int(ties[i, j]), int(wins[j, i]))
        for i, j in combinations(range(len(table.models)), 2)
    ]


@dataclass(frozen=True, slots=True)
class HeadToHead:
    """MedAlign's head-to-head matrix.

    ``rates[i][j]`` = share of battles model ``i`` won strictly against model ``j``; a battle is
    an item where both have a value (``exclude_ties=False``) or, in the second variant, where
    both have a value and differ. ``battles[i][j]`` is that denominator. The diagonal, and any
    cell without a battle, is ``None``.
    """

    models: tuple[str, ...]
    rates: tuple[tuple[float | None, ...], ...]
    battles: tuple[tuple[int, ...], ...]
    exclude_ties: bool

    def rate(self, model: str, opponent: str) -> float | None:
        if model not in self.models or opponent not in self.models:
            raise UserError(f"model {model!r} or {opponent!r} is not in the matrix")
        return self.rates[self.models.index(model)][self.models.index(opponent)]


def head_to_head(table: ScoreTable, *, exclude_ties: bool = False) -> HeadToHead:
    """Head-to-head matrix of strict-win shares (see :class:`HeadToHead`)."""
    if len(table.models) < 2:
        raise UserError("a head-to-head matrix needs at least two models")
    wins, ties, both = _battles(table)
    den = both - ties if exclude_ties else both
    n = len(table.models)
    rates = tuple(
        tuple(None if i == j or den[i, j] == 0 else float(wins[i, j] / den[i, j]) for j in range(n))
        for i in range(n)
    )
    battles = tuple(tuple(0 if i == j else int(den[i, j]) for j in range(n)) for i in range(n))
    return HeadToHead(table.models, rates, battles, exclude_ties)


def win_rates(table: ScoreTable, *, exclude_ties: bool = False) -> dict[str, float | None]:
    """WR per model: the mean of its head-to-head cells against every other model.

    Each pairing weighs the same however many items it spans (MedAlign: "average win rate over
    all pairings"). Pairings with no battle are left out of the mean; ``None`` if none is left.
    """
    matrix = head_to_head(table, exclude_ties=exclude_ties)
    out: dict[str, float | None] = {}
    for model, row in zip(matrix.models, matrix.rates, strict=True):
        cells = [c for c in row if c is not None]
        out[model] = sum(cells) / len(cells) if cells else None
    return out


def _aligned(human: ScoreTable, other: ScoreTable, what: str) -> tuple[ScoreTable, ScoreTable]:
    """Both tables over the same models (human order) and the items they share."""
    if set(human.models) != set(other.models):
        raise UserError(
            f"human and {what} tables rate different models: {sorted(set(human.models) ^ set(other.models))}"
            " appear in only one; restrict both to the same models"
        )
    shared = [i for i in human.items if other.has_item(i)]
    if not shared:
        raise UserError(f"human and {what} tables share no item; check the item ids")
    return human.restrict(items=shared), other.restrict(items=shared, models=human.models)


def win_rate_errors(
    human: ScoreTable, metric: ScoreTable, *, exclude_ties: bool = False
) -> dict[str, float | None]:
    """|human WR - metric WR| per model, both computed on the items the tables share.

    The metric's win rates come from the ranking it induces on each item, exactly as the human
    ones; ``None`` where either win rate is undefined.
    """
    h, m = _aligned(human, metric, "metric")
    wr_h = win_rates(h, exclude_ties=exclude_ties)
    wr_m = win_rates(m, exclude_ties=exclude_ties)
    out: dict[str, float | None] = {}
    for model in h.models:
        a, b = wr_h[model], wr_m[model]
        out[model] = None if a is None or b is None else abs(a - b)
    return out


@dataclass(frozen=True, slots=True)
class PairComparison:
    """One pair of models as physicians and as the judge saw it, over the same items."""

    model: str
    opponent: str
    human: PairOutcome
    judge: PairOutcome


def compare_pair_outcomes(human: ScoreTable, judge: ScoreTable) -> list[PairComparison]:
    """Win/tie/loss per pair by physicians and by the judge side by side (AutoMedEval).

    Both are counted on the items the two tables share; an item where the judge output could
    not be parsed (missing cells) is no battle on the judge side, so the battle counts show it.
    """
    h, j = _aligned(human, judge, "judge")
    return [
        PairComparison(a.model, a.opponent, a, b)
        for a, b in zip(pair_outcomes(h), pair_outcomes(j), strict=True)
    ]
