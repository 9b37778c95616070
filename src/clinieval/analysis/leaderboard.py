"""The leaderboard's statistics: which model is best on each benchmark and overall, and how sure.

A hospital team choosing a model asks one question of many benchmarks at once; a bare table of
means answers it with false confidence. So every number here comes with its uncertainty:

- each model's mean with a 95% bootstrap CI, resampling patients whole where items share patients
  (:func:`~clinieval.analysis.uncertainty.cluster_bootstrap_ci`), items otherwise; items whose
  model call failed are not scores (the caller leaves them out and counts them in ``failed``);
- every pair of models compared on the items both answered by an exact test where one is feasible
  (:mod:`clinieval.analysis.exact_pairs`: exact McNemar for right/wrong items, the sign-flip
  permutation test over items or patients otherwise, exhaustive up to 2^20 arrangements), with a
  paired bootstrap CI of the difference (by patient where clustered) and Holm's adjustment over
  the benchmark's pairs, so "A beats B" is claimed only where the family-wise error rate is
  controlled at every n (a bootstrap p-value was too small at small n: 0.033 where exact McNemar
  gives 0.125);
- rank intervals never narrower than those tests allow (:func:`_rank_bounds`), and a warning on
  every benchmark below :data:`MIN_ITEMS` items or :data:`MIN_CLUSTERS` patients, and on every
  degenerate (zero-width) interval;
- rank intervals (:mod:`clinieval.analysis.leaderboard_ranks`): how often each model holds each
  rank when the items are drawn again;
- where a judge scores the answers, how the ranking moves between judge repeats (EHRNoteQA's rank
  instability);
- one plain-words line per benchmark that says only what the Holm-controlled tests support;
- an overall ranking: the mean of each model's per-benchmark ranks, with its own rank intervals
  from a joint bootstrap (each benchmark's items redrawn independently in every replicate).

Pure statistics: no I/O. :mod:`clinieval.suite.leaderboard` renders the result.
"""

from __future__ import annotations

import math
import numbers
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

import numpy as np

from clinieval.analysis._validation import level as check_level
from clinieval.analysis._validation import positive_int
from clinieval.analysis.exact_pairs import PairTest, exact_pair_test
from clinieval.analysis.leaderboard_ranks import (
    FloatArray,
    JudgeStability,
    RankDistribution,
    bootstrap_ranks,
    judge_stability,
    rank_distribution,
    rank_rows,
)
from clinieval.analysis.leaderboard_words import margin_words, verdict
from clinieval.analysis.uncertainty import (
    PairedBootstrap,
    bootstrap_ci,
    cluster_bootstrap_ci,
    holm,
    minimum_detectable_difference,
    paired_bootstrap,
)
from clinieval.errors import UserError

__all__ = [
    "AGGREGATION",
    "CAVEATS",
    "BenchmarkBoard",
    "BenchmarkScores",
    "Leaderboard",
    "ModelScore",
    "OverallRank",
    "PairDifference",
    "build_leaderboard",
    "rank_seed",
]

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
MIN_ITEMS = 30
"""Fewer items than this on a benchmark (independent items) draws a warning on its block."""
MIN_CLUSTERS = 10
"""Fewer patients than this on a clustered benchmark draws a warning on its block."""


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


@dataclass(frozen=True, slots=True)
class ModelScore:
    """A model's mean over the items it answered, its CI, how many items and clusters, how many failed."""

    model: str
    mean: float
    ci: tuple[float, float]
    n: int
    failed: int
    clusters: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mean": self.mean,
            "ci": list(self.ci),
            "n": self.n,
            "failed": self.failed,
            "clusters": self.clusters,
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
            "pair_test": PAIR_TEST + (", patients exchanged whole" if self.clustered else ""),
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


# --- inputs -------------------------------------------------------------------------------------


def _check_scores(b: BenchmarkScores) -> None:
    where = f"benchmark {b.name!r}"
    if b.margin is not None and not (isinstance(b.margin, numbers.Real) and 0 < b.margin < math.inf):
        raise UserError(f"{where}: margin must be a number above 0 on the metric's scale, got {b.margin!r}")
    if not b.scores:
        raise UserError(f"{where}: no model has scores; a benchmark on the board needs at least one model")
    for model, items in b.scores.items():
        if not items:
            raise UserError(
                f"{where}: model {model!r} has no scored item ({b.failed.get(model, 0)} failed); rerun its"
                " failed items or leave the model out of this benchmark"
            )
        bad = [i for i, v in items.items() if not (isinstance(v, numbers.Real) and math.isfinite(v))]
        if bad:
            raise UserError(
                f"{where}: model {model!r} has a score that is not a finite number on item {bad[0]!r}"
            )
        if b.clusters is not None:
            lost = [i for i in items if i not in b.clusters]
            if lost:
                raise UserError(f"{where}: item {lost[0]!r} has no patient in clusters; give every item one")
    gone = [m for m in b.failed if m not in b.scores]
    if gone:
        raise UserError(
            f"{where}: model {gone[0]!r} has no scored item ({b.failed[gone[0]]} failed); rerun its failed"
            " items or leave the model out of this benchmark"
        )
    for model, n in b.failed.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise UserError(f"{where}: failed count of {model!r} must be a whole number >= 0, got {n!r}")


def rank_seed(seed: int, benchmark: str) -> list[int]:
    """The seed of one benchmark's rank replicates: the board's seed and a hash of the benchmark's name,
    so benchmarks are redrawn independently and adding one to a suite changes no other's intervals."""
    return [seed, zlib.crc32(benchmark.encode("utf-8"))]


# --- one benchmark -------------------------------------------------------------------------------


def _digits(b: BenchmarkScores) -> int:
    """Decimals the page shows for this benchmark's scores: 3 on a 0-1 scale, 1 on a 0-100 one."""
    if b.scale is not None:
        span = abs(b.scale[1] - b.scale[0])
    else:
        span = max(max(abs(float(v)) for v in items.values()) for items in b.scores.values())
    return 3 if span <= 2 else 1 if span <= 200 else 0


def _headline(b: BenchmarkScores, model: str, level: float, resamples: int, seed: int) -> ModelScore:
    items = list(b.scores[model])
    values = [float(b.scores[model][i]) for i in items]
    where = f"benchmark {b.name!r}, model {model!r}"
    if b.clusters is None:
        ci = bootstrap_ci(values, level=level, resamples=resamples, seed=seed)
        groups = None
    else:
        labels = [b.clusters[i] for i in items]
        groups = len(set(labels))
        if groups < 2:
            raise UserError(
                f"{where}: its {len(items)} scored item(s) come from 1 patient; a CI clustered by patient"
                " needs items from at least 2 (evaluate more items: raise the limit)"
            )
        ci = cluster_bootstrap_ci(values, labels, level=level, resamples=resamples, seed=seed)
    return ModelScore(model, float(np.mean(values)), ci, len(values), int(b.failed.get(model, 0)), groups)


@dataclass(frozen=True, slots=True)
class _Paired:
    """One pair's statistics on the items both models answered, computed once from one paired
    table: the CI's bootstrap, the exact test, and (with a margin) the 1 - 2 alpha bootstrap CI."""

    interval: PairedBootstrap
    test: PairTest
    n: int
    enough: bool
    """Enough items (patients) for the page's minimum: what a margin's "equivalent" needs."""
    margin_ci: tuple[float, float] | None


def _pair(b: BenchmarkScores, x: str, y: str, level: float, resamples: int, seed: int) -> _Paired:
    common = [i for i in b.scores[x] if i in b.scores[y]]
    where = f"benchmark {b.name!r}: {x!r} vs {y!r}"
    if len(common) < 2:
        raise UserError(
            f"{where}: {len(common)} item(s) answered by both; a paired comparison needs 2 (raise the limit)"
        )
    labels = None if b.clusters is None else [b.clusters[i] for i in common]
    if labels is not None and len(set(labels)) < 2:
        raise UserError(
            f"{where}: the items both answered come from 1 patient; a clustered test needs 2 (raise limit)"
        )
    xs, ys = [float(b.scores[x][i]) for i in common], [float(b.scores[y][i]) for i in common]
    interval = paired_bootstrap(xs, ys, level=level, resamples=resamples, seed=seed, clusters=labels)
    margin_ci = None
    if b.margin is not None:
        two_sided = 1.0 - 2.0 * (1.0 - level)
        boot = paired_bootstrap(xs, ys, level=two_sided, resamples=resamples, seed=seed, clusters=labels)
        margin_ci = (boot.ci_low, boot.ci_high)
    enough = len(common) >= MIN_ITEMS if labels is None else len(set(labels)) >= MIN_CLUSTERS
    test = exact_pair_test(xs, ys, clusters=labels, seed=seed)
    return _Paired(interval, test, len(common), enough, margin_ci)


def _pairs(
    b: BenchmarkScores, models: Sequence[str], level: float, resamples: int, seed: int
) -> tuple[PairDifference, ...]:
    raw = [(x, y, _pair(b, x, y, level, resamples, seed)) for x, y in combinations(models, 2)]
    adjusted = holm([d.test.pvalue for _, _, d in raw])
    alpha = 1.0 - level
    out = []
    for (x, y, d), p in zip(raw, adjusted, strict=True):
        significant = p <= alpha + 1e-12
        call = None
        if b.margin is not None and d.margin_ci is not None:
            call = margin_call(d.margin_ci, b.margin, significant=significant, enough=d.enough)
        out.append(
            PairDifference(
                a=x,
                b=y,
                n=d.n,
                mean_difference=d.interval.mean_difference,
                ci=(d.interval.ci_low, d.interval.ci_high),
                pvalue=d.test.pvalue,
                pvalue_holm=p,
                significant=significant,
                test=d.test.method,
                exhaustive=d.test.exhaustive,
                mc_error=d.test.mc_error,
                smallest_p=d.test.smallest,
                margin_ci=d.margin_ci,
                margin_call=call,
            )
        )
    return tuple(out)


def margin_call(ci: tuple[float, float], margin: float, *, significant: bool, enough: bool) -> str:
    """What a committee asks of two models, from the (1 - 2 alpha) CI of A - B: "equivalent" when
    it lies inside (-margin, margin) (two one-sided tests at alpha, Schuirmann 1987), "a better" or
    "b better" when it lies wholly beyond the margin on one side (A - B > margin, one-sided at
    alpha), else "neither" (the data cannot say).

    The bootstrap CI is too narrow on few items, so a margin claim also needs what an exact test
    or the data's size supports: "better" only where the exact, Holm-adjusted pair test is
    ``significant`` too, "equivalent" only with ``enough`` items (patients) for the page's minimum."""
    low, high = ci
    if -margin < low and high < margin and enough:
        return "equivalent"
    if low > margin and significant:
        return "a better"
    if high < -margin and significant:
        return "b better"
    return "neither"


def _rank_bounds(
    models: Sequence[str], ranks: Sequence[RankDistribution], pairs: Sequence[PairDifference]
) -> list[RankDistribution]:
    """Rank intervals widened to what the pair tests allow: a model can rank no better than 1 +
    the models significantly ahead of it, and no worse than k - the models it is significantly
    ahead of. A bootstrap interval narrower than that (rank 1 for sure, though no test separates
    the model from the runner-up) claims an order the tests do not support."""
    k = len(models)
    ahead = {m: 0 for m in models}
    behind = {m: 0 for m in models}
    for p in pairs:
        if p.significant and p.mean_difference != 0:
            winner, loser = (p.a, p.b) if p.mean_difference > 0 else (p.b, p.a)
            behind[winner] += 1
            ahead[loser] += 1
    out = []
    for r in ranks:
        low, high = min(r.interval[0], 1.0 + ahead[r.model]), max(r.interval[1], float(k - behind[r.model]))
        out.append(replace(r, interval=(low, high), widened=(low, high) != r.interval))
    return out


def _warnings(b: BenchmarkScores, scores: Sequence[ModelScore], pairs: Sequence[PairDifference]) -> list[str]:
    """Plain words for what a reader must not miss: too few items or patients to tell models apart
    (with the smallest p-value a test could reach and the smallest difference the cell could
    detect), and intervals of zero width."""
    out: list[str] = []
    n = min(s.n for s in scores)
    clusters = None if b.clusters is None else min(s.clusters or 0 for s in scores)
    if (n < MIN_ITEMS) if clusters is None else (clusters < MIN_CLUSTERS):
        unit = f"{clusters} patients" if clusters is not None else f"{n} items"
        minimum = f"{MIN_CLUSTERS} patients" if clusters is not None else f"{MIN_ITEMS} items"
        line = f"Only {unit} (fewer than the {minimum} this page asks for before trusting an order)"
        if pairs:
            best = min(p.smallest_p for p in pairs)
            line += f"; the smallest p-value any pair test could reach here is {best:.3g}"
        mdd = _detectable(b, scores)
        if mdd is not None:
            line += f"; the smallest difference this cell could detect (80% power, alpha 0.05) is about {mdd}"
        out.append(line + ".")
    for s in scores:
        if s.ci[0] == s.ci[1]:
            out.append(
                f"{s.model}'s interval [{s.ci[0]:g}, {s.ci[1]:g}] has zero width: every score is the same,"
                " so resampling cannot move the mean; it says nothing about how sure the mean is."
            )
    return out


def _detectable(b: BenchmarkScores, scores: Sequence[ModelScore]) -> str | None:
    """The minimum detectable difference of a paired comparison at the cell's n, from the pooled
    spread of the scores (sigma_d = sqrt(2) * sd, the spread of a difference of independent
    scores); None where the scores do not vary."""
    values = [float(v) for m in b.scores.values() for v in m.values()]
    n = min(s.clusters or s.n for s in scores)
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    if sd == 0.0 or n < 2:
        return None
    return f"{minimum_detectable_difference(math.sqrt(2.0) * sd, n):.3g}"


def _common_table(b: BenchmarkScores, models: Sequence[str]) -> tuple[list[str], FloatArray]:
    first = b.scores[models[0]]
    common = [i for i in first if all(i in b.scores[m] for m in models[1:])]
    if not common:
        raise UserError(
            f"benchmark {b.name!r}: no item was answered by every model; ranks need items all models share"
        )
    return common, np.array([[b.scores[m][i] for m in models] for i in common], dtype=np.float64)


def _benchmark(b: BenchmarkScores, level: float, resamples: int, seed: int) -> BenchmarkBoard:
    _check_scores(b)
    given = list(b.scores)
    headline = {m: _headline(b, m, level, resamples, seed) for m in given}
    common, table = _common_table(b, given)
    labels = None if b.clusters is None else [b.clusters[i] for i in common]
    where = f"benchmark {b.name!r}"
    reps = bootstrap_ranks(table, labels, resamples=resamples, seed=rank_seed(seed, b.name), where=where)
    observed = rank_rows(table.mean(axis=0)[None, :])[0]
    order = sorted(range(len(given)), key=lambda j: (observed[j], -headline[given[j]].mean, j))
    models = [given[j] for j in order]
    reps, observed = reps[:, order], observed[order]
    pairs = _pairs(b, models, level, resamples, seed)
    ranks = _rank_bounds(models, rank_distribution(models, list(observed), reps, level=level), pairs)
    scores = tuple(headline[m] for m in models)
    digits = _digits(b)
    return BenchmarkBoard(
        name=b.name,
        metric=b.metric,
        models=tuple(models),
        scores=scores,
        pairs=pairs,
        ranks=tuple(ranks),
        rank_items=len(common),
        rank_clusters=None if labels is None else len(set(labels)),
        judge=judge_stability(b.judge_runs, models, where=where),
        verdict=verdict(models, pairs, level, digits) + margin_words(pairs, b.margin, digits),
        scale=b.scale,
        ci_method="bootstrap over patients (a patient's items together)"
        if b.clusters is not None
        else "bootstrap over items",
        digits=digits,
        replicates=reps,
        warnings=tuple(_warnings(b, scores, pairs)),
        margin=b.margin,
    )


# --- overall -------------------------------------------------------------------------------------


def _overall(boards: Sequence[BenchmarkBoard], level: float, resamples: int) -> tuple[OverallRank, ...]:
    models = list(dict.fromkeys(m for b in boards for m in b.models))
    point = np.zeros(len(models))
    joint = np.zeros((resamples, len(models)))
    per_model: list[dict[str, float]] = []
    for j, m in enumerate(models):
        own = [(b, b.models.index(m)) for b in boards if m in b.models]
        per_model.append({b.name: b.ranks[k].rank for b, k in own})
        point[j] = np.mean([b.ranks[k].rank for b, k in own])
        joint[:, j] = np.mean([b.replicates[:, k] for b, k in own], axis=0)
    observed = rank_rows(point[None, :], higher_is_better=False)[0]
    positions = rank_rows(joint, higher_is_better=False)
    order = sorted(range(len(models)), key=lambda j: (observed[j], point[j], j))
    dist = rank_distribution(
        [models[j] for j in order], list(observed[order]), positions[:, order], level=level
    )
    return tuple(
        OverallRank(models[j], float(point[j]), per_model[j], d) for j, d in zip(order, dist, strict=True)
    )


def _win_rates(
    boards: Sequence[BenchmarkBoard], models: Sequence[str]
) -> tuple[tuple[tuple[float | None, ...], ...], tuple[tuple[int, ...], ...]]:
    """Share of shared benchmarks where the row's mean beats the column's on the items both answered
    (a tie counts one half), and how many benchmarks the two share."""
    k = len(models)
    wins = np.zeros((k, k))
    shared = np.zeros((k, k), dtype=np.int64)
    index = {m: j for j, m in enumerate(models)}
    for b in boards:
        for p in b.pairs:
            i, j = index[p.a], index[p.b]
            d = round(p.mean_difference, 12)
            wins[i, j] += 1.0 if d > 0 else 0.5 if d == 0 else 0.0
            wins[j, i] += 1.0 if d < 0 else 0.5 if d == 0 else 0.0
            shared[i, j] += 1
            shared[j, i] += 1
    rates = tuple(
        tuple(None if i == j or shared[i, j] == 0 else float(wins[i, j] / shared[i, j]) for j in range(k))
        for i in range(k)
    )
    return rates, tuple(tuple(int(v) for v in row) for row in shared)


def build_leaderboard(
    benchmarks: Sequence[BenchmarkScores], *, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Leaderboard:
    """Every benchmark's board and the overall ranking (see the module docstring).

    Seeded and deterministic: the same scores and seed give the same board on every machine. Bad
    input (no benchmark, a duplicate name, a model without a scored item, clusters with one patient)
    is one UserError naming the benchmark and model."""
    lvl = check_level(level)
    reps = positive_int(resamples, "resamples")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UserError(f"seed must be an integer, got {seed!r}")
    if not benchmarks:
        raise UserError("no benchmark scores given; a leaderboard needs at least one benchmark")
    names = [b.name for b in benchmarks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"benchmark name(s) {dup} given twice; each benchmark appears once on a leaderboard")
    boards = tuple(_benchmark(b, lvl, reps, seed) for b in benchmarks)
    overall = _overall(boards, lvl, reps)
    rates, counts = _win_rates(boards, [o.model for o in overall])
    return Leaderboard(boards, overall, rates, counts, lvl, reps, seed)
