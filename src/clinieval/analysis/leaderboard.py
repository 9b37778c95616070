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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from clinieval.analysis import leaderboard_calibrated as calibrated
from clinieval.analysis._validation import level as check_level
from clinieval.analysis._validation import positive_int
from clinieval.analysis.exact_pairs import PairTest, exact_pair_test
from clinieval.analysis.leaderboard_calibrated import Calibration
from clinieval.analysis.leaderboard_ranks import (
    FloatArray,
    RankDistribution,
    bootstrap_ranks,
    judge_stability,
    rank_distribution,
    rank_rows,
)
from clinieval.analysis.leaderboard_types import (
    AGGREGATION,
    CAVEATS,
    BenchmarkBoard,
    BenchmarkScores,
    Leaderboard,
    ModelScore,
    OverallRank,
    PairDifference,
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

MIN_ITEMS = 30
"""Fewer items than this on a benchmark (independent items) draws a warning on its block."""
MIN_CLUSTERS = 10
"""Fewer patients than this on a clustered benchmark draws a warning on its block."""


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
    enough = len(common) >= MIN_ITEMS if labels is None else len(set(labels)) >= MIN_CLUSTERS
    if b.clinicians is not None:
        return _calibrated_pair(b, x, y, level, enough)
    xs, ys = [float(b.scores[x][i]) for i in common], [float(b.scores[y][i]) for i in common]
    interval = paired_bootstrap(xs, ys, level=level, resamples=resamples, seed=seed, clusters=labels)
    margin_ci = None
    if b.margin is not None:
        two_sided = 1.0 - 2.0 * (1.0 - level)
        boot = paired_bootstrap(xs, ys, level=two_sided, resamples=resamples, seed=seed, clusters=labels)
        margin_ci = (boot.ci_low, boot.ci_high)
    test = exact_pair_test(xs, ys, clusters=labels, seed=seed)
    return _Paired(interval, test, len(common), enough, margin_ci)


def _calibrated_pair(b: BenchmarkScores, x: str, y: str, level: float, enough: bool) -> _Paired:
    """X minus Y by PPI++ on the paired differences (clinicians rated both answers of an item)."""
    clinicians = b.clinicians or {}
    diff, p, wide = calibrated.paired(
        b.scores[x],
        b.scores[y],
        clinicians.get(x, {}),
        clinicians.get(y, {}),
        b.clusters,
        level=level,
        margin=b.margin is not None,
        lam=b.lam,
    )
    interval = PairedBootstrap(diff.value, diff.low, diff.high, p, diff.n_judged)
    units = diff.clusters or diff.n_judged
    named = calibrated.method(b.lam).pair_test
    test = PairTest(p, named, units, exhaustive=True, mc_error=None, smallest=0.0)
    return _Paired(interval, test, diff.n_judged, enough, wide)


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
        exact = [] if b.clinicians is not None else list(pairs)  # PPI's normal test has no floor
        if exact:
            best = min(p.smallest_p for p in exact)
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
    cal = None
    if b.clinicians is not None:
        cal = calibrated.calibrate(
            b.scores, b.clinicians, b.clusters, kind=b.clinician_kind, level=level, lam=b.lam
        )
    headline = {
        m: _headline(b, m, level, resamples, seed) if cal is None else _calibrated_headline(b, m, cal)
        for m in given
    }
    common, table = _common_table(b, given)
    labels = None if b.clusters is None else [b.clusters[i] for i in common]
    where = f"benchmark {b.name!r}"
    if cal is None:
        reps = bootstrap_ranks(table, labels, resamples=resamples, seed=rank_seed(seed, b.name), where=where)
        observed = rank_rows(table.mean(axis=0)[None, :])[0]
    else:
        lams = [cal.model(m).calibrated.lam or 0.0 for m in given]
        means, reps = calibrated.rank_replicates(
            b.scores,
            b.clinicians or {},
            b.clusters,
            given,
            lams,
            resamples=resamples,
            seed=rank_seed(seed, b.name),
        )
        observed = rank_rows(means[None, :])[0]
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
        ci_method=_ci_method(b, cal),
        digits=digits,
        replicates=reps,
        warnings=tuple(_warnings(b, scores, pairs) + ([] if cal is None else calibrated.warnings(cal))),
        margin=b.margin,
        calibration=cal,
    )


def _ci_method(b: BenchmarkScores, cal: Calibration | None) -> str:
    if cal is not None:
        return cal.method.ci_method + (", patients as clusters" if b.clusters is not None else "")
    if b.clusters is not None:
        return "bootstrap over patients (a patient's items together)"
    return "bootstrap over items"


def _calibrated_headline(b: BenchmarkScores, model: str, cal: Calibration) -> ModelScore:
    """The model's PPI++ estimate as its number on the board."""
    e = cal.model(model).calibrated
    patients = None if b.clusters is None else len({b.clusters[i] for i in b.scores[model]})
    return ModelScore(
        model,
        e.value,
        (e.low, e.high),
        e.n_judged,
        int(b.failed.get(model, 0)),
        patients,
        estimator=e.estimator,
        rated=e.n_rated,
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
