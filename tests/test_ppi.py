"""PPI++ estimates (clinieval.analysis.ppi): against ppi_py, by hand, and by simulation.

ppi_py (ppi-python 0.2.3) is the reference only; clinieval never imports it. The simulations are
those of bench/ppi_validity.py (the scenarios docs/calibration.md tabulates), run here with 4,000
studies each rather than the table's 1,000: PPI++'s true coverage in them is 93.8-94.8% (20,000
studies), and at 1,000 studies a figure wanders +-1.4 points, so a 93% floor would hold or fail by
the luck of the seed (it failed for 7 of 20 seeds tried); at 4,000 (+-0.7) it held for all 10 tried.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats

from bench import ppi_validity as sim
from clinieval.analysis.ppi import (
    Estimate,
    PPIError,
    clinicians_only,
    judge_bias,
    judge_only,
    mean_batch,
    pilot_figures,
    ppi_difference,
    ppi_mean,
    ppi_mean_batch,
    ratings_needed,
)
from clinieval.errors import UserError

SEED = 20240  # bench/ppi_validity.py's default
STUDIES = 4000  # per coverage simulation (see above)


def _keyed(y: np.ndarray, f_lab: np.ndarray, f_unl: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """(judge, clinicians) mappings: rated items r0.. (both scores), unrated u0.. (judge only)."""
    clinicians = {f"r{i}": float(v) for i, v in enumerate(y)}
    judge = {f"r{i}": float(v) for i, v in enumerate(f_lab)} | {
        f"u{i}": float(v) for i, v in enumerate(f_unl)
    }
    return judge, clinicians


def _data(rng: np.random.Generator, n: int, big_n: int, kind: str) -> tuple[np.ndarray, ...]:
    if kind == "binary":
        y = rng.random(n) < 0.7
        f = y ^ (rng.random(n) < 0.2)
        return y.astype(float), f.astype(float), (rng.random(big_n) < 0.68).astype(float)
    if kind == "graded":  # a 1-5 judge score against a continuous clinician score
        y = rng.normal(3.0, 1.0, n)
        return (
            y,
            np.clip(np.round(y + rng.normal(0.3, 0.7, n)), 1, 5),
            np.clip(np.round(rng.normal(3.3, 1.2, big_n)), 1, 5),
        )
    if kind == "compressed":  # the judge spreads less than the clinicians: the best lam is above 1
        y = rng.normal(0.0, 1.0, n)
        return y, 0.3 * y + rng.normal(0, 0.05, n), rng.normal(0.0, 0.3, big_n)
    y = rng.normal(size=n)  # "opposed": a judge that disagrees: the best lam is below 0
    return y, -y + rng.normal(0, 0.5, n), rng.normal(size=big_n)


# ------------------------------------------------------------------------------ against ppi_py


@pytest.mark.parametrize(
    ("kind", "n", "big_n"),
    [
        ("binary", 12, 40),
        ("binary", 150, 2000),
        ("graded", 8, 30),
        ("graded", 400, 6000),
        ("compressed", 50, 500),
        ("opposed", 50, 500),
    ],
)
@pytest.mark.parametrize("lam", [None, 0.0, 0.4, 1.0, 1.6])
def test_point_and_interval_equal_ppi_py(kind: str, n: int, big_n: int, lam: float | None) -> None:
    rng = np.random.default_rng([n, big_n, len(kind)])
    y, f_lab, f_unl = _data(rng, n, big_n, kind)
    judge, clinicians = _keyed(y, f_lab, f_unl)
    got = ppi_mean(judge, clinicians, alpha=0.05, lam=lam)
    point = float(np.ravel(ppi_mean_pointestimate(y, f_lab, f_unl, lam=lam))[0])
    low, high = (float(np.ravel(b)[0]) for b in ppi_mean_ci(y, f_lab, f_unl, alpha=0.05, lam=lam))
    assert got.value == pytest.approx(point, abs=1e-9)
    assert (got.low, got.high) == pytest.approx((low, high), abs=1e-9)
    assert (got.n_rated, got.n_judged, got.clusters, got.df) == (n, n + big_n, None, math.inf)
    if lam is None:  # the same tuned lam: given back to ppi_py, it reproduces ppi_py's own tuning
        assert got.lam is not None and 0.0 <= got.lam <= 1.0
        again = ppi_mean_ci(y, f_lab, f_unl, alpha=0.05, lam=got.lam)
        assert (float(np.ravel(again[0])[0]), float(np.ravel(again[1])[0])) == pytest.approx(
            (low, high), abs=1e-12
        )
        # ppi_py clips lam to [0, 1], and so does clinieval: at the bounds for these two judges
        assert got.lam == {"compressed": 1.0, "opposed": 0.0}.get(kind, got.lam)
    else:
        assert got.lam == lam


def test_clinicians_only_is_ppi_with_lam_zero_and_the_plain_clt_interval() -> None:
    rng = np.random.default_rng(3)
    y, f_lab, f_unl = _data(rng, 90, 900, "graded")
    judge, clinicians = _keyed(y, f_lab, f_unl)
    got = clinicians_only(clinicians)
    zero = ppi_mean(judge, clinicians, lam=0.0)
    half = stats.norm.ppf(0.975) * y.std() / math.sqrt(y.size)
    assert (got.value, got.low, got.high) == pytest.approx(
        (y.mean(), y.mean() - half, y.mean() + half), abs=1e-12
    )
    assert (zero.value, zero.low, zero.high) == pytest.approx((got.value, got.low, got.high), abs=1e-12)
    assert (got.estimator, got.n_rated, got.n_judged, got.lam) == ("clinicians only", 90, 0, None)
    whole = judge_only(judge)
    every = np.concatenate([f_lab, f_unl])
    assert whole.value == pytest.approx(every.mean()) and whole.se == pytest.approx(
        every.std() / math.sqrt(990)
    )
    assert (whole.estimator, whole.n_rated, whole.n_judged) == ("judge only", 0, 990)


# ------------------------------------------------------------------------------------ by hand


def test_a_tiny_data_set_by_hand() -> None:
    # 4 rated items: clinician Y = 1 0 1 1, judge f = 1 0 0 1; 6 unrated, judge f = 1 1 0 1 0 1.
    judge = dict(zip("abcdefghij", [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0], strict=True))
    clinicians = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    n, big_n = 4, 6
    # lam = C / D. C = sum (Y - 3/4)(f - 1/2) / n**2 = (1/8 + 3/8 - 1/8 + 1/8) / 16 = 1/32.
    # D pools the judge's 10 scores (6 ones, mean 3/5): sum of squares 6 (2/5)**2 + 4 (3/5)**2 = 12/5,
    # variance 12/5 / 9 = 4/15, times (1/n + 1/N) = 5/12: D = 1/9. lam = 9/32.
    lam = 9 / 32
    # theta = lam * 4/6 + mean(Y - lam f) = 3/4 + lam (2/3 - 1/2) = 3/4 + 9/192 = 0.796875
    value = 0.75 + lam / 6
    # rated residuals r = Y - lam f = 23/32, 0, 1, 23/32 (mean 19.5/32), deviations 3.5, -19.5, 12.5,
    # 3.5 (/32), squares 561/1024, over n**2: 561/16384. Unrated: lam**2 sum (f - 2/3)**2 / N**2
    # = (81/1024) (4/3) / 36 = 3/1024 = 48/16384. Variance 609/16384.
    var = 609 / 16384
    got = ppi_mean(judge, clinicians)
    assert got.lam == pytest.approx(lam, abs=1e-15)
    assert got.value == pytest.approx(value, abs=1e-15)
    assert got.se**2 == pytest.approx(var, abs=1e-15)
    z = stats.norm.ppf(0.975)
    assert (got.low, got.high) == pytest.approx(
        (value - z * math.sqrt(var), value + z * math.sqrt(var)), abs=1e-14
    )
    assert got.width == pytest.approx(2 * z * math.sqrt(var))
    assert (got.estimator, got.n_rated, got.n_judged, got.clusters) == ("PPI++", n, n + big_n, None)
    # The clinicians alone: 3/4 with variance (3/16) / 4 = 3/64 = 768/16384, wider than 609/16384.
    assert clinicians_only(clinicians).se ** 2 == pytest.approx(3 / 64, abs=1e-15)
    # The judge's bias on the rated items: f - Y = 0 0 -1 0, mean -1/4, variance (3/16) / 4.
    bias = judge_bias(judge, clinicians)
    assert (bias.value, bias.se**2, bias.estimator) == (
        -0.25,
        pytest.approx(3 / 64),
        "judge minus clinicians",
    )


def test_clustered_variances_by_hand() -> None:
    # Rated Y = 1 0 1 1 in patients p p q q: deviations 1/4, -3/4 | 1/4, 1/4; patient sums -1/2, 1/2.
    # CR0 variance (1/4 + 1/4) / 16 = 1/32; times G / (G - 1) = 2: 1/16; t with 1 degree of freedom.
    clinicians = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    clusters = {"a": "p", "b": "p", "c": "q", "d": "q"}
    got = clinicians_only(clinicians, clusters)
    assert (got.value, got.se**2, got.df, got.clusters) == (0.75, pytest.approx(1 / 16), 1.0, 2)
    assert got.high - got.value == pytest.approx(stats.t.ppf(0.975, 1) * 0.25)


def test_a_patient_on_both_sides_counts_its_covariance() -> None:
    """The interval's variance sums each patient's share of theta's deviation over both sides
    before squaring: checked against a plain loop over patients (lam given, so tuning is out)."""
    rng = np.random.default_rng(11)
    patients = [f"p{i // 3}" for i in range(60)]  # 20 patients of 3 items
    items = [f"i{i}" for i in range(60)]
    rated = set(items[:14])  # p4 has items 12, 13 rated and 14 unrated: on both sides
    y = rng.random(60) < 0.6
    f = (y ^ (rng.random(60) < 0.2)).astype(float)
    judge = dict(zip(items, f, strict=True))
    clinicians = {k: float(v) for k, v in zip(items, y, strict=True) if k in rated}
    clusters = dict(zip(items, patients, strict=True))
    lam = 0.7
    got = ppi_mean(judge, clinicians, clusters, lam=lam)
    lab = [k for k in items if k in rated]
    unl = [k for k in items if k not in rated]
    r_mean = sum(clinicians[k] - lam * judge[k] for k in lab) / len(lab)
    f_mean = sum(judge[k] for k in unl) / len(unl)
    share: dict[str, float] = {}
    for k in lab:
        deviation = clinicians[k] - lam * judge[k] - r_mean
        share[clusters[k]] = share.get(clusters[k], 0.0) + deviation / len(lab)
    for k in unl:
        share[clusters[k]] = share.get(clusters[k], 0.0) + lam * (judge[k] - f_mean) / len(unl)
    rated_patients = len({clusters[k] for k in lab})
    assert rated_patients == 5
    var = sum(s * s for s in share.values()) * rated_patients / (rated_patients - 1)
    assert got.se**2 == pytest.approx(var, rel=1e-12)
    assert got.value == pytest.approx(lam * f_mean + r_mean, abs=1e-14)
    assert (got.clusters, got.df) == (5, 4.0)


def test_one_patient_per_item_is_the_independent_case_with_the_small_sample_factor() -> None:
    rng = np.random.default_rng(5)
    y, f_lab, f_unl = _data(rng, 40, 300, "binary")
    judge, clinicians = _keyed(y, f_lab, f_unl)
    plain = ppi_mean(judge, clinicians)
    singletons = ppi_mean(judge, clinicians, {k: k for k in judge})
    assert singletons.value == pytest.approx(plain.value, abs=1e-14)
    assert singletons.lam == pytest.approx(plain.lam, abs=1e-14)
    assert singletons.se**2 == pytest.approx(plain.se**2 * 40 / 39, rel=1e-12)
    assert (singletons.df, singletons.clusters) == (39.0, 40)


# --------------------------------------------------------------------------------- edge cases


def test_too_few_ratings_or_patients_are_plain_errors() -> None:
    judge = {"a": 1.0, "b": 0.0, "c": 1.0}
    with pytest.raises(PPIError, match=r"at least 2 clinician-rated items.*got 1") as e:
        ppi_mean(judge, {"a": 1.0})
    assert isinstance(e.value, ValueError) and isinstance(e.value, UserError)
    with pytest.raises(ValueError, match=r"at least 2 patients.*all 2 come from one patient"):
        ppi_mean(judge, {"a": 1.0, "b": 0.0}, {"a": "p", "b": "p", "c": "q"})
    with pytest.raises(ValueError, match="at least 2 judge items"):
        judge_only({"a": 1.0})
    with pytest.raises(ValueError, match=r"at least 2 clinician-rated items.*got 0"):
        clinicians_only({})


def test_bad_inputs_name_the_item() -> None:
    judge = {"a": 1.0, "b": 0.0, "c": 1.0}
    with pytest.raises(PPIError, match="item d has a clinician rating but no judge score"):
        ppi_mean(judge, {"a": 1.0, "d": 0.0})
    with pytest.raises(PPIError, match="item c has no patient"):
        ppi_mean(judge, {"a": 1.0, "b": 0.0}, {"a": "p", "b": "q"})
    with pytest.raises(PPIError, match="judge score of item b is nan"):
        ppi_mean({**judge, "b": math.nan}, {"a": 1.0, "c": 0.0})
    with pytest.raises(PPIError, match="clinician score of item a is 'yes'"):
        ppi_mean(judge, {"a": "yes", "c": 0.0})  # type: ignore[dict-item]
    with pytest.raises(PPIError, match="alpha"):
        ppi_mean(judge, {"a": 1.0, "c": 0.0}, alpha=1.5)
    with pytest.raises(PPIError, match="lam must be a finite number"):
        ppi_mean(judge, {"a": 1.0, "c": 0.0}, lam=math.inf)
    with pytest.raises(PPIError, match="both the rated and the unrated"):
        ppi_mean_batch(np.ones(3), np.ones(3), np.ones(4), patients_lab=np.arange(3))


def _finite(e: Estimate) -> bool:
    return all(math.isfinite(v) for v in (e.value, e.low, e.high, e.se))


def test_constant_scores_give_lam_zero_and_no_nan() -> None:
    rated = {"a": 1.0, "b": 0.0, "c": 1.0}
    constant_judge = {k: 1.0 for k in "abcdefgh"}
    got = ppi_mean(constant_judge, rated)
    assert got.lam == 0.0 and _finite(got)
    assert (got.value, got.se) == pytest.approx((clinicians_only(rated).value, clinicians_only(rated).se))
    # The clinicians agree on every rated item: lam 0 and a zero-width interval, not NaN.
    agreed = ppi_mean({"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0}, {"a": 1.0, "b": 1.0})
    assert (agreed.lam, agreed.value, agreed.width) == (0.0, 1.0, 0.0) and _finite(agreed)
    # Fractional constants (whose mean is not exact in floating point) are still constant.
    tenth = ppi_mean({k: 0.1 for k in "abcdefg"}, {"a": 0.2, "b": 0.4, "c": 0.3})
    assert tenth.lam == 0.0 and _finite(tenth)
    ones, rated = {"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 1.0}
    _, p = ppi_difference(ones, ones, rated, rated)
    assert p == 1.0  # no difference anywhere: zero se, p-value 1, not NaN


def test_no_unrated_items_is_the_classical_estimate() -> None:
    scores = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}
    judge = {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0}
    got = ppi_mean(judge, scores, lam=0.9)
    plain = clinicians_only(scores)
    assert (got.value, got.low, got.high, got.lam) == (plain.value, plain.low, plain.high, 0.0)
    assert (got.n_rated, got.n_judged) == (4, 4)


# ---------------------------------------------------------------------------------- simulation


def _by(rows: list[sim.Row]) -> dict[tuple[str, str], sim.Row]:
    return {(r.model, r.estimator): r for r in rows}


@pytest.fixture(scope="module")
def iid() -> dict[tuple[str, str], sim.Row]:
    return _by(sim.validity_rows(sim.IID, STUDIES, SEED))


def test_the_simulation_is_the_one_described(iid: dict[tuple[str, str], sim.Row]) -> None:
    assert sim.IID.items == 2000 and 100 <= sim.IID.rated <= 200 and len(sim.IID.accuracy) == 3
    assert sim.IID.bias == (0.0, 0.15, -0.05)
    # the judge's mean is the accuracy plus its bias, and it agrees with the clinicians well above chance
    rng = np.random.default_rng(1)
    truth, judge = sim.simulate(sim.IID, 200, rng)
    for k, (p, b) in enumerate(zip(sim.IID.accuracy, sim.IID.bias, strict=True)):
        assert truth[k].mean() == pytest.approx(p, abs=0.005)
        assert judge[k].mean() == pytest.approx(p + b, abs=0.005)
        assert 0.3 < np.corrcoef(truth[k].ravel(), judge[k].ravel())[0, 1] < 0.9


def test_ppi_covers_where_the_biased_judge_alone_does_not(iid: dict[tuple[str, str], sim.Row]) -> None:
    assert iid[("B", "judge only")].coverage < 0.5  # judged +0.15 too kind on model B
    assert iid[("C", "judge only")].coverage < 0.5  # and -0.05 too harsh on C
    for model in "ABC":
        ppi, clin = iid[(model, "PPI++")], iid[(model, "clinicians only")]
        assert 0.93 <= ppi.coverage <= 0.97, ppi
        assert ppi.median_width < clin.median_width, (ppi, clin)
    # where the judge agrees best (A, C) it buys the most: a quarter narrower or more
    assert iid[("A", "PPI++")].median_width < 0.75 * iid[("A", "clinicians only")].median_width


def test_an_uninformative_judge_costs_next_to_nothing() -> None:
    """A judge independent of the truth: lam is tuned to about 0 (clipped at 0 from below), so
    PPI++ is about the clinicians-only interval. Not exactly: lam is tuned on the data, and the
    judge's variance is pooled over both sides, so on a given study PPI++ can come out a hair
    wider (at most 2% in median is allowed); it keeps its coverage."""
    rows = _by(sim.validity_rows(sim.UNINFORMATIVE, STUDIES, SEED + 1))
    for model in "ABC":
        ppi, clin = rows[(model, "PPI++")], rows[(model, "clinicians only")]
        assert ppi.median_width <= 1.02 * clin.median_width, (ppi, clin)
        assert 0.93 <= ppi.coverage <= 0.97, ppi


def test_clustered_items_need_the_cluster_robust_interval() -> None:
    rows = _by(sim.validity_rows(sim.CLUSTERED, STUDIES, SEED + 2))
    for model in "ABC":
        robust, naive = rows[(model, "PPI++")], rows[(model, "PPI++ ignoring patients")]
        assert 0.93 <= robust.coverage <= 0.97, robust
        assert naive.coverage < 0.90, naive  # items of a patient vary together: too narrow
        assert robust.median_width < rows[(model, "clinicians only")].median_width


def _studies(design: sim.Design, count: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    truth, judge = sim.simulate(design, count, np.random.default_rng(seed))
    yield from zip(truth.astype(float), judge.astype(float), strict=True)


def test_the_keyed_functions_compute_what_the_simulation_measured() -> None:
    """The simulation runs the batched core; the keyed functions callers use give the same
    numbers on the same studies (clustered, so the patient bookkeeping is checked too)."""
    design = sim.CLUSTERED
    lab, unl = sim.patient_ids(design)
    n = design.rated
    y_all, f_all = next(_studies(design, 3, 9))  # model A: 3 studies
    batch = ppi_mean_batch(y_all[:, :n], f_all[:, :n], f_all[:, n:], patients_lab=lab, patients_unl=unl)
    low, high = batch.bounds()
    for s in range(3):
        judge = {f"i{i}": float(v) for i, v in enumerate(f_all[s])}
        clinicians = {f"i{i}": float(v) for i, v in enumerate(y_all[s, :n])}
        clusters = {f"i{i}": f"patient {i // design.patient_size}" for i in range(design.items)}
        got = ppi_mean(judge, clinicians, clusters)
        assert (got.value, got.low, got.high, got.lam) == pytest.approx(
            (batch.value[s], low[s], high[s], batch.lam[s]), abs=1e-12
        )
        assert got.clusters == n // design.patient_size


def test_ppi_difference_covers_and_is_ppi_on_the_differences() -> None:
    rows = _by(sim.difference_rows(sim.PAIRED, STUDIES, SEED + 5))
    assert 0.93 <= rows[("B - A", "PPI++")].coverage <= 0.97
    assert rows[("B - A", "judge only")].coverage < 0.5
    assert rows[("B - A", "PPI++")].median_width < rows[("B - A", "clinicians only")].median_width
    # One study through the keyed function: the same as ppi_mean on the per-item differences.
    truth, judge = sim.simulate(sim.PAIRED, 1, np.random.default_rng(4))
    n = sim.PAIRED.rated
    keys = [f"i{i}" for i in range(sim.PAIRED.items)]
    fa, fb = (dict(zip(keys, judge[k, 0].astype(float), strict=True)) for k in (0, 1))
    ya, yb = (dict(zip(keys[:n], truth[k, 0, :n].astype(float), strict=True)) for k in (0, 1))
    fb["extra"] = 1.0  # judged for B only: not an item of the comparison
    got, p = ppi_difference(fb, fa, yb, ya)
    same = ppi_mean({k: fb[k] - fa[k] for k in keys}, {k: yb[k] - ya[k] for k in keys[:n]})
    assert got == same
    assert p == pytest.approx(2 * stats.norm.sf(abs(got.value) / got.se), rel=1e-12)
    assert (p < 0.05) == (got.low > 0 or got.high < 0)


def test_ppi_difference_with_patients_uses_t_p_values() -> None:
    keys = [f"i{i}" for i in range(40)]
    rng = np.random.default_rng(2)
    fa = {k: float(v) for k, v in zip(keys, rng.random(40) < 0.6, strict=True)}
    fb = {k: float(v) for k, v in zip(keys, rng.random(40) < 0.7, strict=True)}
    ya, yb = ({k: f[k] for k in keys[:12]} for f in (fa, fb))
    clusters = {k: f"p{i // 4}" for i, k in enumerate(keys)}
    got, p = ppi_difference(fa, fb, ya, yb, clusters)
    assert got.df == 2.0  # 3 rated patients
    assert p == pytest.approx(2 * stats.t.sf(abs(got.value) / got.se, 2), rel=1e-12)


# ------------------------------------------------------------------------------------ planning


def test_ratings_needed_formula() -> None:
    z = stats.norm.ppf(0.975)
    # no judge: the clinicians-only count (2 z sd / width)**2, rounded up
    assert ratings_needed(0.1, sd=0.5, rho=0.0, judged=5000) == math.ceil((2 * z * 0.5 / 0.1) ** 2)
    assert ratings_needed(0.1, sd=0.5, rho=-0.4, judged=5000) == ratings_needed(
        0.1, sd=0.5, rho=0.0, judged=5000
    )
    counts = [ratings_needed(0.1, sd=0.5, rho=r, judged=5000) for r in (0.0, 0.3, 0.6, 0.9)]
    assert counts == sorted(counts, reverse=True) and counts[-1] < counts[0] / 4
    assert ratings_needed(0.1, sd=0.5, rho=1.0, judged=5000) == 2
    n = ratings_needed(0.08, sd=0.45, rho=0.7, judged=2000)
    width = lambda m: 2 * z * 0.45 * math.sqrt((1 - 0.49 * (2000 - m) / 2000) / m)  # noqa: E731
    assert width(n) <= 0.08 < width(n - 1)
    with pytest.raises(PPIError, match="rating all of them gives"):
        ratings_needed(0.01, sd=0.5, rho=0.5, judged=1000)
    with pytest.raises(PPIError, match="rho must be a correlation"):
        ratings_needed(0.1, sd=0.5, rho=1.5, judged=1000)
    with pytest.raises(PPIError, match="sd must be a positive number"):
        ratings_needed(0.1, sd=0.0, rho=0.5, judged=1000)


def test_ratings_needed_delivers_its_width_in_simulation() -> None:
    """From a pilot's figures, ask for a 0.10-wide interval on model A; simulate 1,000 studies
    rating that many items: the median PPI++ width is 0.10 within 3%."""
    design = sim.IID
    rng = np.random.default_rng(SEED + 7)
    truth, judge = sim.simulate(design, 50, rng)  # a generous pilot: 100,000 rated items
    y, f = truth[0].ravel().astype(float), judge[0].ravel().astype(float)
    keys = [str(i) for i in range(y.size)]
    sd, rho = pilot_figures(dict(zip(keys, f, strict=True)), dict(zip(keys, y, strict=True)))
    assert sd == pytest.approx(np.std(y, ddof=1)) and rho == pytest.approx(np.corrcoef(y, f)[0, 1])
    n = ratings_needed(0.10, sd=sd, rho=rho, judged=design.items)
    assert n < ratings_needed(0.10, sd=sd, rho=0.0, judged=design.items) * 0.75
    truth, judge = sim.simulate(design, 1000, rng)
    y_all, f_all = truth[0].astype(float), judge[0].astype(float)
    widths = ppi_mean_batch(y_all[:, :n], f_all[:, :n], f_all[:, n:]).width()
    assert np.median(widths) == pytest.approx(0.10, rel=0.03)
    classical = mean_batch(y_all[:, :n]).width()
    assert np.median(widths) < np.median(classical)


def test_pilot_figures_of_a_constant_side_is_no_correlation() -> None:
    assert pilot_figures({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 1.0, "b": 0.0, "c": 1.0}) == (
        pytest.approx(math.sqrt(1 / 3)),
        0.0,
    )
