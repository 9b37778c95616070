"""Uncertainty and tests: bootstrap CIs, paired model comparisons, Bonferroni and Holm, sample size.

Chi-square tests of independence by subgroup are in :mod:`clinieval.analysis.subgroups`.

Everything random takes a ``seed`` and uses its own ``numpy.random.Generator``, so a result is a
function of its inputs: the same call gives the same interval on every machine and every run.

Bad input raises :class:`~clinieval.errors.UserError` with one actionable line; valid input
with no defined answer raises :class:`UndefinedStatisticError`. No function returns NaN.
scipy is imported only inside the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis._validation import (
    FloatArray,
    UndefinedStatisticError,
    paired,
    positive_float,
    positive_int,
    vector,
)
from clinieval.analysis._validation import level as check_level
from clinieval.errors import UserError

__all__ = [
    "McNemar",
    "PairedBootstrap",
    "PermutationTest",
    "UndefinedStatisticError",
    "bonferroni",
    "bootstrap_ci",
    "cluster_bootstrap_ci",
    "holm",
    "mcnemar",
    "minimum_detectable_difference",
    "paired_bootstrap",
    "paired_permutation_test",
    "required_sample_size",
]

ArrayLike1D: TypeAlias = Sequence[float] | NDArray[np.generic]
Statistic: TypeAlias = Callable[[FloatArray], float]

# Resampled index blocks are capped at this many entries (~32 MB of int64) so memory stays flat for
# large runs; numpy's generator yields the same stream whether drawn in one block or several.
_BLOCK = 1 << 22


def resample_blocks(
    rng: np.random.Generator, n: int, resamples: int, *, row_cost: int | None = None, block: int = _BLOCK
) -> Iterator[NDArray[np.int64]]:
    """Index rows (resamples x n) drawn with replacement, in blocks of about ``block`` cells; a row
    costs ``row_cost`` cells downstream (default ``n``: the index row itself), so the block bounds
    the memory of whatever the caller builds from it."""
    rows = max(1, block // max(n if row_cost is None else row_cost, 1))
    left = resamples
    while left:
        r = min(rows, left)
        yield rng.integers(0, n, size=(r, n))
        left -= r


def _percentile_interval(estimates: FloatArray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(estimates, [tail, 1.0 - tail])
    return (float(lo), float(hi))


def _replicates(
    arr: FloatArray, statistic: Statistic | None, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """The statistic on each bootstrap resample of ``arr`` (vectorised for the mean)."""
    parts: list[FloatArray] = []
    for idx in resample_blocks(rng, arr.size, resamples):
        sample = arr[idx]
        if statistic is None:
            parts.append(sample.mean(axis=1))
        else:
            parts.append(np.array([statistic(row) for row in sample], dtype=np.float64))
    out = np.concatenate(parts)
    _finite_replicates(out)
    return out


def _finite_replicates(values: FloatArray) -> None:
    if not np.all(np.isfinite(values)):
        raise UndefinedStatisticError("the statistic is NaN or infinite on some bootstrap resamples")


def _check_resampling(level: float, resamples: int) -> tuple[float, int]:
    return check_level(level), positive_int(resamples, "resamples")


# --------------------------------------------------------------------------------------------
# Bootstrap confidence intervals


def bootstrap_ci(
    values: ArrayLike1D,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    statistic: Statistic | None = None,
) -> tuple[float, float]:
    """Seeded percentile bootstrap CI of ``statistic`` (default: the mean) over ``values``.

    Values should be one per independent unit (a sample, with repeats already averaged), since
    resampling repeats of one sample as if independent makes the interval too narrow; when items
    share a patient or an instruction use :func:`cluster_bootstrap_ci`. A single value gives a
    zero-width interval (one unit carries no information about spread). ``statistic`` receives a
    1-d float array and returns a float. Empty input raises UserError.
    """
    lvl, reps = _check_resampling(level, resamples)
    arr = vector(values, "values")
    rng = np.random.default_rng(seed)
    return _percentile_interval(_replicates(arr, statistic, reps, rng), lvl)


def cluster_index(clusters: Sequence[Hashable]) -> tuple[NDArray[np.int64], int]:
    """Each item's cluster as a number 0..g-1 (in order of first appearance), and g."""
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(c, len(index)) for c in clusters], dtype=np.int64)
    return codes, len(index)


def _cluster_codes(clusters: Sequence[Hashable], n: int) -> tuple[NDArray[np.int64], int]:
    labels = list(clusters)
    if len(labels) != n:
        raise UserError(f"values has {n} items but clusters has {len(labels)}; give one cluster id per item")
    codes, groups = cluster_index(labels)
    if groups < 2:
        raise UserError("a clustered bootstrap needs at least 2 clusters; all items share one cluster")
    return codes, groups


def _cluster_mean_replicates(
    arr: FloatArray, codes: NDArray[np.int64], g: int, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """The pooled item mean of each cluster-bootstrap resample (clusters drawn with replacement)."""
    sums = np.bincount(codes, weights=arr, minlength=g)
    sizes = np.bincount(codes, minlength=g).astype(np.float64)
    parts = [sums[idx].sum(axis=1) / sizes[idx].sum(axis=1) for idx in resample_blocks(rng, g, resamples)]
    return np.concatenate(parts)


def cluster_bootstrap_ci(
    values: ArrayLike1D,
    clusters: Sequence[Hashable],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    statistic: Statistic | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI that resamples whole clusters (patients, instructions).

    Items from one patient or one instruction are correlated, so treating them as independent
    understates the uncertainty. Each replicate draws as many clusters as there are, with
    replacement, and keeps every item of each drawn cluster; the statistic (default: the mean over
    items, so big clusters weigh more) is computed on the pooled items. ``clusters`` gives each
    item's cluster id (any hashable). Needs at least 2 clusters.
    """
    lvl, reps = _check_resampling(level, resamples)
    arr = vector(values, "values")
    codes, g = _cluster_codes(clusters, arr.size)
    rng = np.random.default_rng(seed)
    if statistic is None:
        return _percentile_interval(_cluster_mean_replicates(arr, codes, g, reps, rng), lvl)
    members = [arr[codes == c] for c in range(g)]
    estimates = np.array(
        [
            statistic(np.concatenate([members[c] for c in row]))
            for idx in resample_blocks(rng, g, reps)
            for row in idx
        ],
        dtype=np.float64,
    )
    _finite_replicates(estimates)
    return _percentile_interval(estimates, lvl)


# --------------------------------------------------------------------------------------------
# Paired comparisons of two models on the same items


@dataclass(frozen=True, slots=True)
class McNemar:
    """McNemar's test on paired binary outcomes.

    ``b`` = items only model x got right, ``c`` = items only model y got right; concordant items
    carry no information about which model is better. ``statistic`` is min(b, c) for the exact
    test and the chi-square value otherwise.
    """

    statistic: float
    pvalue: float
    b: int
    c: int
    method: Literal["exact", "chi2", "chi2_corrected", "clustered"]


def _binary(values: FloatArray, name: str) -> NDArray[np.bool_]:
    if not np.all((values == 0) | (values == 1)):
        raise UserError(f"{name} must be binary outcomes (0/1 or False/True)")
    return np.asarray(values == 1, dtype=np.bool_)


def mcnemar(
    x: ArrayLike1D,
    y: ArrayLike1D,
    *,
    exact: bool | None = None,
    correction: bool = True,
    clusters: Sequence[Hashable] | None = None,
) -> McNemar:
    """Do two models differ in accuracy on the same items? McNemar's test on discordant pairs.

    Exact: two-sided binomial test of min(b, c) against Binomial(b + c, 1/2), p = min(1, 2 P(X <=
    min)). Chi-square: (|b - c| - 1)^2 / (b + c) with Edwards' continuity correction (the correction
    never takes |b - c| below 0, so b = c gives 0 and p = 1), or (b - c)^2 / (b + c) without, on 1
    df. ``exact=None`` picks exact when b + c < 25, where the chi-square approximation is poor.
    With no discordant pairs the models are indistinguishable: the exact p is 1, and forcing the
    chi-square raises UndefinedStatisticError.

    With ``clusters`` (one id per item: the patient), items of one cluster are not independent
    and the test is Durkalski et al.'s (2003) clustered McNemar: (sum_k (b_k - c_k))^2 /
    sum_k (b_k - c_k)^2 on 1 df, with b_k, c_k the discordant counts inside cluster k; when every
    cluster's b_k equals its c_k the statistic is 0 and p is 1. ``exact`` and ``correction`` do not
    apply to it.
    """
    from scipy import stats

    a, bb = paired(x, y, min_n=1)
    xa, ya = _binary(a, "x"), _binary(bb, "y")
    b, c = int(np.sum(xa & ~ya)), int(np.sum(~xa & ya))
    if clusters is not None:
        return _clustered_mcnemar(xa, ya, clusters, b, c)
    use_exact = (b + c < 25) if exact is None else exact
    if use_exact:
        low = min(b, c)
        p = 1.0 if b + c == 0 else min(1.0, 2.0 * float(stats.binom.cdf(low, b + c, 0.5)))
        return McNemar(statistic=float(low), pvalue=p, b=b, c=c, method="exact")
    if b + c == 0:
        raise UndefinedStatisticError("no discordant pairs: McNemar's chi-square is 0/0 (use exact=True)")
    diff = max(abs(b - c) - (1.0 if correction else 0.0), 0.0)
    stat = diff**2 / (b + c)
    return McNemar(
        statistic=stat,
        pvalue=float(stats.chi2.sf(stat, 1)),
        b=b,
        c=c,
        method="chi2_corrected" if correction else "chi2",
    )


def _clustered_mcnemar(
    xa: NDArray[np.bool_], ya: NDArray[np.bool_], clusters: Sequence[Hashable], b: int, c: int
) -> McNemar:
    from scipy import stats

    codes, g = _cluster_codes(clusters, xa.size)
    per_cluster = np.bincount(codes, weights=(xa & ~ya).astype(np.float64) - (~xa & ya), minlength=g)
    spread = float(np.sum(per_cluster**2))
    stat = 0.0 if spread == 0.0 else float(per_cluster.sum()) ** 2 / spread
    p = 1.0 if spread == 0.0 else float(stats.chi2.sf(stat, 1))
    return McNemar(statistic=stat, pvalue=p, b=b, c=c, method="clustered")


@dataclass(frozen=True, slots=True)
class PairedBootstrap:
    """Mean of x - y over paired items, its percentile CI and a two-sided bootstrap p-value."""

    mean_difference: float
    ci_low: float
    ci_high: float
    pvalue: float
    n: int


def paired_bootstrap(
    x: ArrayLike1D,
    y: ArrayLike1D,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> PairedBootstrap:
    """Bootstrap the mean paired difference d = x - y, resampling items (pairs stay together).

    The CI is the percentile interval of the resampled means (identical to ``bootstrap_ci(d)``
    with the same seed; with ``clusters``, to ``cluster_bootstrap_ci(d, clusters)``: a patient's
    items are drawn together). The p-value tests mean(d) = 0 by the shifted bootstrap (Efron &
    Tibshirani 1993, 16.4): resample d - mean(d), which obeys the null, and count resampled means
    at least as far from 0 as the observed one, p = (1 + count) / (1 + resamples), so p is never 0.
    Needs 2 items (2 clusters when clustered).
    """
    lvl, reps = _check_resampling(level, resamples)
    a, b = paired(x, y, min_n=2)
    d = a - b
    observed = float(d.mean())
    rng = np.random.default_rng(seed)
    if clusters is None:
        means = _replicates(d, None, reps, rng)
    else:
        codes, g = _cluster_codes(clusters, d.size)
        means = _cluster_mean_replicates(d, codes, g, reps, rng)
    low, high = _percentile_interval(means, lvl)
    # Shifting every resampled mean by -observed is the same as resampling the shifted data.
    null = means - observed
    tol = 1e-12 * max(abs(observed), float(np.abs(d).mean()), 1e-300)
    count = int(np.sum(np.abs(null) >= abs(observed) - tol))
    return PairedBootstrap(
        mean_difference=observed, ci_low=low, ci_high=high, pvalue=(1 + count) / (1 + reps), n=d.size
    )


@dataclass(frozen=True, slots=True)
class PermutationTest:
    """Sign-flip permutation test of the mean paired difference; ``exact`` if all 2^n flips were used."""

    mean_difference: float
    pvalue: float
    n: int
    exact: bool
    resamples: int
    clusters: int | None = None


def _sign_blocks(n: int, exact: bool, resamples: int, seed: int) -> Iterator[FloatArray]:
    """Rows of +-1 signs: every pattern (exact) or ``resamples`` random ones, in bounded blocks.

    Random signs are ``2 * integers(0, 2) - 1`` drawn as int8 from ``default_rng(seed)``: one
    byte per sign, about twice as fast as ``choice([-1, 1])``, with the same distribution.
    """
    rows = max(1, _BLOCK // max(n, 1))
    if exact:
        bits = np.arange(n, dtype=np.int64)
        for start in range(0, 1 << n, rows):
            codes = np.arange(start, min(start + rows, 1 << n), dtype=np.int64)
            yield (((codes[:, None] >> bits) & 1) * 2 - 1).astype(np.float64)
        return
    rng = np.random.default_rng(seed)
    left = resamples
    while left:
        r = min(rows, left)
        bits = rng.integers(0, 2, size=(r, n), dtype=np.int8)
        yield (bits * 2 - 1).astype(np.float64)
        left -= r


def paired_permutation_test(
    x: ArrayLike1D,
    y: ArrayLike1D,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    exact: bool | None = None,
    clusters: Sequence[Hashable] | None = None,
) -> PermutationTest:
    """Two-sided paired permutation test: under H0 each difference x - y is equally likely +-.

    The null distribution of mean(d) comes from flipping the signs of the differences. Exact
    (all 2^n patterns) when ``exact`` is True, or by default when 2^n <= ``resamples``; otherwise
    ``resamples`` random patterns with p = (1 + count) / (1 + resamples) (never 0). Counts
    |mean| >= |observed| with a relative tolerance of 1e-12 so floating-point ties count as ties;
    for this symmetric null it equals twice the smaller one-sided p-value. Exact mode is limited to
    n <= 24 sign units (16 million patterns).

    With ``clusters`` (one id per item) the unit exchanged under H0 is the cluster: all of a
    patient's differences flip sign together, so n in "2^n" above is the number of clusters.
    """
    reps = positive_int(resamples, "resamples")
    a, b = paired(x, y, min_n=1)
    d = a - b
    n = d.size
    units, groups = d, None
    if clusters is not None:
        codes, groups = _cluster_codes(clusters, n)
        # each cluster's sum of differences
        units = np.bincount(codes, weights=d, minlength=groups).astype(np.float64)
    k = units.size
    use_exact = (2.0**k <= reps) if exact is None else exact
    if use_exact and k > 24:
        raise UserError(f"exact permutation needs 2^{k} sign patterns; use exact=False for n > 24")
    observed = float(d.mean())
    tol = 1e-12 * max(abs(observed), float(np.abs(d).mean()), 1e-300)
    count = total = 0
    for signs in _sign_blocks(k, use_exact, reps, seed):
        # einsum, not ``signs @ d``: a matrix-vector product this small is slower through a
        # multi-threaded BLAS (thread wake-up) than numpy's own loop, by 10x on a 2-core machine.
        sums = np.einsum("ij,j->i", signs, units)
        count += int(np.sum(np.abs(sums) / n >= abs(observed) - tol))
        total += signs.shape[0]
    p = count / total if use_exact else (1 + count) / (1 + total)
    return PermutationTest(
        mean_difference=observed, pvalue=min(1.0, p), n=n, exact=use_exact, resamples=total, clusters=groups
    )


# --------------------------------------------------------------------------------------------
# Multiple comparisons


def bonferroni(pvalues: Sequence[float]) -> list[float]:
    """Bonferroni-adjusted p-values: each p times the number of tests, capped at 1. No tests, no
    p-values (a loop over groups where every test was undefined)."""
    ps = vector(pvalues, "pvalues", min_n=0)
    if np.any((ps < 0) | (ps > 1)):
        raise UserError("p-values must lie in [0, 1]")
    return [min(1.0, float(p) * ps.size) for p in ps]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    Sort the m p-values ascending; the i-th smallest (i = 0, 1, ...) is multiplied by m - i, capped
    at 1, and each adjusted value is raised to the largest one before it so the order is kept.
    Rejecting where the adjusted p <= alpha controls the family-wise error rate at alpha like
    :func:`bonferroni` does, but never rejects fewer hypotheses (Holm 1979). Equal p-values get
    equal adjusted values. No tests, no p-values.
    """
    ps = vector(pvalues, "pvalues", min_n=0)
    if np.any((ps < 0) | (ps > 1)):
        raise UserError("p-values must lie in [0, 1]")
    m = ps.size
    adjusted = [0.0] * m
    running = 0.0
    for i, k in enumerate(np.argsort(ps, kind="stable")):
        running = max(running, min(1.0, float(ps[k]) * (m - i)))
        adjusted[int(k)] = running
    return adjusted


# --------------------------------------------------------------------------------------------
# Sample size for a paired comparison

PowerMethod: TypeAlias = Literal["z", "t"]


def _power_inputs(sigma_d: float, alpha: float, power: float, method: str) -> tuple[float, float, float]:
    if method not in ("z", "t"):
        raise UserError(f"method must be 'z' or 't', got {method!r}")
    return positive_float(sigma_d, "sigma_d"), check_level(alpha, "alpha"), check_level(power, "power")


def _z_multiplier(alpha: float, power: float) -> float:
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def _t_power(effect: float, n: int, alpha: float) -> float:
    """Power of the two-sided paired t test for standardized effect delta / sigma_d with n pairs."""
    from scipy import stats

    df = n - 1
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    nc = effect * math.sqrt(n)
    # P(T < -crit | nc) written as P(T > crit | -nc): scipy's nct.cdf returns NaN far in that tail.
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def minimum_detectable_difference(
    sigma_d: float, n: int, *, alpha: float = 0.05, power: float = 0.8, method: PowerMethod = "z"
) -> float:
    """Smallest true mean difference a paired comparison of n items detects with the given power.

    ``z`` (MedAlign's normal approximation): MDD = (z_{1-alpha/2} + z_{power}) sigma_d / sqrt(n);
    sigma_d = 1, n = 100 gives 0.2802. ``t``: the exact two-sided paired t test, solving
    noncentral-t power = ``power`` for the difference; slightly larger, noticeably so for small n.
    Two-sided; needs n >= 2 and sigma_d > 0.
    """
    sd, a, pw = _power_inputs(sigma_d, alpha, power, method)
    m = positive_int(n, "n", minimum=2)
    if method == "z":
        return _z_multiplier(a, pw) * sd / math.sqrt(m)
    if pw <= a / 2:
        raise UserError(f"power must exceed alpha/2 = {a / 2} for the t method")
    from scipy import optimize

    hi = 1.0
    while _t_power(hi, m, a) < pw:
        hi *= 2.0
    effect = float(optimize.brentq(lambda e: _t_power(e, m, a) - pw, 0.0, hi, xtol=1e-12))
    return effect * sd


def required_sample_size(
    sigma_d: float, delta: float, *, alpha: float = 0.05, power: float = 0.8, method: PowerMethod = "z"
) -> int:
    """Items needed for a paired comparison to detect a true mean difference ``delta``.

    ``z``: n = ceil(((z_{1-alpha/2} + z_{power}) sigma_d / delta)^2). ``t``: the smallest n >= 2
    whose exact paired t test reaches ``power`` (never below the z answer). Two-sided.
    """
    sd, a, pw = _power_inputs(sigma_d, alpha, power, method)
    d = positive_float(delta, "delta")
    n_z = max(1, math.ceil((_z_multiplier(a, pw) * sd / d) ** 2 - 1e-9))
    if method == "z":
        return n_z
    n = max(2, n_z)
    while _t_power(d / sd, n, a) < pw:
        n += 1
    return n
