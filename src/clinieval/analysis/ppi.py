"""Clinician-level scores from every judge score plus a small clinician sample (PPI++).

Why: an LLM judge scores every item, cheaply, but its mean is the *judge's* opinion, biased by
however much it is lenient or harsh on a given model; a clinician rates only a small random sample,
which is unbiased but wide. Prediction-powered inference (Angelopoulos et al., Science 2023) uses
both: the judge's mean over the unrated items, corrected by the judge's average error on the rated
ones. The correction is measured, not assumed, so the estimate is unbiased *whatever* the judge's
bias; the judge only buys precision, as much as it agrees with the clinicians. PPI++ (Angelopoulos,
Duchi & Zrnic 2023) adds one weight ``lam`` on the judge, tuned from the data to give the narrowest
interval: about 0 for a judge unrelated to the clinicians (then the estimate is the clinicians'
mean), up to 1 for a judge that agrees with them.

The estimand is the clinician-level mean over the population the items are drawn from::

    theta(lam) = lam * mean over unrated items of f  +  mean over rated items of (Y - lam * f)

where ``f`` is the judge's score and ``Y`` the clinician's. The unrated items are the judged items
*without* a rating: the clinician sample is drawn at random from the judged items, so the rest are
a second, independent sample of the same population, as PPI assumes.

Everything is item-keyed (callers hold ``item_id -> score`` mappings) and has a batched array core
(:func:`ppi_mean_batch`, :func:`mean_batch`) that computes the same numbers for many studies at once,
for the validity simulations (``bench/ppi_validity.py``, ``tests/test_ppi.py``).

Conventions, chosen to equal the reference implementation ppi_py 0.2.3 (``ppi_mean_pointestimate``,
``ppi_mean_ci``; the tests check it to 1e-9; clinieval never imports it) in the independent case:

* intervals are normal (CLT) intervals; variances of a mean are ``sum of squared deviations / n**2``
  (no n - 1 correction), as ppi_py and the classical CLT interval (clustered items differ: below);
* the tuned ``lam`` minimises the estimated variance, with the judge's score variance pooled over
  rated and unrated items (the judge scored both, from the same population, so the pooled figure
  is steadier), and is clipped to [0, 1]: 0 is the clinicians-only estimate and 1 plain PPI, and a
  noisy estimate from a small sample can't push the judge's weight outside that range.

Clusters: items of one patient are correlated, so treating them as independent makes intervals too
narrow (the simulation in docs/calibration.md: 85% coverage instead of 95%). Given ``clusters``
(item -> patient), every variance is the cluster-robust (sandwich) variance over patients, with the
usual corrections for few clusters, since rated patients number in the tens: the variance times
G / (G - 1) and a Student t quantile with G - 1 degrees of freedom, G the rated patients (the judged
ones for judge only). So one patient per item is the independent case up to those two factors. The
clinician sampler draws whole patients, so a patient is normally rated entirely or not at all; when
a patient has items on both sides anyway, the interval's variance sums that patient's contributions
from both sides before squaring (so the covariance between the two sides is counted), and only the
tuning of ``lam`` treats the two sides as separate patients.

Bad input raises :class:`PPIError` (a :class:`~clinieval.errors.UserError`, so the CLI prints one
line, and a ``ValueError``): fewer than 2 rated items or patients, a rated item without a judge
score, a missing patient, a non-finite score. No function returns NaN: constant scores give
``lam = 0`` and, when the clinicians agree on every rated item, a zero-width interval (the CLT
interval cannot see variation that the sample does not contain: rate more items).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray

from clinieval.errors import UserError, shown

__all__ = [
    "Batch",
    "Estimate",
    "PPIError",
    "clinicians_only",
    "judge_bias",
    "judge_only",
    "mean_batch",
    "pilot_figures",
    "ppi_difference",
    "ppi_mean",
    "ppi_mean_batch",
    "ratings_needed",
]

FloatArray: TypeAlias = NDArray[np.float64]
IntArray: TypeAlias = NDArray[np.int64]
Scores: TypeAlias = Mapping[str, float]
Clusters: TypeAlias = Mapping[str, str]
Estimator: TypeAlias = Literal["judge only", "clinicians only", "PPI++", "PPI", "judge minus clinicians"]


class PPIError(UserError, ValueError):
    """Input these estimates cannot use, in plain words (too few ratings, a missing score...).

    A UserError so the CLI prints it on one line; a ValueError because that is what numerical
    callers expect of a bad argument.
    """


@dataclass(frozen=True, slots=True)
class Estimate:
    """One estimated mean with its ``1 - alpha`` interval (normal; Student t when clustered).

    ``estimator`` says which data it rests on: "judge only" (every judge score, the judge's own
    mean: biased by however much the judge is), "clinicians only" (the rated items alone),
    "PPI++" (both, the judge's weight tuned), "PPI" (both, the weight fixed by the caller), "judge
    minus clinicians" (the judge's bias, from the rated items).
    ``n_rated`` and ``n_judged`` count the clinician ratings and judge scores behind it;
    ``clusters`` the patients behind the variance when items are clustered (the rated patients,
    or for judge only the judged ones), else None; ``lam`` the judge's weight (PPI++ and PPI only);
    ``df`` the degrees of freedom of the interval's t quantile (infinite: a normal interval, for
    independent items; the patients less one when clustered).
    """

    estimator: Estimator
    value: float
    low: float
    high: float
    se: float
    n_rated: int
    n_judged: int
    clusters: int | None
    lam: float | None
    df: float

    @property
    def width(self) -> float:
        """``high - low``: what more ratings buy down."""
        return self.high - self.low


# --------------------------------------------------------------------------------------------
# The batched core: many studies at once, arrays (studies x items)


@dataclass(frozen=True, slots=True)
class Batch:
    """Estimates of many studies at once: one value, standard error and ``lam`` per study."""

    value: FloatArray
    se: FloatArray
    lam: FloatArray
    df: float = math.inf
    """Degrees of freedom of the interval's t quantile: infinite (normal) for independent items,
    the rated patients less one when clustered."""

    def quantile(self, alpha: float = 0.05) -> float:
        """The two-sided ``1 - alpha`` critical value: normal, or Student t with ``df``."""
        from scipy.stats import norm, t

        tail = 1.0 - _alpha(alpha) / 2.0
        return float(norm.ppf(tail) if math.isinf(self.df) else t.ppf(tail, self.df))

    def bounds(self, alpha: float = 0.05) -> tuple[FloatArray, FloatArray]:
        """The ``1 - alpha`` intervals, low and high."""
        half = self.quantile(alpha) * self.se
        return self.value - half, self.value + half

    def covers(self, truth: float | FloatArray, alpha: float = 0.05) -> NDArray[np.bool_]:
        """Whether each study's interval contains ``truth`` (the simulations' coverage)."""
        low, high = self.bounds(alpha)
        return (low <= truth) & (truth <= high)

    def width(self, alpha: float = 0.05) -> FloatArray:
        return 2.0 * self.quantile(alpha) * self.se

    def p_value(self) -> FloatArray:
        """Two-sided p-values of "the mean is 0", from the same distribution as the interval (so
        p < alpha exactly when the interval excludes 0); a zero standard error gives 1 for a zero
        value and 0 otherwise."""
        from scipy.stats import norm, t

        safe = np.where(self.se > 0, self.se, 1.0)
        z = np.abs(self.value) / safe
        tail = norm.sf(z) if math.isinf(self.df) else t.sf(z, self.df)
        p = np.asarray(2.0 * tail, dtype=np.float64)
        return np.where(self.se > 0, p, np.where(self.value == 0, 1.0, 0.0))


def _z(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1.0 - _alpha(alpha) / 2.0))


def _few_clusters(var: FloatArray, patients: IntArray | None) -> tuple[FloatArray, float]:
    """The usual small-sample corrections for few clusters (variance x G / (G - 1), Student t with
    G - 1 degrees of freedom, G the patients behind the estimate): patients number in the tens,
    where the plain sandwich is too narrow. Independent items keep ppi_py's plain CLT interval."""
    if patients is None:
        return var, math.inf
    groups = int(np.unique(patients).size)
    if groups < 2:
        return var, math.inf
    return var * groups / (groups - 1), float(groups - 1)


def _alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha < 1.0:
        raise PPIError(f"alpha must be a number between 0 and 1 (0.05 for a 95% interval), got {alpha!r}")
    return float(alpha)


def _rows(x: FloatArray) -> FloatArray:
    """A (studies x items) view: one study may come as a flat vector."""
    return x[np.newaxis, :] if x.ndim == 1 else x


def _unit_sums(x: FloatArray, patients: IntArray | None, count: int) -> FloatArray:
    """Per-study sums of ``x`` over each patient (studies x patients); items themselves when
    independent. One bincount over study-offset ids keeps it a single pass for any batch size."""
    if patients is None:
        return x
    studies = x.shape[0]
    ids = (np.arange(studies, dtype=np.int64)[:, np.newaxis] * count + patients[np.newaxis, :]).ravel()
    sums = np.bincount(ids, weights=x.ravel(), minlength=studies * count)
    return np.asarray(sums, dtype=np.float64).reshape(studies, count)


def _centred(x: FloatArray) -> FloatArray:
    return np.asarray(x - x.mean(axis=1, keepdims=True), dtype=np.float64)


def _var_of_mean(x: FloatArray, patients: IntArray | None, count: int) -> FloatArray:
    """Variance of each row's mean: sum over units of (summed deviations)**2 / n**2 (CR0)."""
    sums = _unit_sums(_centred(x), patients, count)
    return np.asarray((sums**2).sum(axis=1) / x.shape[1] ** 2, dtype=np.float64)


def mean_batch(x: FloatArray, patients: IntArray | None = None) -> Batch:
    """The plain mean of each row with its CLT standard error (``lam`` reported as 0).

    ``patients`` (one integer per column, shared by all rows) makes the standard error
    cluster-robust, with the few-clusters corrections. This is the clinicians-only and the
    judge-only estimate.
    """
    rows = _rows(np.asarray(x, dtype=np.float64))
    count = int(patients.max()) + 1 if patients is not None and patients.size else 0
    var, df = _few_clusters(_var_of_mean(rows, patients, count), patients)
    return Batch(rows.mean(axis=1), np.sqrt(var), np.zeros(rows.shape[0]), df)


def _tuned_lam(
    y: FloatArray,
    f_lab: FloatArray,
    f_unl: FloatArray,
    patients: tuple[IntArray, IntArray] | None,
    count: int,
) -> FloatArray:
    """The variance-minimising judge weight of each study, clipped to [0, 1].

    Var(theta) = lam**2 V_unl(f) + V_lab(Y) - 2 lam C_lab(Y, f) + lam**2 V_lab(f), minimised at
    lam = C_lab(Y, f) / (V_lab(f) + V_unl(f)). The covariance comes from the rated items (the only
    ones with both scores); the judge's variance is pooled over both sides, per unit (item, or
    patient on one side), then scaled to each side's number of units and items.
    """
    n, big_n = y.shape[1], f_unl.shape[1]
    f_all = np.concatenate([f_lab, f_unl], axis=1)
    pl, pu = patients if patients is not None else (None, None)
    cross = (_unit_sums(_centred(y), pl, count) * _unit_sums(_centred(f_lab), pl, count)).sum(axis=1) / n**2
    grand = f_all.mean(axis=1, keepdims=True)
    spread = (_unit_sums(f_lab - grand, pl, count) ** 2).sum(axis=1)
    spread += (_unit_sums(f_unl - grand, pu, count) ** 2).sum(axis=1)
    units_lab = n if pl is None else np.unique(pl).size
    units_unl = big_n if pu is None else np.unique(pu).size
    per_unit = spread / (units_lab + units_unl - 1)
    denominator = per_unit * (units_lab / n**2 + units_unl / big_n**2)
    constant = (np.ptp(f_all, axis=1) == 0) | (np.ptp(y, axis=1) == 0) | (denominator <= 0)
    lam = np.divide(cross, denominator, out=np.zeros_like(cross), where=~constant)
    return np.asarray(np.clip(lam, 0.0, 1.0), dtype=np.float64)


def ppi_mean_batch(
    y: FloatArray,
    f_lab: FloatArray,
    f_unl: FloatArray,
    *,
    patients_lab: IntArray | None = None,
    patients_unl: IntArray | None = None,
    lam: float | None = None,
) -> Batch:
    """PPI++ for many studies at once: rows are studies, columns items.

    ``y`` and ``f_lab`` are the clinicians' and the judge's scores of the rated items, ``f_unl``
    the judge's scores of the unrated ones. ``patients_lab`` / ``patients_unl`` give each column's
    patient as an integer, in one numbering shared by both sides (so a patient on both sides is
    recognised), the same for every row. ``lam=None`` tunes the weight per study. No unrated
    items: the clinicians-only estimate (``lam`` 0, whatever was asked).
    """
    y, f_lab, f_unl = (_rows(np.asarray(a, dtype=np.float64)) for a in (y, f_lab, f_unl))
    if (patients_lab is None) != (patients_unl is None):
        raise PPIError("give the patients of both the rated and the unrated items, or of neither")
    patients = None if patients_lab is None or patients_unl is None else (patients_lab, patients_unl)
    count = 0 if patients is None else int(max(patients[0].max(initial=-1), patients[1].max(initial=-1))) + 1
    if f_unl.shape[1] == 0:
        return mean_batch(y, patients_lab)
    weight = _tuned_lam(y, f_lab, f_unl, patients, count) if lam is None else np.full(y.shape[0], float(lam))
    column = weight[:, np.newaxis]
    residual = y - column * f_lab
    value = weight * f_unl.mean(axis=1) + residual.mean(axis=1)
    # Each item's share of theta's deviation: rated (r - mean r) / n, unrated lam (f - mean f) / N;
    # summed per patient across both sides before squaring, so a patient on both sides counts once.
    lab_share = _centred(residual) / y.shape[1]
    unl_share = column * _centred(f_unl) / f_unl.shape[1]
    if patients is None:
        var = (lab_share**2).sum(axis=1) + (unl_share**2).sum(axis=1)
    else:
        joint = _unit_sums(lab_share, patients[0], count) + _unit_sums(unl_share, patients[1], count)
        var = (joint**2).sum(axis=1)
    var, df = _few_clusters(var, patients_lab)
    return Batch(value, np.sqrt(var), weight, df)


# --------------------------------------------------------------------------------------------
# Item-keyed inputs


def _values(scores: Scores, keys: Sequence[str], who: str) -> FloatArray:
    """The scores of ``keys`` as floats, or one error naming the first item that is not a number."""
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        value = scores[key]
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            raise PPIError(f"the {who} score of item {shown(key)} is {value!r}; expected a number") from None
        if not math.isfinite(out[i]):
            raise PPIError(
                f"the {who} score of item {shown(key)} is {value!r}; drop the item or give it a finite score"
            )
    return out


def _patients(keys: Sequence[str], clusters: Clusters, index: dict[str, int]) -> IntArray:
    """Each item's patient as a number from ``index`` (extended as new patients appear)."""
    codes = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        patient = clusters.get(key)
        if patient is None:
            raise PPIError(
                f"item {shown(key)} has no patient in clusters; give every scored item its patient"
            )
        codes[i] = index.setdefault(patient, len(index))
    return codes


def _enough(keys: Sequence[str], codes: IntArray | None, what: str, estimate: str) -> int | None:
    """The patient count behind ``keys`` (None when independent), refusing fewer than 2 units."""
    if len(keys) < 2:
        raise PPIError(
            f"{estimate} needs at least 2 {what} items to measure its uncertainty; got {len(keys)}"
        )
    if codes is None:
        return None
    patients = int(np.unique(codes).size)
    if patients < 2:
        raise PPIError(
            f"{estimate} needs {what} items from at least 2 patients (clustered items vary together, so "
            f"uncertainty is measured between patients); all {len(keys)} come from one patient"
        )
    return patients


def _estimate(
    estimator: Estimator,
    batch: Batch,
    alpha: float,
    *,
    n_rated: int,
    n_judged: int,
    clusters: int | None,
    lam: bool,
) -> Estimate:
    low, high = batch.bounds(alpha)
    return Estimate(
        estimator=estimator,
        value=float(batch.value[0]),
        low=float(low[0]),
        high=float(high[0]),
        se=float(batch.se[0]),
        n_rated=n_rated,
        n_judged=n_judged,
        clusters=clusters,
        lam=float(batch.lam[0]) if lam else None,
        df=batch.df,
    )


def _plain_mean(
    scores: Scores, clusters: Clusters | None, alpha: float, *, who: str, estimator: Estimator
) -> tuple[Batch, int, int | None]:
    _alpha(alpha)
    keys = sorted(scores)
    codes = None if clusters is None else _patients(keys, clusters, {})
    patients = _enough(keys, codes, who, f"the {estimator} estimate")
    return mean_batch(_values(scores, keys, who), codes), len(keys), patients


def judge_only(judge: Scores, clusters: Clusters | None = None, alpha: float = 0.05) -> Estimate:
    """The judge's own mean over every judged item, with its CLT interval.

    Narrow, because every item counts, but it estimates what the *judge* thinks: when the judge is
    lenient on one model, the interval sits beside the clinicians' truth and misses it. Shown next
    to PPI++ so that the difference is the judge's bias made visible.
    """
    batch, n, patients = _plain_mean(judge, clusters, alpha, who="judge", estimator="judge only")
    return _estimate("judge only", batch, alpha, n_rated=0, n_judged=n, clusters=patients, lam=False)


def clinicians_only(clinicians: Scores, clusters: Clusters | None = None, alpha: float = 0.05) -> Estimate:
    """The clinicians' mean over the rated items, with its CLT interval: unbiased, but as wide as the
    sample is small. PPI++ with ``lam`` 0 is exactly this."""
    batch, n, patients = _plain_mean(
        clinicians, clusters, alpha, who="clinician-rated", estimator="clinicians only"
    )
    return _estimate("clinicians only", batch, alpha, n_rated=n, n_judged=0, clusters=patients, lam=False)


@dataclass(frozen=True, slots=True)
class _Split:
    """Rated items (both scores) and unrated judged items, as arrays in sorted item order."""

    y: FloatArray
    f_lab: FloatArray
    f_unl: FloatArray
    patients_lab: IntArray | None
    patients_unl: IntArray | None
    rated_patients: int | None


def _split(judge: Scores, clinicians: Scores, clusters: Clusters | None, estimate: str) -> _Split:
    rated = sorted(clinicians)
    unjudged = next((k for k in rated if k not in judge), None)
    if unjudged is not None:
        raise PPIError(
            f"item {shown(unjudged)} has a clinician rating but no judge score; the clinician sample must "
            "be drawn from the judged items (score it with the judge, or drop its rating)"
        )
    unrated = sorted(k for k in judge if k not in clinicians)
    index: dict[str, int] = {}
    pl = None if clusters is None else _patients(rated, clusters, index)
    pu = None if clusters is None else _patients(unrated, clusters, index)
    patients = _enough(rated, pl, "clinician-rated", estimate)
    return _Split(
        y=_values(clinicians, rated, "clinician"),
        f_lab=_values(judge, rated, "judge"),
        f_unl=_values(judge, unrated, "judge"),
        patients_lab=pl,
        patients_unl=pu,
        rated_patients=patients,
    )


def ppi_mean(
    judge: Scores,
    clinicians: Scores,
    clusters: Clusters | None = None,
    alpha: float = 0.05,
    lam: float | None = None,
) -> Estimate:
    """The clinician-level mean from every judge score and the clinician sample (PPI++).

    ``judge`` scores every item; ``clinicians`` rates a random sample of them (each rated item must
    have a judge score). The estimate is the judge's mean over the unrated items plus the judge's
    average error on the rated ones, the judge weighted by ``lam``: unbiased for any ``lam`` and any
    judge, because the error is measured on the same population. ``lam=None`` tunes it to the
    narrowest interval (see the module docstring); a given ``lam`` is used as is (1 is the original
    PPI, 0 the clinicians-only estimate). ``clusters`` (item -> patient) makes the variance
    cluster-robust over patients. No unrated items: the clinicians-only estimate with ``lam`` 0.
    """
    return _ppi(judge, clinicians, clusters, alpha, lam)[0]


def _ppi(
    judge: Scores, clinicians: Scores, clusters: Clusters | None, alpha: float, lam: float | None
) -> tuple[Estimate, Batch]:
    _alpha(alpha)
    if lam is not None and (
        isinstance(lam, bool) or not isinstance(lam, int | float) or not math.isfinite(lam)
    ):
        raise PPIError(f"lam must be a finite number (or None to tune it), got {lam!r}")
    data = _split(judge, clinicians, clusters, "a PPI++ estimate")
    batch = ppi_mean_batch(
        data.y,
        data.f_lab,
        data.f_unl,
        patients_lab=data.patients_lab,
        patients_unl=data.patients_unl,
        lam=lam,
    )
    estimate = _estimate(
        "PPI++" if lam is None else "PPI",
        batch,
        alpha,
        n_rated=data.y.size,
        n_judged=data.y.size + data.f_unl.size,
        clusters=data.rated_patients,
        lam=True,
    )
    return estimate, batch


def judge_bias(
    judge: Scores, clinicians: Scores, clusters: Clusters | None = None, alpha: float = 0.05
) -> Estimate:
    """How much higher the judge scores than the clinicians, on average over the rated items.

    The quantity PPI++ corrects for, reported with its own interval so a reader sees whether the
    judge is lenient (positive) or harsh (negative) on this model, and by how much.
    """
    _alpha(alpha)
    data = _split(judge, clinicians, clusters, "the judge's bias")
    batch = mean_batch(data.f_lab - data.y, data.patients_lab)
    n = data.y.size
    return _estimate(
        "judge minus clinicians", batch, alpha, n_rated=n, n_judged=n, clusters=data.rated_patients, lam=False
    )


def ppi_difference(
    judge_a: Scores,
    judge_b: Scores,
    clin_a: Scores,
    clin_b: Scores,
    clusters: Clusters | None = None,
    alpha: float = 0.05,
    lam: float | None = None,
) -> tuple[Estimate, float]:
    """Model a minus model b at the clinician level (PPI++ on paired differences), with a p-value.

    Paired, because the clinician sampler rates every model's answer to a sampled item: an item's
    difficulty then cancels in ``Y_a - Y_b``, which makes the comparison much narrower than two
    separate intervals. Items judged for both models are used; those rated for both are the rated
    ones (an item rated for one model only counts as unrated here). Returns the estimate of
    ``mean(Y_a - Y_b)`` and the two-sided p-value of "no difference", from the same ``lam``,
    standard error and distribution as the interval (so p < alpha exactly when the interval
    excludes 0; a zero standard error gives p = 1 for a zero difference and 0 otherwise).
    ``lam`` as in :func:`ppi_mean`: None tunes the judge's weight on the differences.
    """
    judged = sorted(set(judge_a) & set(judge_b))
    rated = sorted(set(clin_a) & set(clin_b))
    diff_judge = {k: judge_a[k] - judge_b[k] for k in judged}
    diff_clin = {k: clin_a[k] - clin_b[k] for k in rated}
    estimate, batch = _ppi(diff_judge, diff_clin, clusters, alpha, lam)
    return estimate, float(batch.p_value()[0])


# --------------------------------------------------------------------------------------------
# Planning: how many clinician ratings


def ratings_needed(width: float, *, sd: float, rho: float, judged: int, alpha: float = 0.05) -> int:
    """How many clinician ratings give a ``1 - alpha`` PPI++ interval no wider than ``width``.

    With the best ``lam``, rating ``n`` of ``judged`` items gives variance
    ``sd**2 / n * (1 - rho**2 * (judged - n) / judged)``: the judge removes the share ``rho**2`` of
    the clinicians' variance on the unrated items. ``rho`` 0 (no judge, or one unrelated to the
    clinicians) is the clinicians-only count ``(2 z sd / width)**2``; a negative ``rho`` counts as 0,
    since ``lam`` is kept at or above 0. Take ``sd`` and ``rho`` from a pilot (:func:`pilot_figures`)
    or a stated assumption (``sd = sqrt(p (1 - p))`` for a proportion near ``p``). Independent
    items: with patients of ``m`` rated items each and intra-patient correlation ``icc``, multiply
    by the design effect ``1 + (m - 1) icc``. Assumes the best ``lam`` lies within [0, 1], true when
    the judge's scores spread at least ``rho`` times as much as the clinicians'.
    """
    z = _z(alpha)
    for value, name in ((width, "width"), (sd, "sd")):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise PPIError(f"{name} must be a positive number, got {value!r}")
    if isinstance(rho, bool) or not isinstance(rho, int | float) or not -1.0 <= rho <= 1.0:
        raise PPIError(f"rho must be a correlation between -1 and 1, got {rho!r}")
    if isinstance(judged, bool) or not isinstance(judged, int) or judged < 2:
        raise PPIError(f"judged must be a whole number of judged items, at least 2; got {judged!r}")
    share = max(rho, 0.0) ** 2
    target = (width / (2.0 * z * sd)) ** 2  # the largest allowed variance / sd**2
    # variance / sd**2 = (1 - share) / n + share / judged, which falls as n grows
    if target < 1.0 / judged:
        best = 2.0 * z * sd / math.sqrt(judged)
        raise PPIError(
            f"an interval {width:g} wide needs more ratings than the {judged} judged items: rating all of "
            f"them gives {best:.3g}; ask for a wider interval or judge more items"
        )
    if share == 1.0:
        return 2
    needed = (1.0 - share) / (target - share / judged)
    # Round up, but not past a float's noise (an exact answer must not become one more).
    return min(judged, max(2, math.ceil(needed - 1e-9)))


def pilot_figures(judge: Scores, clinicians: Scores) -> tuple[float, float]:
    """(sd of the clinicians' scores, judge-clinician correlation) over the rated items of a pilot.

    What :func:`ratings_needed` asks for. The sd uses n - 1 (a pilot is small); the correlation is
    0 when either side is constant (no evidence that the judge tracks the clinicians).
    """
    data = _split(judge, clinicians, None, "a pilot")
    sd = float(np.std(data.y, ddof=1))
    if np.ptp(data.y) == 0 or np.ptp(data.f_lab) == 0:
        return sd, 0.0
    return sd, float(np.corrcoef(data.y, data.f_lab)[0, 1])
