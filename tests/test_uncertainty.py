"""Bootstrap CIs, paired tests, subgroup chi-square and sample size, against references and by hand.

statsmodels is a reference only; clinieval never imports it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.power import TTestPower

from clinieval.analysis import subgroups, uncertainty
from clinieval.analysis.subgroups import chi_square_independence, subgroup_chi_square
from clinieval.analysis.uncertainty import (
    UndefinedStatisticError,
    bonferroni,
    bootstrap_ci,
    cluster_bootstrap_ci,
    mcnemar,
    minimum_detectable_difference,
    paired_bootstrap,
    paired_permutation_test,
    required_sample_size,
)
from clinieval.errors import UserError

# ----------------------------------------------------------------------------------- bootstrap


def _reference_bootstrap(values: list[float], level: float, resamples: int, seed: int) -> tuple[float, float]:
    """The algorithm clinieval.stats.bootstrap_ci used, so summaries keep their exact numbers."""
    arr = np.asarray(values, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, arr.size, size=(resamples, arr.size))
    lo, hi = np.quantile(arr[idx].mean(axis=1), [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


def test_bootstrap_ci_is_unchanged_from_the_old_stats_module() -> None:
    values = np.random.default_rng(7).random(57).tolist()
    for level, resamples, seed in [(0.95, 2000, 0), (0.9, 501, 3)]:
        got = bootstrap_ci(values, level=level, resamples=resamples, seed=seed)
        assert got == _reference_bootstrap(values, level, resamples, seed)
    assert bootstrap_ci([0.25]) == (0.25, 0.25)  # one unit: a zero-width interval


def test_bootstrap_ci_blocks_and_custom_statistic_draw_the_same_resamples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = np.random.default_rng(8).normal(size=101)
    whole = bootstrap_ci(values, resamples=300, seed=5)
    assert bootstrap_ci(values, resamples=300, seed=5, statistic=np.mean) == pytest.approx(whole)
    monkeypatch.setattr(uncertainty, "_BLOCK", 1000)  # 9 rows per block, 34 blocks
    assert bootstrap_ci(values, resamples=300, seed=5) == whole
    lo, hi = bootstrap_ci(values, resamples=300, seed=5, statistic=np.median)
    assert lo < float(np.median(values)) < hi


def test_bootstrap_ci_bad_input() -> None:
    with pytest.raises(UserError, match="empty"):
        bootstrap_ci([])
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(UserError, match="level"):
            bootstrap_ci([1.0, 2.0], level=bad)
    with pytest.raises(UserError, match="resamples"):
        bootstrap_ci([1.0, 2.0], resamples=0)
    with pytest.raises(UserError, match="NaN"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(UndefinedStatisticError):
        bootstrap_ci([1.0, 2.0], statistic=lambda a: float("nan"))


def _clustered_data(seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """40 patients x 10 items; a patient effect makes items within a patient strongly correlated."""
    rng = np.random.default_rng(seed)
    patient = rng.normal(size=40)
    values = (patient[:, None] + 0.2 * rng.normal(size=(40, 10))).ravel()
    return values, [p for p in range(40) for _ in range(10)]


def test_cluster_bootstrap_is_wider_on_clustered_data_and_reproducible() -> None:
    values, clusters = _clustered_data()
    naive = bootstrap_ci(values, seed=1)
    clustered = cluster_bootstrap_ci(values, clusters, seed=1)
    # Effective sample size is ~40 patients, not 400 items: the interval is about sqrt(10) wider.
    assert clustered[1] - clustered[0] > 2.5 * (naive[1] - naive[0])
    assert clustered[0] < values.mean() < clustered[1]
    assert cluster_bootstrap_ci(values, clusters, seed=1) == clustered
    assert cluster_bootstrap_ci(values, clusters, seed=2) != clustered
    custom = cluster_bootstrap_ci(values, clusters, seed=1, statistic=np.mean)
    assert custom == pytest.approx(clustered)


def test_cluster_bootstrap_with_singleton_clusters_is_the_plain_bootstrap() -> None:
    values = np.random.default_rng(9).normal(size=30)
    ids = [f"p{i}" for i in range(30)]
    assert cluster_bootstrap_ci(values, ids, seed=4) == pytest.approx(bootstrap_ci(values, seed=4))


def test_cluster_bootstrap_bad_input() -> None:
    with pytest.raises(UserError, match="at least 2 clusters"):
        cluster_bootstrap_ci([1.0, 2.0, 3.0], ["a", "a", "a"])
    with pytest.raises(UserError, match="one cluster id per item"):
        cluster_bootstrap_ci([1.0, 2.0, 3.0], ["a", "b"])
    with pytest.raises(UserError, match="empty"):
        cluster_bootstrap_ci([], [])


# ------------------------------------------------------------------------------------ McNemar


def _outcomes(both: int, only_x: int, only_y: int, neither: int) -> tuple[list[int], list[int]]:
    x = [1] * both + [1] * only_x + [0] * only_y + [0] * neither
    y = [1] * both + [0] * only_x + [1] * only_y + [0] * neither
    return x, y


@pytest.mark.parametrize(
    ("both", "b", "c", "neither"), [(10, 3, 9, 20), (40, 30, 12, 18), (5, 1, 0, 5), (3, 7, 7, 2)]
)
def test_mcnemar_matches_statsmodels(both: int, b: int, c: int, neither: int) -> None:
    x, y = _outcomes(both, b, c, neither)
    table = [[both, b], [c, neither]]
    exact = mcnemar(x, y, exact=True)
    ref = sm_mcnemar(table, exact=True)
    assert (exact.statistic, exact.pvalue, exact.b, exact.c) == (
        pytest.approx(ref.statistic),
        pytest.approx(ref.pvalue),
        b,
        c,
    )
    plain = mcnemar(x, y, exact=False, correction=False)
    ref = sm_mcnemar(table, exact=False, correction=False)
    assert (plain.statistic, plain.pvalue) == pytest.approx((ref.statistic, ref.pvalue))
    corrected = mcnemar(x, y, exact=False)
    if b != c:  # statsmodels gives (0 - 1)^2 / (b + c) when b == c; we floor |b - c| - 1 at 0
        ref = sm_mcnemar(table, exact=False, correction=True)
        assert (corrected.statistic, corrected.pvalue) == pytest.approx((ref.statistic, ref.pvalue))
    else:
        assert (corrected.statistic, corrected.pvalue) == (0.0, 1.0)
    assert corrected.method == "chi2_corrected" and plain.method == "chi2" and exact.method == "exact"


def test_mcnemar_auto_method_and_edge_cases() -> None:
    assert mcnemar(*_outcomes(10, 3, 9, 20)).method == "exact"  # 12 discordant < 25
    assert mcnemar(*_outcomes(40, 30, 12, 18)).method == "chi2_corrected"
    none = mcnemar([1, 0, 1], [True, False, True])
    assert (none.pvalue, none.b, none.c) == (1.0, 0, 0)
    with pytest.raises(UndefinedStatisticError, match="no discordant"):
        mcnemar([1, 0], [1, 0], exact=False)
    with pytest.raises(UserError, match="binary"):
        mcnemar([1, 2], [1, 0])
    with pytest.raises(UserError, match="paired"):
        mcnemar([1, 0, 1], [1, 0])


# -------------------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_ci_p_value_and_reproducibility() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=200)
    y = 0.5 * x + rng.normal(size=200) - 0.1
    res = paired_bootstrap(x, y, resamples=4000, seed=1)
    d = x - y
    assert res.mean_difference == pytest.approx(d.mean())
    assert (res.ci_low, res.ci_high) == bootstrap_ci(d, resamples=4000, seed=1)
    # For n = 200 the bootstrap p-value is close to the paired t test's (here ~0.18).
    assert res.pvalue == pytest.approx(stats.ttest_rel(x, y).pvalue, abs=0.03)
    assert paired_bootstrap(x, y, resamples=4000, seed=1) == res
    strong = paired_bootstrap(x + 1.0, y, resamples=999, seed=1)
    assert strong.pvalue == pytest.approx(1 / 1000)  # never 0: (1 + 0) / (1 + resamples)
    same = paired_bootstrap(x, x, resamples=99)
    assert (same.mean_difference, same.pvalue, same.ci_low, same.ci_high) == (0.0, 1.0, 0.0, 0.0)


def test_paired_bootstrap_bad_input() -> None:
    with pytest.raises(UserError, match="at least 2"):
        paired_bootstrap([1.0], [0.0])
    with pytest.raises(UserError, match="paired"):
        paired_bootstrap([1.0, 2.0, 3.0], [0.0, 1.0])
    with pytest.raises(UserError, match="level"):
        paired_bootstrap([1.0, 2.0], [0.0, 1.0], level=1.0)


# ------------------------------------------------------------------------- permutation test


def test_permutation_exact_by_hand() -> None:
    # d = (1, 2, 3): of the 8 sign patterns only +++ and --- reach |mean| >= 2, so p = 2/8.
    res = paired_permutation_test([2, 4, 6], [1, 2, 3])
    assert (res.mean_difference, res.pvalue, res.exact, res.resamples) == (2.0, 0.25, True, 8)
    assert paired_permutation_test([1.0], [0.0]).pvalue == 1.0  # one item: both signs tie
    assert paired_permutation_test([1, 2, 3], [1, 2, 3]).pvalue == 1.0


def _scipy_paired_permutation(x: np.ndarray, y: np.ndarray, resamples: float) -> float:
    res = stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
    )
    return float(res.pvalue)


def test_permutation_exact_matches_scipy_with_ties_and_zeros() -> None:
    x = np.array([3, 5, 2, 4, 4, 1, 5, 3, 2, 4, 3], dtype=float)
    y = np.array([2, 3, 2, 5, 3, 1, 3, 3, 1, 2, 4], dtype=float)
    ours = paired_permutation_test(x, y)
    assert ours.exact and ours.resamples == 2**11
    assert ours.pvalue == pytest.approx(_scipy_paired_permutation(x, y, np.inf))


def test_permutation_monte_carlo_is_seeded_and_close_to_exact() -> None:
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=15), rng.normal(size=15) - 0.4
    exact = paired_permutation_test(x, y, exact=True)
    mc = paired_permutation_test(x, y, resamples=20_000, seed=2)
    assert not mc.exact and mc.resamples == 20_000
    assert mc.pvalue == pytest.approx(exact.pvalue, abs=0.01)
    assert paired_permutation_test(x, y, resamples=20_000, seed=2) == mc
    with pytest.raises(UserError, match="n > 24"):
        paired_permutation_test(np.zeros(25), np.ones(25), exact=True)
    with pytest.raises(UserError, match="empty"):
        paired_permutation_test([], [])


def test_permutation_monte_carlo_signs_are_integer_draws() -> None:
    """The random sign patterns are 2 * integers(0, 2) - 1 (int8) from default_rng(seed), so a seed
    gives the same p-value on every machine; here recomputed from that stream by hand."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=40), rng.normal(size=40) - 0.2
    d = x - y
    signs = np.random.default_rng(9).integers(0, 2, size=(300, 40), dtype=np.int8) * 2 - 1
    tol = 1e-12 * max(abs(d.mean()), float(np.abs(d).mean()))
    count = int(np.sum(np.abs(signs @ d) / 40 >= abs(d.mean()) - tol))
    res = paired_permutation_test(x, y, resamples=300, seed=9)
    assert not res.exact and res.resamples == 300
    assert res.pvalue == (1 + count) / 301


# ------------------------------------------------------------------------------- chi-square


@pytest.mark.parametrize(
    "table", [[[20, 10], [12, 25]], [[5, 3], [1, 8]], [[10, 20, 30], [15, 12, 9]], [[8, 2], [6, 6], [3, 9]]]
)
def test_chi_square_matches_scipy(table: list[list[int]]) -> None:
    for yates in (False, True):
        ours = chi_square_independence(table, yates=yates)
        ref = stats.chi2_contingency(table, correction=yates)
        assert (ours.statistic, ours.pvalue, ours.dof) == (
            pytest.approx(ref.statistic),
            pytest.approx(ref.pvalue),
            ref.dof,
        )
        assert ours.min_expected == pytest.approx(ref.expected_freq.min())
        assert ours.yates == (yates and ours.dof == 1)  # Yates only ever touches 2x2 tables
        assert ours.n == sum(map(sum, table))


def test_chi_square_undefined_and_bad_tables() -> None:
    with pytest.raises(UndefinedStatisticError, match="all zero"):
        chi_square_independence([[3, 0], [4, 0]])
    with pytest.raises(UserError, match="at least 2 rows"):
        chi_square_independence([[3, 4]])
    with pytest.raises(UserError, match="non-negative"):
        chi_square_independence([[3, -1], [4, 2]])


def test_subgroup_chi_square_with_bonferroni() -> None:
    rng = np.random.default_rng(5)
    n = 300
    age = rng.choice(["18-39", "40-64", "65+"], size=n).tolist()
    gender = rng.choice(["F", "M"], size=n).tolist()
    # Correctness depends on age, not on gender.
    p_correct = np.where(np.array(age) == "65+", 0.4, 0.7)
    correct = (rng.random(n) < p_correct).tolist()
    race: list[str | None] = rng.choice(["A", "B", "C"], size=n).tolist()
    race[:30] = [None] * 30  # unknown race: left out of that attribute's table only
    results = subgroup_chi_square(correct, {"age": age, "gender": gender, "race": race})
    assert [r.attribute for r in results] == ["age", "gender", "race"]
    for r, values in zip(results, (age, gender, race), strict=True):
        keep = [i for i, v in enumerate(values) if v is not None]
        groups = sorted({values[i] for i in keep})  # type: ignore[type-var]
        table = [
            [sum(1 for i in keep if values[i] == g and correct[i] == o) for o in (False, True)]
            for g in groups
        ]
        ref = stats.chi2_contingency(table, correction=False)
        assert r.table == tuple(map(tuple, table))
        assert r.groups == tuple(groups) and r.outcomes == ("False", "True")
        assert r.test.pvalue == pytest.approx(ref.pvalue)
        assert r.pvalue_adjusted == pytest.approx(min(1.0, 3 * ref.pvalue))
        assert not r.test.yates
    assert results[0].pvalue_adjusted < 0.05
    assert results[2].test.n == 270


def test_subgroup_chi_square_edge_cases() -> None:
    with pytest.raises(UndefinedStatisticError, match="'sex' has only one group"):
        subgroup_chi_square([1, 0, 1], {"sex": ["F", "F", "F"]})
    with pytest.raises(UndefinedStatisticError, match="only one outcome"):
        subgroup_chi_square([1, 1, 1], {"sex": ["F", "M", "F"]})
    with pytest.raises(UserError, match="has 2 values"):
        subgroup_chi_square([1, 0, 1], {"sex": ["F", "M"]})
    with pytest.raises(UserError, match="no attributes"):
        subgroup_chi_square([1, 0], {})


def test_bonferroni() -> None:
    assert bonferroni([0.01, 0.02, 0.5]) == pytest.approx([0.03, 0.06, 1.0])
    with pytest.raises(UserError, match=r"\[0, 1\]"):
        bonferroni([0.5, 1.2])
    assert bonferroni([]) == []


# ----------------------------------------------------------------------------- sample size


def test_minimum_detectable_difference_by_hand() -> None:
    # (z_.975 + z_.8) * sigma_d / sqrt(n) = (1.959964 + 0.841621) * 1 / 10 = 0.280159
    assert minimum_detectable_difference(1.0, 100) == pytest.approx(0.2802, abs=5e-5)
    assert minimum_detectable_difference(2.0, 400) == pytest.approx(0.2802, abs=5e-5)
    # n = ((1.959964 + 0.841621) * 0.5 / 0.1)^2 = 196.22 -> 197
    assert required_sample_size(0.5, 0.1) == 197
    assert minimum_detectable_difference(0.5, 197) <= 0.1 < minimum_detectable_difference(0.5, 196)


@pytest.mark.parametrize(("n", "power"), [(100, 0.8), (5, 0.8), (3, 0.9), (30, 0.5)])
def test_t_based_mdd_matches_statsmodels(n: int, power: float) -> None:
    effect = TTestPower().solve_power(nobs=n, alpha=0.05, power=power)
    assert minimum_detectable_difference(2.0, n, power=power, method="t") == pytest.approx(
        2.0 * effect, rel=1e-4
    )
    assert minimum_detectable_difference(2.0, n, power=power, method="t") > minimum_detectable_difference(
        2.0, n, power=power
    )


def test_t_based_sample_size_matches_statsmodels() -> None:
    for sigma, delta in [(0.5, 0.1), (1.0, 0.5), (1.0, 1.5)]:
        nobs = TTestPower().solve_power(effect_size=delta / sigma, alpha=0.05, power=0.8)
        assert required_sample_size(sigma, delta, method="t") == math.ceil(nobs)


def test_sample_size_bad_input() -> None:
    with pytest.raises(UserError, match="sigma_d"):
        minimum_detectable_difference(0.0, 100)
    with pytest.raises(UserError, match="n must be"):
        minimum_detectable_difference(1.0, 1)
    with pytest.raises(UserError, match="alpha"):
        minimum_detectable_difference(1.0, 100, alpha=0.0)
    with pytest.raises(UserError, match="power"):
        required_sample_size(1.0, 0.2, power=1.0)
    with pytest.raises(UserError, match="delta"):
        required_sample_size(1.0, -0.2)
    with pytest.raises(UserError, match="method"):
        required_sample_size(1.0, 0.2, method="exact")  # type: ignore[arg-type]


# --- clustered paired comparisons (issue 13, item 14) ---------------------------------------------


def test_clustered_paired_bootstrap_draws_a_patients_items_together() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.6, 0.2, 24), rng.normal(0.5, 0.2, 24)
    patients = [f"p{i // 4}" for i in range(24)]
    boot = uncertainty.paired_bootstrap(x, y, resamples=500, seed=2, clusters=patients)
    assert (boot.ci_low, boot.ci_high) == uncertainty.cluster_bootstrap_ci(
        x - y, patients, resamples=500, seed=2
    )
    # one patient per item is the item bootstrap (same draws, same means up to rounding)
    alone = uncertainty.paired_bootstrap(x, y, resamples=500, seed=2, clusters=list(range(24)))
    plain = uncertainty.paired_bootstrap(x, y, resamples=500, seed=2)
    assert alone.ci_low == pytest.approx(plain.ci_low) and alone.pvalue == plain.pvalue


def test_clustered_permutation_flips_a_patients_differences_together() -> None:
    # differences 1,1,1 | 1,1 | -1 for patients A, B, C: cluster sums 3, 2, -1, observed mean 4/6.
    # The 8 sign patterns give |sum| 6, 4, 2, 0, 0, 2, 4, 6: |sum| >= 4 in 4 of 8 -> p = 0.5.
    x = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    y = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    test = uncertainty.paired_permutation_test(x, y, clusters=["A", "A", "A", "B", "B", "C"])
    assert test.exact and test.resamples == 8 and test.clusters == 3
    assert test.pvalue == pytest.approx(0.5)
    # item by item the same data look far stronger: 2^6 patterns, |sum| >= 4 in 14 -> 14/64
    assert uncertainty.paired_permutation_test(x, y).pvalue == pytest.approx(14 / 64)


def test_clustered_mcnemar_is_durkalskis() -> None:
    # patient A: x right y wrong twice (b=2, c=0); B: one each way; C: y right x wrong once.
    # per-patient b-c: 2, 0, -1 -> (2 + 0 - 1)^2 / (4 + 0 + 1) = 0.2 on 1 df
    x = [1, 1, 1, 0, 0, 1]
    y = [0, 0, 0, 1, 1, 1]
    patients = ["A", "A", "B", "B", "C", "C"]
    mc = uncertainty.mcnemar(x, y, clusters=patients)
    assert mc.method == "clustered" and (mc.b, mc.c) == (3, 2)
    assert mc.statistic == pytest.approx(0.2)
    assert mc.pvalue == pytest.approx(stats.chi2.sf(0.2, 1))
    even = uncertainty.mcnemar([1, 0, 1, 1], [0, 1, 1, 1], clusters=["A", "A", "B", "B"])
    assert (even.statistic, even.pvalue) == (0.0, 1.0)


def test_weighted_subgroup_table_counts_each_item_once() -> None:
    # two items per sex; an item judged correct in 3 of 5 runs counts 0.6 correct and 0.4 incorrect
    outcome = ["correct", "incorrect"] * 4
    shares = [1.0, 0.6, 0.2, 0.0]
    weights = [w for s in shares for w in (s, 1 - s)]
    sex = [v for v in ("F", "F", "M", "M") for _ in range(2)]
    (test,) = subgroups.subgroup_chi_square(outcome, {"sex": sex}, weights=weights)
    table = [[1.6, 0.4], [0.2, 1.8]]
    assert [list(r) for r in test.table] == [pytest.approx(r) for r in table]
    assert test.test.n == 4
    assert test.test.statistic == pytest.approx(stats.chi2_contingency(table, correction=False).statistic)
    with pytest.raises(UserError, match="weights has 3 values"):
        subgroups.subgroup_chi_square(outcome, {"sex": sex}, weights=[1, 1, 1])
