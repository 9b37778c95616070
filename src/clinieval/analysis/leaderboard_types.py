"""What a leaderboard is: the scores it is built from and the boards it gives, as plain data.

:mod:`clinieval.analysis.leaderboard` computes them; this module only holds their shapes and
their JSON (``leaderboard.json`` is :meth:`Leaderboard.to_json`), so a reader of the numbers can
find every field and what it means in one place, apart from how each is computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clinieval.analysis.leaderboard_calibrated import Calibration
from clinieval.analysis.leaderboard_ranks import FloatArray, JudgeStability, RankDistribution

AGGREGATION = (
    "Overall rank: the mean of each model's per-benchmark ranks (rank 1 = best on that benchmark, on the"
    " items every model answered there), over the benchmarks the model has; lower is better. Its rank"
    " interval comes from a joint bootstrap: every replicate redraws each benchmark's items"
    " independently, ranks the models on each benchmark and averages their ranks again."
)
CAVEATS = (
    "Ranks ignore how far apart the scores are: a win by 0.001 counts as much as a win by 0.5.",
    "Every benchmark weighs the same, however many items it has.",
    "A model missing a benchmark is ranked on fewer benchmarks than the others.",
)
PAIR_TEST = (
    "exact McNemar for right/wrong items, otherwise the sign-flip permutation test of the mean difference"
    " (exhaustive up to 2^20 arrangements, Monte Carlo beyond with its error stated), on the items both"
    " models answered; the CI of the difference is a paired bootstrap"
)


@dataclass(frozen=True, slots=True)
class BenchmarkScores:
    """One benchmark's per-item scores for every model (what ``SuitePart.headline`` reads back).

    ``scores``: model -> item id -> score (higher is better); ``clusters``: item id -> patient id
    (None: items are independent); ``judge_runs``: model -> one mapping item -> score per judge
    repeat; ``failed``: model -> items left out because the model call failed; ``scale``: the
    metric's range (low, high) when known, for figures.
    """

    name: str
    metric: str
    scores: Mapping[str, Mapping[str, float]]
    clusters: Mapping[str, str] | None = None
    judge_runs: Mapping[str, Sequence[Mapping[str, float]]] = field(default_factory=dict)
    failed: Mapping[str, int] = field(default_factory=dict)
    scale: tuple[float, float] | None = None
    margin: float | None = None
    """A clinical margin on the metric's scale: with it, each pair is also called practically
    equivalent, better by at least the margin, or neither (:func:`margin_call`)."""
    clinicians: Mapping[str, Mapping[str, float]] | None = None
    """Clinician ratings of a random sample of the judged answers (model -> item -> score): with
    them the board's numbers are the PPI++ estimates of the clinicians' mean
    (:mod:`clinieval.analysis.leaderboard_calibrated`), not the judge's."""
    clinician_kind: str = ""
    """What the clinicians judged: "correctness", "rating" or "ranking" (win share)."""
    lam: float | None = None
    """With ``clinicians``: the judge's weight, fixed (1 is plain PPI, 0 the clinicians alone);
    None tunes it per model to the narrowest interval (PPI++)."""


@dataclass(frozen=True, slots=True)
class ModelScore:
    """A model's mean over the items it answered, its CI, how many items and clusters, how many failed."""

    model: str
    mean: float
    ci: tuple[float, float]
    n: int
    failed: int
    clusters: int | None
    estimator: str = "mean"
    """What ``mean`` is: the plain mean of the scores, or "PPI++" (calibrated by clinicians)."""
    rated: int = 0
    """Clinician ratings behind a calibrated ``mean``."""

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mean": self.mean,
            "ci": list(self.ci),
            "n": self.n,
            "failed": self.failed,
            "clusters": self.clusters,
            "estimator": self.estimator,
            "rated": self.rated,
        }


@dataclass(frozen=True, slots=True)
class PairDifference:
    """``a`` minus ``b`` on the ``n`` items both answered: mean, CI, p-value, Holm-adjusted p-value."""

    a: str
    b: str
    n: int
    mean_difference: float
    ci: tuple[float, float]
    pvalue: float
    pvalue_holm: float
    significant: bool
    test: str = ""
    """How ``pvalue`` was obtained (:class:`~clinieval.analysis.exact_pairs.PairTest`)."""
    exhaustive: bool = True
    mc_error: float | None = None
    smallest_p: float = 0.0
    """The smallest p-value the test could give on these items: above alpha, no pair can differ."""
    margin_ci: tuple[float, float] | None = None
    """The (1 - 2 alpha) paired bootstrap CI of A - B that the margin's one-sided tests read."""
    margin_call: str | None = None
    """With a margin: "equivalent", "a better", "b better" (by at least the margin) or "neither"."""

    def as_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "n": self.n,
            "mean_difference": self.mean_difference,
            "ci": list(self.ci),
            "p": self.pvalue,
            "p_holm": self.pvalue_holm,
            "significant": self.significant,
            "test": self.test,
            "exhaustive": self.exhaustive,
            "p_monte_carlo_error": self.mc_error,
            "smallest_possible_p": self.smallest_p,
            "margin_ci": None if self.margin_ci is None else list(self.margin_ci),
            "margin_call": self.margin_call,
        }


@dataclass(frozen=True, slots=True)
class BenchmarkBoard:
    """One benchmark's board; ``models`` and ``scores`` in leaderboard order (observed rank, then mean)."""

    name: str
    metric: str
    models: tuple[str, ...]
    scores: tuple[ModelScore, ...]
    pairs: tuple[PairDifference, ...]
    ranks: tuple[RankDistribution, ...]
    rank_items: int
    rank_clusters: int | None
    judge: JudgeStability | None
    verdict: str
    scale: tuple[float, float] | None
    ci_method: str
    digits: int
    replicates: FloatArray = field(repr=False, compare=False)
    warnings: tuple[str, ...] = ()
    """Too few items or patients, degenerate intervals (:func:`_warnings`)."""
    margin: float | None = None
    calibration: Calibration | None = None
    """The judge-only, clinicians-only, calibrated and bias estimates, where clinicians rated."""

    @property
    def clustered(self) -> bool:
        return self.rank_clusters is not None

    def score(self, model: str) -> ModelScore:
        return next(s for s in self.scores if s.model == model)

    def rank(self, model: str) -> RankDistribution:
        return next(r for r in self.ranks if r.model == model)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "models": list(self.models),
            "clustered": self.clustered,
            "ci_method": self.ci_method,
            "pair_test": (PAIR_TEST if self.calibration is None else self.calibration.method.pair_test)
            + (", patients exchanged whole" if self.clustered else ""),
            "scale": list(self.scale) if self.scale else None,
            "digits": self.digits,
            "scores": [s.as_json() for s in self.scores],
            "pairs": [p.as_json() for p in self.pairs],
            "rank_items": self.rank_items,
            "rank_clusters": self.rank_clusters,
            "ranks": [r.as_json() for r in self.ranks],
            "judge": self.judge.as_json() if self.judge else None,
            "verdict": self.verdict,
            "warnings": list(self.warnings),
            "margin": self.margin,
            "calibration": None if self.calibration is None else self.calibration.as_json(),
        }


@dataclass(frozen=True, slots=True)
class OverallRank:
    """A model's mean rank over its benchmarks (``ranks``: benchmark -> rank) and where that puts it."""

    model: str
    mean_rank: float
    ranks: Mapping[str, float]
    position: RankDistribution

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "mean_rank": self.mean_rank, "ranks": dict(self.ranks)} | {
            k: v for k, v in self.position.as_json().items() if k != "model"
        }


@dataclass(frozen=True, slots=True)
class Leaderboard:
    """Every benchmark's board, the overall ranking and the settings that produced them."""

    benchmarks: tuple[BenchmarkBoard, ...]
    overall: tuple[OverallRank, ...]
    win_rates: tuple[tuple[float | None, ...], ...]
    win_counts: tuple[tuple[int, ...], ...]
    level: float
    resamples: int
    seed: int

    @property
    def alpha(self) -> float:
        return round(1.0 - self.level, 12)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(o.model for o in self.overall)

    def to_json(self) -> dict[str, Any]:
        """leaderboard.json: every number the page shows, in plain JSON types."""
        return {
            "level": self.level,
            "alpha": self.alpha,
            "resamples": self.resamples,
            "seed": self.seed,
            "rank_ties": "average",
            "multiple_comparisons": "holm",
            "benchmarks": [b.as_json() for b in self.benchmarks],
            "overall": {
                "aggregation": AGGREGATION,
                "caveats": list(CAVEATS),
                "models": [o.as_json() for o in self.overall],
                "win_rates": {
                    "models": list(self.models),
                    "rates": [list(r) for r in self.win_rates],
                    "battles": [list(r) for r in self.win_counts],
                },
            },
        }
