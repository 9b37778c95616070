"""Rank intervals: how often each model holds each rank when the items are drawn again.

A leaderboard's order rests on a finite set of items; drawn again, the same models might swap
places. The bootstrap here answers "how sure is this order?" the way MedHELM's single ranks cannot:
each replicate resamples the items (a patient's items together, when items share patients) once
for all models, so every model is scored on the same draw, and ranks the models by their mean on
it. Only items every model answered take part, so a model is never ranked on easier items than
another.

Conventions, shared with :mod:`clinieval.analysis.leaderboard`:

- rank 1 is the best (highest mean); means equal to 12 decimal places are a tie, and tied models
  share the average of the ranks they span (1.5, 1.5 for two models tied at the top), as
  :func:`clinieval.analysis.rankings.rank_scores` does by default;
- P(rank = r) splits a tie evenly: two models tied over ranks 1 and 2 each count one half towards
  rank 1 and one half towards rank 2, so every model's probabilities and every rank's probabilities
  sum to 1;
- the median rank is the median of a model's per-replicate ranks, and its rank interval the
  (1 - level)/2 and (1 + level)/2 quantiles of them, taken as ranks that occurred (numpy's
  ``inverted_cdf``), never interpolated between ranks.

Replicates are drawn from ``numpy.random.default_rng(seed)`` in the same stream as
:func:`clinieval.analysis.uncertainty.cluster_bootstrap_ci`: replicate after replicate, each one
``integers(0, g)`` for each of the g clusters (items, when not clustered).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis.rank_agreement import rank_instability
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.uncertainty import cluster_index, resample_blocks
from clinieval.errors import UserError

__all__ = [
    "JudgeStability",
    "RankDistribution",
    "bootstrap_ranks",
    "judge_stability",
    "rank_distribution",
    "rank_rows",
]

FloatArray = NDArray[np.float64]
Seed = int | Sequence[int]
DECIMALS = 12
"""Means are rounded to this many decimals before ranking, so summation order cannot break a tie."""
_BLOCK = 1 << 20


def rank_rows(values: FloatArray, *, higher_is_better: bool = True) -> FloatArray:
    """Average ranks within each row of ``values`` (replicates x models), 1 = best."""
    from scipy.stats import rankdata

    keyed = np.round(values, DECIMALS)
    return np.asarray(rankdata(-keyed if higher_is_better else keyed, method="average", axis=1), np.float64)


def _codes(clusters: Sequence[Hashable] | None, n: int, where: str) -> tuple[NDArray[np.int64], int]:
    if clusters is None:
        return np.arange(n, dtype=np.int64), n
    if len(clusters) != n:
        raise UserError(f"{where}: {n} items but {len(clusters)} cluster ids; give one per item")
    codes, groups = cluster_index(clusters)
    if groups < 2:
        raise UserError(
            f"{where}: the items every model answered come from {groups} patient; ranks resampled by"
            " patient need at least 2 patients (evaluate more items: raise the limit)"
        )
    return codes, groups


def bootstrap_ranks(
    values: FloatArray,
    clusters: Sequence[Hashable] | None = None,
    *,
    resamples: int = 2000,
    seed: Seed = 0,
    where: str = "rank intervals",
) -> FloatArray:
    """Each model's rank in each bootstrap replicate (replicates x models, average ranks).

    ``values`` is items x models, every cell present (the items every model answered). A replicate
    draws as many clusters as there are, with replacement (each item its own cluster when
    ``clusters`` is None), pools the drawn clusters' items and ranks the models by their mean.
    """
    table = np.asarray(values, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0 or table.shape[1] == 0:
        raise UserError(f"{where}: need at least one item and one model, got shape {table.shape}")
    if not np.all(np.isfinite(table)):
        raise UserError(f"{where}: scores must be finite numbers")
    codes, g = _codes(clusters, table.shape[0], where)
    return rank_rows(resampled_means(table, codes, g, resamples, np.random.default_rng(seed)))


def resampled_means(
    values: FloatArray, codes: NDArray[np.int64], groups: int, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """The column means of ``values`` (items x columns) in each of ``resamples`` replicates that
    draw ``groups`` clusters with replacement (``codes``: each item's cluster, 0..groups-1) and
    pool the drawn clusters' items: replicates x columns, built in blocks of bounded memory.
    Shared by the rank bootstrap here and the calibrated one (its rated and unrated sets apart)."""
    k = values.shape[1]
    sums = np.zeros((groups, k))
    np.add.at(sums, codes, values)
    sizes = np.bincount(codes, minlength=groups).astype(np.float64)
    parts: list[FloatArray] = []
    for idx in resample_blocks(rng, groups, resamples, row_cost=groups * k, block=_BLOCK):
        r = idx.shape[0]
        # how many times each cluster was drawn in each replicate
        counts = np.bincount((idx + np.arange(r)[:, None] * groups).ravel(), minlength=r * groups)
        counts = counts.reshape(r, groups).astype(np.float64)
        parts.append((counts @ sums) / (counts @ sizes)[:, None])
    return np.concatenate(parts)


@dataclass(frozen=True, slots=True)
class RankDistribution:
    """One model's rank over the bootstrap replicates.

    ``rank``: its rank on the data as observed; ``probabilities[r - 1]``: P(rank = r) for r = 1..k
    (ties split evenly); ``median`` and ``interval`` (low, high): from its per-replicate ranks.
    """

    model: str
    rank: float
    probabilities: tuple[float, ...]
    median: float
    interval: tuple[float, float]
    widened: bool = False
    """The bootstrap interval was narrower than the pair tests allow and was widened to them."""

    def as_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "rank": self.rank,
            "median": self.median,
            "interval": list(self.interval),
            "widened_to_the_tests": self.widened,
            "probabilities": list(self.probabilities),
        }


def rank_distribution(
    models: Sequence[str], observed: Sequence[float], replicates: FloatArray, *, level: float = 0.95
) -> list[RankDistribution]:
    """P(rank = r), median and interval per model from per-replicate average ranks."""
    reps = np.asarray(replicates, dtype=np.float64)
    k = len(models)
    low, high = _tie_bounds(reps)
    share = 1.0 / (high - low + 1.0)
    probs = np.stack(
        [np.where((low <= r) & (r <= high), share, 0.0).mean(axis=0) for r in range(1, k + 1)], 1
    )
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(reps, [tail, 1.0 - tail], axis=0, method="inverted_cdf")
    median = np.median(reps, axis=0)
    return [
        RankDistribution(
            model=m,
            rank=float(observed[j]),
            probabilities=tuple(float(p) for p in probs[j]),
            median=float(median[j]),
            interval=(float(lo[j]), float(hi[j])),
        )
        for j, m in enumerate(models)
    ]


def _tie_bounds(ranks: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The lowest and highest integer rank each tied group spans, from average ranks per row."""
    # models sharing an average rank a form a group of size t; it spans a - (t-1)/2 .. a + (t-1)/2
    ties = (ranks[:, :, None] == ranks[:, None, :]).sum(axis=2).astype(np.float64)
    return ranks - (ties - 1) / 2, ranks + (ties - 1) / 2


# --- judge-run rank instability (EHRNoteQA, Table 6) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgeStability:
    """How the models' ranking moves between repeats of the judge.

    ``scores[r][j]`` is model ``models[j]``'s mean in judge repeat r over the items every model has a
    verdict for in that repeat; ``ranks`` the ranks within each repeat (1 = best, ties share the best
    rank of their group, as EHRNoteQA ranks); ``gold_ranks`` each model's most frequent rank (the best
    of several modes); ``instability`` EHRNoteQA's sum over models and repeats of |rank - gold rank|
    (0: every repeat gave the same order); ``rank_counts[model][r - 1]`` how many repeats gave the
    model rank r. Models without judge repeats are listed in ``without``.
    """

    models: tuple[str, ...]
    repeats: int
    scores: tuple[tuple[float, ...], ...]
    ranks: tuple[tuple[float, ...], ...]
    gold_ranks: Mapping[str, float]
    per_model: Mapping[str, float]
    instability: float
    rank_counts: Mapping[str, tuple[int, ...]]
    items: tuple[int, ...]
    without: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "models": list(self.models),
            "repeats": self.repeats,
            "items": list(self.items),
            "scores": [list(row) for row in self.scores],
            "ranks": [list(row) for row in self.ranks],
            "gold_ranks": dict(self.gold_ranks),
            "per_model": dict(self.per_model),
            "instability": self.instability,
            "rank_counts": {m: list(c) for m, c in self.rank_counts.items()},
            "without": list(self.without),
        }


def _repeat_means(
    runs: Mapping[str, Sequence[Mapping[str, float]]], models: Sequence[str], r: int, where: str
) -> tuple[list[float], int]:
    shared = set(runs[models[0]][r])
    for m in models[1:]:
        shared &= set(runs[m][r])
    if not shared:
        raise UserError(f"{where}: in judge repeat {r + 1} no item has a verdict for every model")
    items = sorted(shared)
    return [float(np.mean([runs[m][r][i] for i in items])) for m in models], len(items)


def judge_stability(
    runs: Mapping[str, Sequence[Mapping[str, float]]], order: Sequence[str], *, where: str = "judge runs"
) -> JudgeStability | None:
    """EHRNoteQA's rank instability over judge repeats (None when no model has any repeat).

    ``order`` lists the benchmark's models; those with repeats are ranked, the rest named in
    ``without``. Every model with repeats must have the same number of them."""
    unknown = sorted(set(runs) - set(order))
    if unknown:
        raise UserError(f"{where}: judge repeats for {unknown}, which have no scores on this benchmark")
    models = [m for m in order if runs.get(m)]
    if not models:
        return None
    counts = {m: len(runs[m]) for m in models}
    if len(set(counts.values())) != 1:
        raise UserError(
            f"{where}: models have different numbers of judge repeats {counts}; give each the same"
        )
    repeats = counts[models[0]]
    rows = [_repeat_means(runs, models, r, where) for r in range(repeats)]
    scores = [row for row, _ in rows]
    for row in scores:
        if not all(np.isfinite(row)):
            raise UserError(f"{where}: a judge repeat has a score that is not a finite number")
    table = ScoreTable(tuple(str(r + 1) for r in range(repeats)), tuple(models), np.round(scores, DECIMALS))
    result = rank_instability(table, ties="min", gold_rule="smallest")
    ranks = result.ranks.values
    k = len(models)
    rank_counts = {
        m: tuple(int(np.sum(ranks[:, j] == r)) for r in range(1, k + 1)) for j, m in enumerate(models)
    }
    return JudgeStability(
        models=tuple(models),
        repeats=repeats,
        scores=tuple(tuple(row) for row in scores),
        ranks=tuple(tuple(float(v) for v in row) for row in ranks),
        gold_ranks=dict(result.gold_ranks),
        per_model=dict(result.per_model),
        instability=float(result.total),
        rank_counts=rank_counts,
        items=tuple(n for _, n in rows),
        without=tuple(m for m in order if m not in models),
    )
