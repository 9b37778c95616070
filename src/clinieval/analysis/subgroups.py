"""Is an outcome independent of a subgroup? Chi-square tests of independence, one per attribute.

Why a module of its own: MedAlign's bias analysis (correctness by age group, gender, race,
ethnicity), which ``clinieval analyze --correct --group`` offers over any table, is a question
apart from :mod:`clinieval.analysis.uncertainty`'s (how sure is a mean or a paired difference):
contingency tables, weighted counts for items judged several times, and Bonferroni over the
attributes (:func:`clinieval.analysis.uncertainty.bonferroni`). Same conventions: bad input is a
one-line UserError, a test the data cannot define an UndefinedStatisticError, never NaN; scipy is
imported only inside the functions that need it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis._validation import FloatArray, UndefinedStatisticError, vector
from clinieval.analysis.uncertainty import bonferroni
from clinieval.errors import UserError

__all__ = ["ChiSquare", "SubgroupChiSquare", "chi_square_independence", "subgroup_chi_square"]


@dataclass(frozen=True, slots=True)
class ChiSquare:
    """Pearson's chi-square test of independence on a contingency table.

    ``min_expected`` is reported because the chi-square approximation is doubtful when an expected
    count is below 5; ``yates`` says whether Yates' correction was actually applied.
    """

    statistic: float
    pvalue: float
    dof: int
    n: int
    min_expected: float
    yates: bool


def chi_square_independence(
    table: Sequence[Sequence[float]] | NDArray[np.generic], *, yates: bool = False
) -> ChiSquare:
    """Chi-square test that rows and columns of a table of counts are independent.

    statistic = sum (O - E)^2 / E with E = row total x column total / N, on (r-1)(c-1) df.
    Yates' continuity correction is off by default (the plain Pearson test, which MedAlign's
    "chi-square test" is read as); with ``yates=True`` it is applied to 2x2 tables only, shrinking
    each |O - E| by min(0.5, |O - E|) as scipy does, and never to larger tables. A row or column
    with no counts (an empty subgroup, an outcome nobody had) leaves the test undefined:
    UndefinedStatisticError.
    """
    from scipy import stats

    try:
        obs = np.asarray(table, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError("table must be a rectangular table of counts") from None
    if obs.ndim != 2 or obs.shape[0] < 2 or obs.shape[1] < 2:
        raise UserError(f"table must have at least 2 rows and 2 columns, got shape {obs.shape}")
    if not np.all(np.isfinite(obs)) or np.any(obs < 0):
        raise UserError("table must hold non-negative counts")
    rows, cols, total = obs.sum(axis=1), obs.sum(axis=0), float(obs.sum())
    if np.any(rows == 0) or np.any(cols == 0):
        raise UndefinedStatisticError("a row or column of the table is all zero: chi-square is undefined")
    expected = np.outer(rows, cols) / total
    dof = (obs.shape[0] - 1) * (obs.shape[1] - 1)
    gap = np.abs(obs - expected)
    applied = yates and dof == 1
    if applied:
        gap = gap - np.minimum(0.5, gap)
    stat = float((gap**2 / expected).sum())
    return ChiSquare(
        statistic=stat,
        pvalue=float(stats.chi2.sf(stat, dof)),
        dof=dof,
        n=round(total),
        min_expected=float(expected.min()),
        yates=applied,
    )


@dataclass(frozen=True, slots=True)
class SubgroupChiSquare:
    """One attribute's chi-square test; ``pvalue_adjusted`` is Bonferroni over all attributes tested."""

    attribute: str
    groups: tuple[str, ...]
    outcomes: tuple[str, ...]
    table: tuple[tuple[float, ...], ...]
    test: ChiSquare
    pvalue_adjusted: float


def _sorted_levels(values: Sequence[Hashable]) -> list[Hashable]:
    uniq = list(dict.fromkeys(values))
    try:
        return sorted(uniq)  # type: ignore[type-var]
    except TypeError:
        return sorted(uniq, key=str)


def _crosstab(
    groups: Sequence[Hashable], outcome: Sequence[Hashable], weights: Sequence[float]
) -> tuple[list[Hashable], list[Hashable], FloatArray]:
    g_levels, o_levels = _sorted_levels(groups), _sorted_levels(outcome)
    gi = {v: i for i, v in enumerate(g_levels)}
    oi = {v: i for i, v in enumerate(o_levels)}
    table = np.zeros((len(g_levels), len(o_levels)), dtype=np.float64)
    cells = ([gi[v] for v in groups], [oi[v] for v in outcome])
    np.add.at(table, cells, np.asarray(weights, dtype=np.float64))
    return g_levels, o_levels, table


def _count(value: float) -> float:
    """A table cell as JSON shows it: a whole count as an int, a share of judge runs as a float."""
    return int(value) if float(value).is_integer() else float(value)


def _outcome_weights(out: list[Hashable], weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(out)
    w = vector(weights, "weights", min_n=0)
    if w.size != len(out):
        raise UserError(f"weights has {w.size} values but outcome has {len(out)}")
    if np.any(w < 0):
        raise UserError("weights must be non-negative")
    return [float(v) for v in w]


def subgroup_chi_square(
    outcome: Sequence[Hashable],
    attributes: Mapping[str, Sequence[Hashable | None]],
    *,
    yates: bool = False,
    weights: Sequence[float] | None = None,
) -> list[SubgroupChiSquare]:
    """Is the outcome (e.g. correct/incorrect) independent of each sensitive attribute?

    MedAlign's bias analysis: one chi-square test per attribute (age group, gender, race,
    ethnicity) on the attribute x outcome table, p-values Bonferroni-adjusted over the attributes.
    Items whose attribute is None are left out of that attribute's table only. An attribute with
    a single group, or an outcome that never varies, raises UndefinedStatisticError naming it.
    Yates' correction: see :func:`chi_square_independence` (off by default).

    ``weights`` (one per outcome entry, default 1) let one item count once when its outcome is a
    share: an item a judge called correct in 3 of 5 runs is two entries, correct with weight 0.6
    and incorrect with 0.4, so the table's total is the number of items, not of judge runs.
    Entries of weight 0 are left out.
    """
    out = list(outcome)
    if not out:
        raise UserError("outcome is empty")
    if not attributes:
        raise UserError("no attributes to test")
    w = _outcome_weights(out, weights)
    tests: list[tuple[str, list[Hashable], list[Hashable], FloatArray, ChiSquare]] = []
    for name, values in attributes.items():
        vals = list(values)
        if len(vals) != len(out):
            raise UserError(f"attribute {name!r} has {len(vals)} values but outcome has {len(out)}")
        keep = [i for i, v in enumerate(vals) if v is not None and w[i] > 0]
        g_levels, o_levels, table = _crosstab(
            [vals[i] for i in keep], [out[i] for i in keep], [w[i] for i in keep]
        )
        if len(g_levels) < 2 or len(o_levels) < 2:
            which = "one group" if len(g_levels) < 2 else "one outcome"
            raise UndefinedStatisticError(f"attribute {name!r} has only {which}: chi-square is undefined")
        tests.append((name, g_levels, o_levels, table, chi_square_independence(table, yates=yates)))
    adjusted = bonferroni([t[4].pvalue for t in tests])
    return [
        SubgroupChiSquare(
            attribute=name,
            groups=tuple(map(str, g)),
            outcomes=tuple(map(str, o)),
            table=tuple(tuple(_count(v) for v in row) for row in table),
            test=test,
            pvalue_adjusted=adj,
        )
        for (name, g, o, table, test), adj in zip(tests, adjusted, strict=True)
    ]
