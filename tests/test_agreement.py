"""Correlation and agreement statistics against reference libraries and published values.

pingouin, scikit-learn and krippendorff are references only; clinieval never imports them.
"""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pingouin
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from clinieval.analysis.agreement import (
    ICC_KINDS,
    cohen_kappa,
    compare_dependent_correlations,
    compare_independent_correlations,
    fisher_z_ci,
    intraclass_correlation,
    kendall_tau,
    krippendorff_alpha,
    pearson,
    point_biserial,
    spearman,
)
from clinieval.analysis.uncertainty import UndefinedStatisticError
from clinieval.errors import UserError

RNG = np.random.default_rng(20240601)
# Ordinal-ish data with many ties, as clinician ranks and 1-5 scores are.
X_TIED = RNG.integers(1, 6, size=40).astype(float)
Y_TIED = np.clip(X_TIED + RNG.integers(-2, 3, size=40), 1, 5)
X_CONT = RNG.normal(size=30)
Y_CONT = 0.6 * X_CONT + RNG.normal(size=30)


# ---------------------------------------------------------------------------------- correlations


@pytest.mark.parametrize(("x", "y"), [(X_TIED, Y_TIED), (X_CONT, Y_CONT), (X_CONT[:6], Y_CONT[:6])])
def test_correlations_match_scipy(x: np.ndarray, y: np.ndarray) -> None:
    for variant in ("b", "c"):
        ours = kendall_tau(x, y, variant=variant)  # type: ignore[arg-type]
        ref = stats.kendalltau(x, y, variant=variant)
        assert (ours.statistic, ours.pvalue) == pytest.approx((ref.statistic, ref.pvalue))
        assert ours.n == len(x) and ours.method == f"kendall_tau_{variant}"
    ref_s, ref_p = stats.spearmanr(x, y), stats.pearsonr(x, y)
    assert (spearman(x, y).statistic, spearman(x, y).pvalue) == pytest.approx((ref_s.statistic, ref_s.pvalue))
    assert (pearson(x, y).statistic, pearson(x, y).pvalue) == pytest.approx((ref_p.statistic, ref_p.pvalue))


def test_kendall_tau_b_with_ties_by_hand() -> None:
    # Pairs of (1,2,3) vs (1,1,2): 2 concordant, 0 discordant, one tie in y:
    # tau-b = (2 - 0) / sqrt((3 - 0) * (3 - 1)) = 0.8165.
    assert kendall_tau([1, 2, 3], [1, 1, 2]).statistic == pytest.approx(2 / math.sqrt(6))
    assert kendall_tau([1, 2], [2, 1]).statistic == -1.0  # two items suffice for tau


def test_point_biserial_matches_scipy_and_follows_the_coding() -> None:
    correct = (Y_CONT > 0).astype(int)
    rank = -X_CONT  # lower rank = better, so correctness vs rank is negative
    ours = point_biserial(correct, rank)
    ref = stats.pointbiserialr(correct, rank)
    assert (ours.statistic, ours.pvalue) == pytest.approx((ref.statistic, ref.pvalue))
    assert ours.statistic < 0
    assert point_biserial([True, False, True, False], [1, 4, 2, 3]).statistic == pytest.approx(
        stats.pearsonr([1, 0, 1, 0], [1, 4, 2, 3]).statistic
    )
    with pytest.raises(UserError, match="exactly two values"):
        point_biserial([0, 1, 2], [1, 2, 3])


@pytest.mark.parametrize("fn", [kendall_tau, spearman, pearson])
def test_constant_input_is_undefined_not_nan(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UndefinedStatisticError, match="y is constant"):
        fn([1, 2, 3, 4], [2, 2, 2, 2])
    with pytest.raises(UserError, match="x is constant"):  # a UserError subclass
        fn([5, 5, 5], [1, 2, 3])


def test_point_biserial_constant_binary_is_undefined() -> None:
    with pytest.raises(UndefinedStatisticError, match="binary is constant"):
        point_biserial([1, 1, 1], [1, 2, 3])


@pytest.mark.parametrize("fn", [kendall_tau, spearman, pearson, point_biserial])
def test_correlation_bad_input(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserError, match="paired"):
        fn([0, 1, 0, 1], [1, 2, 3])
    with pytest.raises(UserError, match="empty"):
        fn([], [])
    with pytest.raises(UserError, match="1 value"):
        fn([1], [1])
    with pytest.raises(UserError, match="NaN"):
        fn([0, 1, 1, 0], [1, float("nan"), 3, 4])


def test_spearman_and_pearson_need_three_items() -> None:
    with pytest.raises(UserError, match="at least 3"):
        spearman([1, 2], [2, 1])
    with pytest.raises(UserError, match="at least 3"):
        pearson([1, 2], [2, 1])


# ----------------------------------------------------------------------------------- Fisher's z


def test_fisher_z_ci_by_hand() -> None:
    # r = .5, n = 28: atanh(.5) = 0.549306, half-width 1.959964 / sqrt(25) = 0.391993,
    # tanh(0.157313) = 0.156028, tanh(0.941299) = 0.735818.
    lo, hi = fisher_z_ci(0.5, 28)
    assert (lo, hi) == pytest.approx((0.156028, 0.735818), abs=1e-6)
    lo90, hi90 = fisher_z_ci(0.5, 28, level=0.90)
    assert lo < lo90 < 0.5 < hi90 < hi


def test_independent_correlations_by_hand() -> None:
    # z = (0.549306 - 0.309520) / sqrt(1/100 + 1/100) = 1.69555, two-sided p = 0.0900.
    t = compare_independent_correlations(0.5, 103, 0.3, 103)
    assert t.z == pytest.approx(1.69555, abs=1e-5)
    assert t.pvalue == pytest.approx(0.08997, abs=1e-5)
    assert compare_independent_correlations(0.3, 103, 0.5, 103).z == pytest.approx(-t.z)


def test_dependent_correlations_meng_rosenthal_rubin_by_hand() -> None:
    # r_jk = .5, r_jh = .3, r_kh = .4, n = 100:
    #   rbar2 = (.25 + .09) / 2 = .17;  f = (1 - .4) / (2 * .83) = .361446
    #   h = (1 - .361446 * .17) / .83 = 1.130788
    #   z = (0.549306 - 0.309520) * sqrt(97 / (2 * .6 * 1.130788)) = 0.239786 * 8.45485 = 2.0274
    t = compare_dependent_correlations(0.5, 0.3, 0.4, 100)
    assert t.z == pytest.approx(2.0274, abs=2e-4)
    assert t.pvalue == pytest.approx(0.0426, abs=2e-4)
    assert compare_dependent_correlations(0.3, 0.5, 0.4, 100).z == pytest.approx(-t.z)
    # Correlated metrics make the dependent test more powerful than pretending independence.
    assert t.z > compare_independent_correlations(0.5, 100, 0.3, 100).z


def test_fisher_z_bad_and_undefined_input() -> None:
    with pytest.raises(UndefinedStatisticError, match="infinite"):
        compare_independent_correlations(1.0, 50, 0.3, 50)
    with pytest.raises(UserError, match="between -1 and 1"):
        fisher_z_ci(1.5, 50)
    with pytest.raises(UserError, match=">= 4"):
        fisher_z_ci(0.5, 3)
    with pytest.raises(UserError, match="level"):
        fisher_z_ci(0.5, 30, level=95)
    with pytest.raises(UserError, match="cannot hold together"):
        compare_dependent_correlations(0.9, -0.9, 0.9, 50)
    with pytest.raises(UndefinedStatisticError, match="same variable"):
        compare_dependent_correlations(0.5, 0.3, 1.0, 50)


# --------------------------------------------------------------------------------- Cohen's kappa


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn(weights: str | None) -> None:
    a = RNG.integers(1, 6, size=60)
    b = np.clip(a + RNG.integers(-1, 2, size=60), 1, 5)
    assert cohen_kappa(a.tolist(), b.tolist(), weights=weights) == pytest.approx(  # type: ignore[arg-type]
        cohen_kappa_score(a, b, weights=weights)
    )


def test_cohen_kappa_labels_and_edge_cases() -> None:
    a = ["low", "mid", "high", "mid", "low", "high", "mid"]
    b = ["low", "high", "high", "mid", "mid", "high", "low"]
    order = ["low", "mid", "high"]
    ours = cohen_kappa(a, b, weights="linear", labels=order)
    assert ours == pytest.approx(cohen_kappa_score(a, b, weights="linear", labels=order))
    # Alphabetical order (high < low < mid) gives a different weighted kappa: order matters.
    assert cohen_kappa(a, b, weights="linear") != pytest.approx(ours)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    assert cohen_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    # One rater constant, the other not: chance agreement explains everything, kappa = 0.
    assert cohen_kappa(["y", "y", "y", "y"], ["y", "n", "y", "n"]) == pytest.approx(0.0)
    with pytest.raises(UndefinedStatisticError, match="kappa is undefined"):
        cohen_kappa(["y", "y"], ["y", "y"])
    with pytest.raises(UndefinedStatisticError):
        cohen_kappa(["y"], ["y"])  # a single item
    with pytest.raises(UserError, match="same items"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(UserError, match="empty"):
        cohen_kappa([], [])
    with pytest.raises(UserError, match="not in `labels`"):
        cohen_kappa(a, b, labels=["low", "mid"])
    with pytest.raises(UserError, match="weights"):
        cohen_kappa(a, b, weights="cubic")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ Krippendorff's alpha

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers x 12 units.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_alpha_published_example(level: str, published: float) -> None:
    ours = krippendorff_alpha(K2011, level_of_measurement=level)  # type: ignore[arg-type]
    assert ours == pytest.approx(published, abs=5e-4)
    data = np.array([[np.nan if v is None else v for v in row] for row in K2011])
    assert ours == pytest.approx(krippendorff.alpha(data, level_of_measurement=level))


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_package_with_missing(level: str) -> None:
    data = RNG.integers(1, 6, size=(5, 30)).astype(float)
    data[:, :10] = np.clip(data[0, :10] + RNG.integers(-1, 2, size=(5, 10)), 1, 5)  # some agreement
    data[RNG.random(data.shape) < 0.2] = np.nan
    ours = krippendorff_alpha(data, level_of_measurement=level)  # type: ignore[arg-type]
    assert ours == pytest.approx(krippendorff.alpha(data, level_of_measurement=level))


def test_krippendorff_alpha_nominal_strings_and_edge_cases() -> None:
    labels = [["a", "b", "a", None, "c"], ["a", "b", "b", "c", "c"], ["a", None, "a", "c", None]]
    codes = {"a": 1.0, "b": 2.0, "c": 3.0, None: np.nan}
    numeric = np.array([[codes[v] for v in row] for row in labels])
    assert krippendorff_alpha(labels, level_of_measurement="nominal") == pytest.approx(
        krippendorff.alpha(numeric, level_of_measurement="nominal")
    )
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3]]) == 1.0
    with pytest.raises(UndefinedStatisticError, match="identical"):
        krippendorff_alpha([[2, 2, None], [2, 2, 2]])
    with pytest.raises(UserError, match="two or more raters"):
        krippendorff_alpha([[1, None], [None, 2]])
    with pytest.raises(UserError, match="at least 2 raters"):
        krippendorff_alpha([[1, 2, 3]])
    with pytest.raises(UserError, match="numeric"):
        krippendorff_alpha(labels, level_of_measurement="interval")
    with pytest.raises(UserError, match="one entry per unit"):
        krippendorff_alpha([[1, 2], [1]])
    with pytest.raises(UserError, match="level_of_measurement"):
        krippendorff_alpha([[1, 2], [1, 2]], level_of_measurement="cardinal")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- ICC

PG_TYPES = {
    "ICC1": "ICC(1,1)",
    "ICC2": "ICC(A,1)",
    "ICC3": "ICC(C,1)",
    "ICC1k": "ICC(1,k)",
    "ICC2k": "ICC(A,k)",
    "ICC3k": "ICC(C,k)",
}


def _pingouin_icc(ratings: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    monkeypatch.delitem(pingouin.options, "round.column.CI95", raising=False)  # full-precision CIs
    n, k = ratings.shape
    long = pd.DataFrame(
        [(i, j, ratings[i, j]) for i in range(n) for j in range(k)], columns=["item", "rater", "score"]
    )
    return pingouin.intraclass_corr(long, targets="item", raters="rater", ratings="score").set_index("Type")


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin's own use of pandas
@pytest.mark.parametrize("seed", [0, 1])
def test_icc_matches_pingouin(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    ratings = rng.normal(size=(10, 1)) + rng.normal(size=(1, 4)) * 0.5 + rng.normal(size=(10, 4)) * 0.7
    ref = _pingouin_icc(ratings, monkeypatch)
    ours = intraclass_correlation(ratings)
    assert tuple(ours) == ICC_KINDS
    for kind, r in ours.items():
        row = ref.loc[PG_TYPES[kind]]
        assert (r.icc, r.f, r.pvalue) == pytest.approx((row["ICC"], row["F"], row["pval"]))
        assert (r.df1, r.df2) == (row["df1"], row["df2"])
        assert (r.ci_low, r.ci_high) == pytest.approx(tuple(row["CI95"]))


def test_icc_shrout_fleiss_1979_table() -> None:
    # Shrout & Fleiss (1979), 6 targets x 4 judges, published to 2 decimals.
    ratings = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    got = {k: round(v.icc, 2) for k, v in intraclass_correlation(ratings).items()}
    assert got == {"ICC1": 0.17, "ICC2": 0.29, "ICC3": 0.71, "ICC1k": 0.44, "ICC2k": 0.62, "ICC3k": 0.91}


def test_icc_perfect_and_undefined() -> None:
    perfect = intraclass_correlation([[1, 1, 1], [2, 2, 2], [4, 4, 4]])
    for r in perfect.values():
        assert r.icc == 1.0 and math.isinf(r.f) and r.pvalue == 0.0
        assert (r.ci_low, r.ci_high) == (1.0, 1.0)
    # Consistent but offset raters: consistency is perfect, absolute agreement is not.
    offset = intraclass_correlation([[1, 2], [2, 3], [4, 5]])
    assert offset["ICC3"].icc == 1.0 and offset["ICC2"].icc < 1.0
    assert offset["ICC2"].ci_low <= offset["ICC2"].icc <= offset["ICC2"].ci_high
    with pytest.raises(UndefinedStatisticError, match="same mean rating"):
        intraclass_correlation([[3, 3], [3, 3], [3, 3]])
    with pytest.raises(UndefinedStatisticError):
        intraclass_correlation([[0.1, 0.1], [0.1, 0.1]])  # equal up to rounding
    with pytest.raises(UserError, match="at least 2"):
        intraclass_correlation([[1, 2, 3]])
    with pytest.raises(UserError, match="NaN"):
        intraclass_correlation([[1, 2], [3, float("nan")]])
    with pytest.raises(UserError, match="level"):
        intraclass_correlation([[1, 2], [3, 5]], level=0)
