"""Correlation and agreement: between a metric and clinicians, and between clinicians.

MedAlign judges automated metrics by their Kendall tau with clinician rankings and compares two
metrics with a Fisher-Z test; AutoMedEval reports ICC and Krippendorff's alpha between doctors and
Spearman/Pearson between its judge and humans. Everything those conclusions rest on is here.

Conventions shared by every function:

* Bad input (mismatched lengths, too few items, NaN, a level outside (0, 1)) raises
  :class:`~clinieval.errors.UserError` with one actionable line.
* Valid input for which the statistic has no value (a constant variable, all ratings equal) raises
  :class:`UndefinedStatisticError`, a ``UserError`` subclass, so loops over many groups can skip
  and count such groups. No function returns NaN.
* scipy is imported inside the functions that need it; importing this module costs only numpy.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis._validation import (
    FloatArray,
    UndefinedStatisticError,
    is_real,
    paired,
    positive_int,
)
from clinieval.analysis._validation import level as check_level
from clinieval.errors import UserError

__all__ = [
    "ICC",
    "Correlation",
    "ICCKind",
    "UndefinedStatisticError",
    "ZTest",
    "cohen_kappa",
    "compare_dependent_correlations",
    "compare_independent_correlations",
    "fisher_z_ci",
    "intraclass_correlation",
    "kappa_of_tables",
    "kendall_tau",
    "krippendorff_alpha",
    "pearson",
    "point_biserial",
    "spearman",
]

ArrayLike1D: TypeAlias = Sequence[float] | NDArray[np.generic]


@dataclass(frozen=True, slots=True)
class Correlation:
    """A correlation coefficient with its two-sided p-value (H0: no association)."""

    statistic: float
    pvalue: float
    n: int
    method: str


@dataclass(frozen=True, slots=True)
class ZTest:
    """A two-sided z test: the standard-normal statistic and its p-value."""

    z: float
    pvalue: float


# --------------------------------------------------------------------------------------------
# Correlations


def _not_constant(arr: FloatArray, name: str, what: str) -> None:
    if np.ptp(arr) == 0:
        raise UndefinedStatisticError(f"{name} is constant: {what} is undefined")


def _correlation_inputs(
    x: ArrayLike1D, y: ArrayLike1D, what: str, min_n: int
) -> tuple[FloatArray, FloatArray]:
    a, b = paired(x, y, min_n=min_n)
    _not_constant(a, "x", what)
    _not_constant(b, "y", what)
    return a, b


def _result(stat: float, pvalue: float, n: int, method: str) -> Correlation:
    # Inputs are finite and non-constant, so scipy has a value; this guards a future scipy change.
    if not (math.isfinite(stat) and math.isfinite(pvalue)):
        raise UndefinedStatisticError(f"{method} has no finite value for this input")
    return Correlation(statistic=stat, pvalue=pvalue, n=n, method=method)


def kendall_tau(x: ArrayLike1D, y: ArrayLike1D, *, variant: Literal["b", "c"] = "b") -> Correlation:
    """Kendall's tau-b (ties adjusted; square tables) or tau-c (Stuart's; rectangular tables).

    MedAlign's metric-human agreement is tau-b between the ranking a metric induces over one
    instruction's responses and the clinician ranking. The p-value is scipy's (exact for small
    tie-free samples, normal approximation otherwise); for tau-c it tests the same null as tau-b.
    Needs 2 items; a constant ``x`` or ``y`` (every response tied) raises UndefinedStatisticError.
    """
    if variant not in ("b", "c"):
        raise UserError(f"variant must be 'b' or 'c', got {variant!r}")
    from scipy import stats

    a, b = _correlation_inputs(x, y, f"Kendall's tau-{variant}", min_n=2)
    res = stats.kendalltau(a, b, variant=variant)
    return _result(float(res.statistic), float(res.pvalue), a.size, f"kendall_tau_{variant}")


def spearman(x: ArrayLike1D, y: ArrayLike1D) -> Correlation:
    """Spearman's rho (Pearson on mid-ranks); p-value from the t approximation. Needs 3 items."""
    from scipy import stats

    a, b = _correlation_inputs(x, y, "Spearman's rho", min_n=3)
    res = stats.spearmanr(a, b)
    return _result(float(res.statistic), float(res.pvalue), a.size, "spearman")


def pearson(x: ArrayLike1D, y: ArrayLike1D) -> Correlation:
    """Pearson's r with the exact p-value under bivariate normality. Needs 3 items."""
    from scipy import stats

    a, b = _correlation_inputs(x, y, "Pearson's r", min_n=3)
    res = stats.pearsonr(a, b)
    return _result(float(res.statistic), float(res.pvalue), a.size, "pearson")


def point_biserial(binary: ArrayLike1D, values: ArrayLike1D) -> Correlation:
    """Correlation between a two-valued variable (e.g. correct 1/0) and a continuous one (e.g. rank).

    Numerically Pearson's r with the binary variable as coded, so the sign follows the coding:
    MedAlign's correctness (1 = correct) against rank (1 = best) is expected strongly negative.
    ``binary`` must take exactly two distinct values; one value only raises
    UndefinedStatisticError, three or more a UserError. Needs 3 items.
    """
    from scipy import stats

    a, b = paired(binary, values, min_n=3, names=("binary", "values"))
    levels = np.unique(a)
    if levels.size > 2:
        raise UserError(f"binary must take exactly two values (e.g. 0/1), got {levels.size} distinct values")
    _not_constant(a, "binary", "the point-biserial correlation")
    _not_constant(b, "values", "the point-biserial correlation")
    res = stats.pointbiserialr(a, b)
    return _result(float(res.statistic), float(res.pvalue), a.size, "point_biserial")


# --------------------------------------------------------------------------------------------
# Fisher's z


def _fisher_z(r: float, name: str) -> float:
    if not is_real(r) or not -1.0 < r < 1.0:
        if is_real(r) and abs(r) == 1.0:
            raise UndefinedStatisticError(f"{name} = {r}: Fisher's z is infinite for a perfect correlation")
        raise UserError(f"{name} must be a correlation strictly between -1 and 1, got {r!r}")
    return math.atanh(r)


def _n_above_3(n: int, name: str) -> int:
    return positive_int(n, name, minimum=4)


def _two_sided_normal(z: float) -> float:
    from scipy import stats

    return float(2.0 * stats.norm.sf(abs(z)))


def fisher_z_ci(r: float, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Confidence interval for a Pearson-type correlation: tanh(atanh(r) +- z / sqrt(n - 3)).

    Exact in the limit for Pearson's r under bivariate normality; for Spearman or Kendall it is the
    usual approximation. Needs n >= 4 and |r| < 1.
    """
    from scipy import stats

    lvl = check_level(level)
    z = _fisher_z(r, "r")
    half = float(stats.norm.ppf(0.5 + lvl / 2.0)) / math.sqrt(_n_above_3(n, "n") - 3)
    return (math.tanh(z - half), math.tanh(z + half))


def compare_independent_correlations(r1: float, n1: int, r2: float, n2: int) -> ZTest:
    """Are two correlations from independent samples different? Fisher's z test.

    z = (atanh r1 - atanh r2) / sqrt(1/(n1 - 3) + 1/(n2 - 3)), two-sided p from the normal.
    Use it when the two correlations come from disjoint sets of items (e.g. two datasets).
    """
    z1, z2 = _fisher_z(r1, "r1"), _fisher_z(r2, "r2")
    se = math.sqrt(1.0 / (_n_above_3(n1, "n1") - 3) + 1.0 / (_n_above_3(n2, "n2") - 3))
    z = (z1 - z2) / se
    return ZTest(z=z, pvalue=_two_sided_normal(z))


def compare_dependent_correlations(r_jk: float, r_jh: float, r_kh: float, n: int) -> ZTest:
    """Do k and h correlate differently with a shared j, on the same n items? Meng-Rosenthal-Rubin.

    MedAlign's case: j = clinician ranking, k and h = two metrics, all on the same items, so the two
    correlations are dependent and the independent-samples test would be wrong (usually too
    conservative, since metrics correlate with each other). Meng, Rosenthal & Rubin (1992):

        rbar2 = (r_jk^2 + r_jh^2) / 2
        f     = min(1, (1 - r_kh) / (2 (1 - rbar2)))
        h     = (1 - f rbar2) / (1 - rbar2)
        z     = (atanh r_jk - atanh r_jh) * sqrt((n - 3) / (2 (1 - r_kh) h))

    Chosen over Steiger's (1980) Z2* because it is closed form and reported as equally accurate;
    both assume Pearson-type correlations, so for Kendall tau it is an approximation.
    The three correlations must be jointly possible (a positive semi-definite matrix).
    """
    zjk, zjh = _fisher_z(r_jk, "r_jk"), _fisher_z(r_jh, "r_jh")
    if not is_real(r_kh) or not -1.0 < r_kh < 1.0:
        if is_real(r_kh) and r_kh == 1.0:
            raise UndefinedStatisticError("r_kh = 1: k and h are the same variable, nothing to compare")
        if is_real(r_kh) and r_kh == -1.0:
            raise UndefinedStatisticError("r_kh = -1: k is h reversed, and the test divides by zero")
        raise UserError(f"r_kh must be a correlation strictly between -1 and 1, got {r_kh!r}")
    det = 1 - r_jk**2 - r_jh**2 - r_kh**2 + 2 * r_jk * r_jh * r_kh
    if det < -1e-12:
        # undefined rather than a mistake: averaged per-item taus need not form a valid matrix
        raise UndefinedStatisticError(
            f"correlations r_jk={r_jk}, r_jh={r_jh}, r_kh={r_kh} cannot hold together (not a valid matrix)"
        )
    m = _n_above_3(n, "n")
    rbar2 = (r_jk**2 + r_jh**2) / 2.0
    f = min(1.0, (1.0 - r_kh) / (2.0 * (1.0 - rbar2)))
    h = (1.0 - f * rbar2) / (1.0 - rbar2)
    z = (zjk - zjh) * math.sqrt((m - 3) / (2.0 * (1.0 - r_kh) * h))
    return ZTest(z=z, pvalue=_two_sided_normal(z))


# --------------------------------------------------------------------------------------------
# Cohen's kappa


def _label_order(
    a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None
) -> list[Hashable]:
    seen = set(a) | set(b)
    if labels is not None:
        order = list(labels)
        if len(set(order)) != len(order):
            raise UserError("labels contains duplicates")
        missing = seen - set(order)
        if missing:
            raise UserError(f"ratings use labels not in `labels`: {sorted(map(repr, missing))}")
        return order
    try:
        return sorted(seen)  # type: ignore[type-var]
    except TypeError:
        raise UserError("labels of mixed types cannot be ordered; pass labels=[...] explicitly") from None


def cohen_kappa(
    rater_a: Sequence[Hashable],
    rater_b: Sequence[Hashable],
    *,
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence[Hashable] | None = None,
) -> float:
    """Cohen's kappa between two raters labelling the same items: agreement beyond chance.

    kappa = 1 - sum(w * observed) / sum(w * expected), where observed is the joint label table,
    expected the product of the two raters' marginals, and w the disagreement weight: 1 off the
    diagonal (unweighted), |i - j| (linear) or (i - j)^2 (quadratic) over label positions. Weighted
    kappa needs ordered labels: by default the sorted labels, or ``labels`` in the order given
    (pass it for ordinal strings like "low" < "mid" < "high"). Labels must be hashable; None is not
    treated as missing. When chance agreement is already perfect (both raters always use the same
    single label, or a single item) kappa is 0/0 and UndefinedStatisticError is raised.
    """
    a, b = list(rater_a), list(rater_b)
    if len(a) != len(b):
        raise UserError(f"rater_a has {len(a)} labels but rater_b has {len(b)}; rate the same items")
    if not a:
        raise UserError("no items to compare: rater_a and rater_b are empty")
    if weights not in (None, "linear", "quadratic"):
        raise UserError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    order = _label_order(a, b, labels)
    index = {lab: i for i, lab in enumerate(order)}
    q = len(order)
    table = np.zeros((q, q), dtype=np.float64)
    np.add.at(table, ([index[v] for v in a], [index[v] for v in b]), 1.0)
    kappa = float(kappa_of_tables(table, weights=weights))
    if math.isnan(kappa):
        raise UndefinedStatisticError(
            "chance disagreement is zero (one label throughout): kappa is undefined"
        )
    return kappa


def kappa_of_tables(
    tables: FloatArray, *, weights: Literal["linear", "quadratic"] | None = None
) -> FloatArray:
    """Cohen's kappa of joint label tables (... x q x q, rows one rater's labels, columns the
    other's, in label order), NaN where it is undefined (no unit, or chance disagreement zero).

    The formula of :func:`cohen_kappa`, over any number of tables at once: a bootstrap of kappa
    (the review app's) resamples the items' tables and needs thousands of kappas per view."""
    q = tables.shape[-1]
    pos = np.arange(q, dtype=np.float64)
    diff = np.abs(pos[:, None] - pos[None, :])
    w = (diff > 0).astype(np.float64) if weights is None else diff if weights == "linear" else diff**2
    n = tables.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = tables / n[..., None, None]
        expected = observed.sum(axis=-1)[..., :, None] * observed.sum(axis=-2)[..., None, :]
        chance = (w * expected).sum(axis=(-2, -1))
        kappa = 1.0 - (w * observed).sum(axis=(-2, -1)) / chance
    return np.asarray(np.where((n > 0) & (chance > 1e-15), kappa, np.nan), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Krippendorff's alpha

AlphaLevel: TypeAlias = Literal["nominal", "ordinal", "interval", "ratio"]


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float | np.floating) and math.isnan(v))


def _coded_units(
    data: Sequence[Sequence[object]] | NDArray[np.generic], scale: AlphaLevel
) -> tuple[NDArray[np.int64], list[object]]:
    """Reliability data (raters x units) as value codes (-1 = missing) and the sorted value domain."""
    rows = [list(r) for r in data]
    if len(rows) < 2:
        raise UserError(f"reliability data needs at least 2 raters (rows), got {len(rows)}")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise UserError("every rater (row) must have one entry per unit; use None for a missing rating")
    present = {v for r in rows for v in r if not _is_missing(v)}
    if scale != "nominal":
        bad = [v for v in present if not is_real(v) or not math.isfinite(float(v))]
        if bad:
            raise UserError(f"{scale} alpha needs numeric ratings; got {bad[0]!r}")
    try:
        domain: list[object] = sorted(present)
    except TypeError:
        domain = list(present)  # nominal labels of mixed types: order is irrelevant there
    code = {v: i for i, v in enumerate(domain)}
    codes = np.array([[-1 if _is_missing(v) else code[v] for v in r] for r in rows], dtype=np.int64)
    return codes.reshape(len(rows), width), domain


def _coincidences(codes: NDArray[np.int64], n_values: int) -> FloatArray:
    """The coincidence matrix: each unit's ordered pairs of values, weighted 1 / (m_u - 1)."""
    n_units = codes.shape[1]
    counts = np.zeros((n_units, n_values), dtype=np.float64)
    rater_idx, unit_idx = np.nonzero(codes >= 0)
    np.add.at(counts, (unit_idx, codes[rater_idx, unit_idx]), 1.0)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    scaled = counts / (m - 1.0)[:, None]
    return np.asarray(scaled.T @ counts - np.diag(scaled.sum(axis=0)), dtype=np.float64)


def _squared_distances(domain: list[object], marginals: FloatArray, scale: AlphaLevel) -> FloatArray:
    q = len(domain)
    if scale == "nominal":
        return 1.0 - np.eye(q)
    v = np.array(domain, dtype=np.float64)
    if scale == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if scale == "ratio":
        if np.any(v < 0):
            raise UserError("ratio alpha needs non-negative ratings")
        total = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(total > 0, (v[:, None] - v[None, :]) / total, 0.0)
        return np.asarray(d**2, dtype=np.float64)
    # ordinal: the mass of values between c and k (inclusive), less half of each end's own mass.
    cum = np.cumsum(marginals)
    lo, hi = np.minimum.outer(np.arange(q), np.arange(q)), np.maximum.outer(np.arange(q), np.arange(q))
    between = cum[hi] - cum[lo] + marginals[lo]
    return np.asarray((between - (marginals[:, None] + marginals[None, :]) / 2.0) ** 2, dtype=np.float64)


def krippendorff_alpha(
    data: Sequence[Sequence[object]] | NDArray[np.generic], *, level_of_measurement: AlphaLevel = "interval"
) -> float:
    """Krippendorff's alpha = 1 - observed / expected disagreement, for any number of raters.

    ``data`` is reliability data: one row per rater, one column per unit, None (or NaN) where a
    rater did not rate a unit. Units rated by fewer than two raters carry no pairs and are ignored.
    With the coincidence matrix o, its marginals n_c, n = sum n_c and squared distance d2:
    alpha = 1 - (n - 1) * sum(o * d2) / sum(n_c n_k d2). Distances: nominal (0/1), ordinal (rank
    mass between the two values), interval ((c - k)^2), ratio (((c - k)/(c + k))^2), as in
    Krippendorff (2011), "Computing Krippendorff's alpha-reliability". Nominal labels may be any
    hashable; the other levels need numbers. No pairable values raises UserError; all pairable
    values equal (no expected disagreement) raises UndefinedStatisticError.
    """
    if level_of_measurement not in ("nominal", "ordinal", "interval", "ratio"):
        raise UserError(
            f"level_of_measurement must be nominal, ordinal, interval or ratio, got {level_of_measurement!r}"
        )
    codes, domain = _coded_units(data, level_of_measurement)
    o = _coincidences(codes, len(domain))
    marginals = o.sum(axis=1)
    n = float(marginals.sum())
    if n < 2:
        raise UserError("no unit was rated by two or more raters: alpha needs overlapping ratings")
    d2 = _squared_distances(domain, marginals, level_of_measurement)
    expected = float((np.outer(marginals, marginals) * d2).sum())
    if expected <= 0:
        raise UndefinedStatisticError("all pairable ratings are identical: alpha is undefined (no variation)")
    return 1.0 - (n - 1.0) * float((o * d2).sum()) / expected


# --------------------------------------------------------------------------------------------
# Intraclass correlation

ICCKind: TypeAlias = Literal["ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k"]
ICC_KINDS: tuple[ICCKind, ...] = ("ICC1", "ICC2", "ICC3", "ICC1k", "ICC2k", "ICC3k")
_ICC_NAMES: dict[ICCKind, str] = {
    "ICC1": "ICC(1,1) one-way random, single rater",
    "ICC2": "ICC(A,1) two-way random, absolute agreement, single rater",
    "ICC3": "ICC(C,1) two-way mixed, consistency, single rater",
    "ICC1k": "ICC(1,k) one-way random, mean of k raters",
    "ICC2k": "ICC(A,k) two-way random, absolute agreement, mean of k raters",
    "ICC3k": "ICC(C,k) two-way mixed, consistency, mean of k raters",
}


@dataclass(frozen=True, slots=True)
class ICC:
    """One intraclass correlation with its F test (H0: ICC = 0) and confidence interval."""

    kind: ICCKind
    description: str
    icc: float
    f: float
    df1: int
    df2: int
    pvalue: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True, slots=True)
class _MeanSquares:
    n: int  # targets (items)
    k: int  # raters
    rows: float  # between targets
    cols: float  # between raters
    error: float  # residual (target x rater interaction)
    within: float  # within targets (raters + residual), the one-way model's error


def _mean_squares(ratings: Sequence[Sequence[float]] | NDArray[np.generic]) -> _MeanSquares:
    try:
        x = np.asarray(ratings, dtype=np.float64)
    except (TypeError, ValueError):
        raise UserError(
            "ratings must be a complete numeric table: items as rows, raters as columns"
        ) from None
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise UserError(f"ratings must be items x raters with at least 2 of each, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise UserError("ratings contain NaN or infinite values; ICC needs every rater to rate every item")
    n, k = x.shape
    grand = x.mean()
    ss_total = float(((x - grand) ** 2).sum())
    ss_rows = float(k * ((x.mean(axis=1) - grand) ** 2).sum())
    ss_cols = float(n * ((x.mean(axis=0) - grand) ** 2).sum())
    # Sums of squares of ratings that are equal up to rounding are noise of this size, not variance.
    tiny = x.size * (64 * np.finfo(np.float64).eps * float(np.abs(x).max())) ** 2
    ss_error = ss_total - ss_rows - ss_cols
    ss_error = 0.0 if ss_error <= tiny else ss_error
    if ss_rows <= tiny:
        raise UndefinedStatisticError(
            "every item has the same mean rating: ICC is undefined (no variance between items)"
        )
    return _MeanSquares(
        n=n,
        k=k,
        rows=ss_rows / (n - 1),
        cols=ss_cols / (k - 1),
        error=ss_error / ((n - 1) * (k - 1)),
        within=(ss_cols + ss_error) / (n * (k - 1)),
    )


def _ratio(num: float, den: float) -> float:
    return math.inf if den == 0 else num / den


def _single(f: float, k: int) -> float:
    """ICC bound for one rater from an F bound; a perfect (infinite) F gives 1."""
    return 1.0 if math.isinf(f) else (f - 1.0) / (f + k - 1.0)


def _average(f: float) -> float:
    return 1.0 - 1.0 / f


def _f_ci(f: float, df1: int, df2: float, alpha: float) -> tuple[float, float]:
    from scipy import stats

    return (f / float(stats.f.ppf(1 - alpha / 2, df1, df2)), f * float(stats.f.ppf(1 - alpha / 2, df2, df1)))


def _icc2_ci(ms: _MeanSquares, icc2: float, alpha: float) -> tuple[float, float]:
    """McGraw & Wong (1996) CI for ICC(A,1), with Satterthwaite's degrees of freedom."""
    from scipy import stats

    n, k = ms.n, ms.k
    if ms.error == 0 and ms.cols == 0:
        return (1.0, 1.0)
    a = k * icc2 / (n * (1 - icc2))
    b = 1 + k * icc2 * (n - 1) / (n * (1 - icc2))
    v = (a * ms.cols + b * ms.error) ** 2 / (
        (a * ms.cols) ** 2 / (k - 1) + (b * ms.error) ** 2 / ((n - 1) * (k - 1))
    )
    fl = float(stats.f.ppf(1 - alpha / 2, n - 1, v))
    fu = float(stats.f.ppf(1 - alpha / 2, v, n - 1))
    shared = k * ms.cols + (k * n - k - n) * ms.error
    low = n * (ms.rows - fl * ms.error) / (fl * shared + n * ms.rows)
    high = n * (fu * ms.rows - ms.error) / (shared + n * fu * ms.rows)
    return (low, high)


def intraclass_correlation(
    ratings: Sequence[Sequence[float]] | NDArray[np.generic], *, level: float = 0.95
) -> dict[ICCKind, ICC]:
    """All six intraclass correlations of a complete items x raters table, from two-way ANOVA.

    Shrout & Fleiss (1979) / McGraw & Wong (1996), in pingouin's naming: ICC1 = ICC(1,1),
    ICC2 = ICC(A,1), ICC3 = ICC(C,1) and their k-rater averages ICC1k, ICC2k, ICC3k. With mean
    squares MSR (items), MSC (raters), MSE (residual) and MSW = within items:

        ICC1 = (MSR - MSW) / (MSR + (k-1) MSW)        ICC1k = (MSR - MSW) / MSR
        ICC2 = (MSR - MSE) / (MSR + (k-1) MSE + k (MSC - MSE) / n)
        ICC2k = (MSR - MSE) / (MSR + (MSC - MSE) / n)
        ICC3 = (MSR - MSE) / (MSR + (k-1) MSE)        ICC3k = (MSR - MSE) / MSR

    F tests: MSR/MSW on (n-1, n(k-1)) df for ICC1*, MSR/MSE on (n-1, (n-1)(k-1)) otherwise. CIs are
    the F-based intervals; ICC2's uses Satterthwaite's df. Which one to report: raters drawn from a
    population and absolute scores matter -> ICC2 (ICC2k when averaging raters). Needs at least 2
    items and 2 raters and no missing ratings; items that all have the same mean rating raise
    UndefinedStatisticError. Perfect agreement gives F = inf, p = 0 and a CI of (1, 1).
    """
    alpha = 1.0 - check_level(level)
    ms = _mean_squares(ratings)
    n, k = ms.n, ms.k
    df_within, df_error = n * (k - 1), (n - 1) * (k - 1)
    icc1 = (ms.rows - ms.within) / (ms.rows + (k - 1) * ms.within)
    icc2 = (ms.rows - ms.error) / (ms.rows + (k - 1) * ms.error + k * (ms.cols - ms.error) / n)
    icc3 = (ms.rows - ms.error) / (ms.rows + (k - 1) * ms.error)
    f1, f3 = _ratio(ms.rows, ms.within), _ratio(ms.rows, ms.error)
    p1, p3 = _f_sf(f1, n - 1, df_within), _f_sf(f3, n - 1, df_error)
    f1l, f1u = _f_ci(f1, n - 1, df_within, alpha)
    f3l, f3u = _f_ci(f3, n - 1, df_error, alpha)
    l2, u2 = _icc2_ci(ms, icc2, alpha)

    def sb(r: float) -> float:  # Spearman-Brown: a single rater's reliability -> k raters' mean
        return r * k / (1 + (k - 1) * r)

    rows: list[tuple[ICCKind, float, float, int, float, tuple[float, float]]] = [
        ("ICC1", icc1, f1, df_within, p1, (_single(f1l, k), _single(f1u, k))),
        ("ICC2", icc2, f3, df_error, p3, (l2, u2)),
        ("ICC3", icc3, f3, df_error, p3, (_single(f3l, k), _single(f3u, k))),
        ("ICC1k", (ms.rows - ms.within) / ms.rows, f1, df_within, p1, (_average(f1l), _average(f1u))),
        (
            "ICC2k",
            (ms.rows - ms.error) / (ms.rows + (ms.cols - ms.error) / n),
            f3,
            df_error,
            p3,
            (sb(l2), sb(u2)),
        ),
        ("ICC3k", (ms.rows - ms.error) / ms.rows, f3, df_error, p3, (_average(f3l), _average(f3u))),
    ]
    return {
        kind: ICC(
            kind=kind,
            description=_ICC_NAMES[kind],
            icc=float(value),
            f=float(f),
            df1=n - 1,
            df2=df2,
            pvalue=p,
            ci_low=float(ci[0]),
            ci_high=float(ci[1]),
        )
        for kind, value, f, df2, p, ci in rows
    }


def _f_sf(f: float, df1: int, df2: int) -> float:
    from scipy import stats

    return 0.0 if math.isinf(f) else float(stats.f.sf(f, df1, df2))
