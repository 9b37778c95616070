"""Comparisons between arms and against the reference ranking, for one view.

The minimum detectable difference per pair of arms (MedAlign's sample-size argument), each
metric's per-instruction Kendall tau with the reference ranking, and the call to the general
:func:`clinieval.analysis.analyze.analyze` (head-to-head, win rates, agreement, subgroups) with the
options a small table would trip over left out beforehand, each with its reason.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from clinieval.analysis import rank_agreement, uncertainty
from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.table import LongTable, Row
from clinieval.benchmarks.medalign.analysis.view import JSON, Cells, Settings, View
from clinieval.errors import UserError

__all__ = [
    "MDD_ALPHA",
    "MDD_POWER",
    "generic_analysis",
    "kendall_per_instruction",
    "minimum_detectable_differences",
]

MDD_ALPHA = 0.05
MDD_POWER = 0.8


def _mdd_columns(view: View) -> list[str]:
    c = view.cols
    return [col for col in (*c.metrics, c.correct, c.rank) if view.has(col)]


def minimum_detectable_differences(view: View) -> JSON | None:
    """Per column and pair of arms: sigma_d of the per-item differences and the minimum detectable
    difference at power 0.8, alpha 0.05 over the items both arms have (MedAlign's sample size)."""
    models = view.models
    if len(models) < 2:
        view.undefined.append(f"minimum detectable difference: need 2+ arms, found {len(models)}")
        return None
    out: JSON = {}
    for column in _mdd_columns(view):
        cells = view.cells(column)
        out[column] = [p for a, b in combinations(models, 2) if (p := _mdd_pair(view, column, cells, a, b))]
    return out


def _mdd_pair(view: View, column: str, cells: Cells, a: str, b: str) -> JSON | None:
    diffs = [cells[(i, a)] - cells[(i, b)] for i in view.items if (i, a) in cells and (i, b) in cells]
    if len(diffs) < 2:
        view.undefined.append(
            f"minimum detectable difference, {column}, {a} vs {b}: fewer than 2 shared items"
        )
        return None
    sigma = float(np.std(diffs, ddof=1))
    if sigma == 0.0:
        view.undefined.append(
            f"minimum detectable difference, {column}, {a} vs {b}: the per-item differences are constant"
        )
        return None
    mdd = uncertainty.minimum_detectable_difference(sigma, len(diffs), alpha=MDD_ALPHA, power=MDD_POWER)
    return {"model": a, "opponent": b, "n": len(diffs), "sigma_d": sigma, "mdd": mdd}


def _score_table(view: View, column: str, *, higher_is_better: bool) -> ScoreTable:
    cells = view.cells(column)
    rows = ((i, m, cells.get((i, m))) for i in view.items for m in view.models)
    return ScoreTable.from_rows(rows, higher_is_better=higher_is_better)


def kendall_per_instruction(view: View) -> JSON | None:
    """Each metric's per-instruction Kendall tau-b with the reference ranking (analyze reports
    only the mean and CI; the per-instruction values show where a metric disagrees)."""
    c = view.cols
    if not view.has(c.rank):
        view.missing("per-instruction Kendall tau", c.rank)
        return None
    reference = _score_table(view, c.rank, higher_is_better=False)
    out: JSON = {}
    for metric in (*c.metrics, *([c.correct] if view.has(c.correct) else [])):
        scores = _score_table(view, metric, higher_is_better=True)
        k = rank_agreement.metric_human_kendall(scores, reference, resamples=1)
        out[metric] = {
            "taus": k.taus,
            "mean": k.mean,
            "skipped_constant": list(k.skipped_constant),
            "skipped_incomplete": list(k.skipped_incomplete),
        }
    return out


def generic_analysis(view: View, s: Settings) -> JSON | None:
    """analyze() on this view: metrics and correctness as scores, the reference as human rank.

    Options analyze would trip over on a small table are left out beforehand with a reason
    (see the notes in the module's docs); anything it still refuses is recorded, not raised.
    """
    c = view.cols
    what = "generic statistics (analyze)"
    if len(view.models) < 2:
        view.undefined.append(f"{what}: need 2+ arms, found {len(view.models)}")
        return None
    correct = c.correct if view.has(c.correct) else None
    rank = c.rank if view.has(c.rank) else None
    scores = (*c.metrics, *([correct] if correct else []))
    if not scores and rank is None:
        view.undefined.append(f"{what}: no metric, correctness or rank values")
        return None
    role_correct = correct if correct and rank and _pairs_with_rank(view, correct, rank) >= 3 else None
    if correct and rank and role_correct is None:
        view.undefined.append("point-biserial correct vs rank: fewer than 3 responses have both")
    groups = tuple(g for g in c.groups if view.has(g)) if role_correct else ()
    if groups and not _every_arm_judged(view, c.correct):
        view.undefined.append("subgroup chi-square: some arm has no reviewed response")
        groups = ()
    rater = c.rater if rank and view.has(c.rater) else None
    cluster = view.clustering["by"]
    options = AnalyzeOptions(
        item=c.instruction,
        model=c.model,
        cluster=cluster,
        scores=scores,
        human_rank=rank,
        human_label=c.reference_label,
        correct=role_correct,
        groups=groups,
        rater=rater,
        level=s.level,
        resamples=s.resamples,
        seed=s.seed,
    )
    keep = [x for x in (c.instruction, c.model, cluster, rater, rank, *scores, *groups) if x is not None]
    rows = view.table.rows if rater else tuple(view.primary)
    projected = LongTable(
        view.table.path,
        tuple(dict.fromkeys(keep)),
        tuple(Row(r.where, {k: r.cells.get(k) for k in keep}) for r in rows),
    )
    try:
        return analyze(projected, options)
    except UserError as e:
        view.undefined.append(f"{what}: {e}")
        return None


def _pairs_with_rank(view: View, correct: str, rank: str) -> int:
    ranks = view.cells(rank)
    return sum(1 for key in view.cells(correct) if key in ranks)


def _every_arm_judged(view: View, correct: str) -> bool:
    judged = {m for _, m in view.cells(correct)}
    return all(m in judged for m in view.models)
