"""A benchmark's leaderboard numbers calibrated by clinician ratings (prediction-powered inference).

Where clinicians rated a random sample of a judged benchmark's answers
(``clinieval suite sample``), each model's number on the board is no longer the judge's mean but
the PPI++ estimate of the clinicians' mean (:func:`clinieval.analysis.ppi.ppi_mean`): every judge
score and the clinicians' sample together, unbiased whatever the judge's bias, with a valid 95%
interval. A judge's bias is not a constant (a judge that favours its own family or longer answers
moves some models and not others), so a ranking by the judge alone can be wrong with tight
intervals; this is the correction. Everything the board derives follows the same estimates:

- the pairs: :func:`~clinieval.analysis.ppi.ppi_difference` on the items both models answered
  (the sampler rates every model's answer to a sampled item, so the design is paired), with a
  normal-approximation p-value that Holm's adjustment then controls over the benchmark's pairs;
- the rank intervals: a bootstrap of the same estimator, rated and unrated units redrawn apart
  (patients whole where items share patients), each model with its own fitted weight ``lam``;
- beside them, per model: the judge-only mean, the clinicians-only mean, the judge's bias
  against the clinicians, each with its interval; and per benchmark the judge-clinician agreement.

Pure statistics, no I/O, no import of :mod:`clinieval.analysis.leaderboard` (which calls this).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.analysis.agreement import cohen_kappa, pearson
from clinieval.analysis.leaderboard_ranks import FloatArray, rank_rows, resampled_means
from clinieval.analysis.ppi import Estimate, clinicians_only, judge_bias, judge_only, ppi_difference, ppi_mean
from clinieval.analysis.uncertainty import cluster_index

Scores = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Method:
    """How a calibrated board's numbers were made, in its own words: the estimator's name, how its
    intervals were made and how its pairs were tested."""

    estimator: str
    ci_method: str
    pair_test: str


def method(lam: float | None) -> Method:
    """PPI++ when the judge's weight is tuned on the data; plain PPI with the weight the user fixed."""
    if lam is None:
        return Method(
            "PPI++",
            "PPI++: every judge score and the clinicians' ratings together (prediction-powered inference,"
            " power-tuned), a normal interval",
            "PPI++ on the paired differences of the items both models answered, normal approximation",
        )
    return Method(
        "PPI",
        f"PPI: every judge score and the clinicians' ratings together, the judge's weight fixed at {lam:g},"
        " a normal interval",
        f"PPI (the judge's weight {lam:g}) on the paired differences of the items both models answered,"
        " normal approximation",
    )


MIN_RATED = 30
"""Fewer rated items than this (or :data:`MIN_RATED_PATIENTS` patients) draws a warning: the
normal interval rests on the clinicians' sample, and a small one makes it approximate."""
MIN_RATED_PATIENTS = 10


@dataclass(frozen=True, slots=True)
class ModelCalibration:
    """One model's four numbers on a calibrated benchmark."""

    model: str
    judge: Estimate
    clinicians: Estimate
    calibrated: Estimate
    bias: Estimate

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "judge_only": _estimate_json(self.judge),
            "clinicians_only": _estimate_json(self.clinicians),
            "calibrated": _estimate_json(self.calibrated),
            "judge_bias": _estimate_json(self.bias),
        }


@dataclass(frozen=True, slots=True)
class Calibration:
    """What calibrated a benchmark: the kind of clinician judgement, the models' numbers, and how
    far the judge agreed with the clinicians on the rated answers."""

    kind: str
    models: tuple[ModelCalibration, ...]
    agreement: Mapping[str, float | int | None]
    lam: float | None = None
    """The judge's weight when the user fixed it (``suite report --lam``); None: tuned per model."""

    def model(self, name: str) -> ModelCalibration:
        return next(m for m in self.models if m.model == name)

    @property
    def method(self) -> Method:
        return method(self.lam)

    @property
    def rated(self) -> int:
        """Clinician ratings behind the board (every model's, summed)."""
        return sum(m.calibrated.n_rated for m in self.models)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "estimator": self.method.estimator,
            "lam": self.lam,
            "rated": self.rated,
            "models": [m.as_json() for m in self.models],
            "agreement": dict(self.agreement),
        }


def _estimate_json(e: Estimate) -> dict[str, Any]:
    return {
        "estimator": e.estimator,
        "value": e.value,
        "ci": [e.low, e.high],
        "se": e.se,
        "n_rated": e.n_rated,
        "n_judged": e.n_judged,
        "clusters": e.clusters,
        "lam": e.lam,
    }


def calibrate(
    judge: Mapping[str, Scores],
    clinicians: Mapping[str, Scores],
    clusters: Mapping[str, str] | None,
    *,
    kind: str,
    level: float,
    lam: float | None = None,
) -> Calibration:
    """Each model's judge-only, clinicians-only, PPI++ and bias estimates at ``level``, and the
    judge-clinician agreement over every rated answer. Ratings of items the judge did not score
    (the answer failed, the judge gave no verdict) cannot be paired with a judge score and are
    left out here, as the judge's own failures are left out of its mean. ``lam`` fixes the judge's
    weight (1: plain PPI) instead of tuning it per model."""
    alpha = 1.0 - level
    out = []
    for model, f in judge.items():
        y = {i: v for i, v in clinicians.get(model, {}).items() if i in f}
        out.append(
            ModelCalibration(
                model,
                judge_only(f, clusters, alpha),
                clinicians_only(y, clusters, alpha),
                ppi_mean(f, y, clusters, alpha, lam),
                judge_bias(f, y, clusters, alpha),
            )
        )
    return Calibration(kind, tuple(out), agreement(judge, clinicians), lam)


def agreement(judge: Mapping[str, Scores], clinicians: Mapping[str, Scores]) -> dict[str, float | int | None]:
    """Judge against clinicians on every rated answer of every model: the share of answers where
    they agree and Cohen's kappa when both are right/wrong verdicts, else Pearson's r."""
    pairs = [(f[i], y) for m, f in judge.items() for i, y in clinicians.get(m, {}).items() if i in f]
    if not pairs:
        return {"answers": 0}
    fs = np.array([p[0] for p in pairs], dtype=np.float64)
    ys = np.array([p[1] for p in pairs], dtype=np.float64)
    binary = bool(np.isin(fs, (0.0, 1.0)).all() and np.isin(ys, (0.0, 1.0)).all())
    if binary:
        try:
            kappa: float | None = cohen_kappa(fs.tolist(), ys.tolist())
        except UndefinedStatisticError:  # one verdict throughout on both sides
            kappa = None
        return {"answers": len(pairs), "agreement": float(np.mean(fs == ys)), "kappa": kappa}
    varies = len(pairs) >= 3 and fs.std() > 0 and ys.std() > 0
    return {"answers": len(pairs), "pearson_r": pearson(fs, ys).statistic if varies else None}


def paired(
    judge_x: Scores,
    judge_y: Scores,
    clin_x: Scores,
    clin_y: Scores,
    clusters: Mapping[str, str] | None,
    *,
    level: float,
    margin: bool,
    lam: float | None = None,
) -> tuple[Estimate, float, tuple[float, float] | None]:
    """X minus Y by PPI++ on the paired differences: the estimate, its two-sided p-value and,
    when a margin is asked for, the ``1 - 2 alpha`` interval its one-sided tests read."""
    alpha = 1.0 - level
    diff, p = ppi_difference(judge_x, judge_y, clin_x, clin_y, clusters, alpha, lam)
    wide = None
    if margin:
        two, _ = ppi_difference(judge_x, judge_y, clin_x, clin_y, clusters, 2.0 * alpha, lam)
        wide = (two.low, two.high)
    return diff, p, wide


def rank_replicates(
    judge: Mapping[str, Scores],
    clinicians: Mapping[str, Scores],
    clusters: Mapping[str, str] | None,
    models: Sequence[str],
    lams: Sequence[float],
    *,
    resamples: int,
    seed: Sequence[int],
) -> tuple[FloatArray, FloatArray]:
    """Every model's PPI++ estimate and its rank in each of ``resamples`` bootstrap replicates.

    The units are the items every model's judge scored (patients whole where clustered), split
    into those every model's answer was rated on and the rest; each replicate redraws the two
    sets apart (the design drew them apart) and recomputes ``lam_m * mean_unrated(f_m) +
    mean_rated(y_m - lam_m f_m)`` per model with the weight fitted on the data. Returns (observed
    estimates, ranks per replicate)."""
    common = [i for i in judge[models[0]] if all(i in judge[m] for m in models[1:])]
    rated = [i for i in common if all(i in clinicians.get(m, {}) for m in models)]
    taken = set(rated)
    rest = [i for i in common if i not in taken]
    lam = np.asarray(lams, dtype=np.float64)
    f_rest, f_rated = _table(judge, models, rest), _table(judge, models, rated)
    y_rated = _table(clinicians, models, rated)
    residual = y_rated - lam * f_rated
    rng = np.random.default_rng(list(seed))
    rest_mean = _set_means(f_rest, _units(rest, clusters), resamples, rng)
    rated_mean = _set_means(residual, _units(rated, clusters), resamples, rng)
    observed = (lam * f_rest.mean(axis=0) if len(rest) else 0.0) + residual.mean(axis=0)
    estimates = (lam * rest_mean if len(rest) else 0.0) + rated_mean
    return np.asarray(observed, dtype=np.float64), rank_rows(estimates)


def _table(scores: Mapping[str, Scores], models: Sequence[str], items: Sequence[str]) -> FloatArray:
    """Items x models of ``scores`` (0 rows for no items)."""
    return np.array([[scores[m][i] for m in models] for i in items], dtype=np.float64).reshape(
        len(items), len(models)
    )


def _units(items: Sequence[str], clusters: Mapping[str, str] | None) -> tuple[NDArray[np.int64], int]:
    """Each item's resampling unit (its patient where items share patients, else itself) as a
    code 0..g-1, and g."""
    if clusters is None:
        return np.arange(len(items), dtype=np.int64), len(items)
    return cluster_index([clusters[i] for i in items])


def _set_means(
    values: FloatArray, units: tuple[NDArray[np.int64], int], resamples: int, rng: np.random.Generator
) -> FloatArray:
    """:func:`resampled_means` over ``values``; zeros for an empty set (every item rated)."""
    if len(values) == 0:
        return np.zeros((resamples, values.shape[1]))
    return resampled_means(values, *units, resamples, rng)


def warnings(cal: Calibration) -> list[str]:
    """Plain words where the clinicians' sample is too small for the normal interval to be trusted,
    or where a model has no rating the judge could be checked against."""
    out = []
    for m in cal.models:
        rated, patients = m.calibrated.n_rated, m.calibrated.clusters
        small = rated < MIN_RATED if patients is None else patients < MIN_RATED_PATIENTS
        if small:
            unit = f"{patients} rated patients" if patients is not None else f"{rated} rated items"
            least = f"{MIN_RATED_PATIENTS} patients" if patients is not None else f"{MIN_RATED} items"
            out.append(
                f"{m.model}: its calibrated interval rests on {unit} (fewer than {least}): the normal"
                " approximation behind it is rough; rate more of the sample"
            )
    return out
