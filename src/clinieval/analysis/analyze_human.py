"""``clinieval analyze``'s sections that measure against a human reference.

Why a module of its own: :mod:`clinieval.analysis.analyze` computes what the score columns say on
their own (means, rankings, paired tests, subgroups, runs); this module holds what needs the human
reference beside them, which is a concern of its own with its own columns:

* ``--human-rank`` (:func:`human_section`): the reference's mean ranks and win rates, each score
  column's per-item Kendall tau-b with it and win-rate errors (MedAlign's metric agreement),
  metrics compared by Fisher-Z and a paired bootstrap, point-biserial correctness vs rank;
* ``--human-score`` (:func:`judge_section`): each judge column against the human scores, read
  through :class:`clinieval.analysis.judge_vs_human.ScoredResponses` (the one implementation of
  judge-vs-human agreement, shared with AutoMedEval): pooled response-level Spearman and Pearson,
  Accuracy_2-tuple / triple and win/tie rates side by side;
* ``--rater``: inter-rater Kendall tau-b and Krippendorff's alpha on either reference column.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import partial
from itertools import combinations

from clinieval.analysis import agreement, rank_agreement, rankings, uncertainty
from clinieval.analysis.analyze_context import JSON, Context, cell, ranking_json
from clinieval.analysis.judge_vs_human import CORRELATIONS, ScoredResponses
from clinieval.analysis.rankings import ScoreTable
from clinieval.errors import UserError

__all__ = ["human_section", "judge_section"]


def human_section(ctx: Context, tables: dict[str, ScoreTable]) -> JSON | None:
    o = ctx.options
    if o.human_rank is None:
        return None
    human = ctx.score_table(o.human_rank, higher_is_better=False)
    ranking = ranking_json(
        ctx, f"{o.human_label} ranking ({o.human_rank})", human, "win rates, head-to-head and win-rate errors"
    )
    out: JSON = {
        "column": o.human_rank,
        "label": o.human_label,
        # MedAlign's "Rank": the ranks as the rater gave them (ties kept as recorded, 1, 2, 2);
        # re-ranking each item with ties averaged (1, 2.5, 2.5) is kept beside it, named as such.
        "mean_rank": rankings.mean_ranks(human, ties="as_given"),
        "mean_rank_ties_averaged": ranking.pop("mean_rank"),
        **ranking,
    }
    agreements = {
        col: rank_agreement.metric_human_kendall(t, human, level=o.level, resamples=o.resamples, seed=o.seed)
        for col, t in tables.items()
    }
    two = len(human.models) >= 2
    out["metric_agreement"] = {
        col: {
            **k.as_json(),
            "win_rate_abs_error": (
                rankings.win_rate_errors(human, tables[col]) if two else dict.fromkeys(human.models)
            ),
        }
        for col, k in agreements.items()
    }
    out["metric_comparison"] = _fisher_z(ctx, tables, agreements)
    if o.correct is not None:
        out["point_biserial_correct_vs_rank"] = _point_biserial(ctx, human)
    if o.rater is not None:
        out["raters"] = _rater_section(ctx, o.human_rank)
    return out


def _fisher_z(
    ctx: Context, tables: dict[str, ScoreTable], agreements: dict[str, rank_agreement.KendallAgreement]
) -> list[JSON]:
    """Two metrics' mean taus with the clinicians compared as overlapping correlations (they share
    the clinician ranking): Meng-Rosenthal-Rubin's Z on Fisher's transform, with n the items both
    metrics were scored on and r between the metrics their own mean per-item tau. An approximation
    for averaged taus, as in MedAlign; beside it, a paired bootstrap over the shared items of the
    per-item tau differences, which needs no such approximation. Either may be undefined (None,
    with the reason in ``undefined``) without stopping the analysis."""
    out: list[JSON] = []
    o = ctx.options
    for a, b in combinations(agreements, 2):
        ka, kb = agreements[a], agreements[b]
        shared = [i for i in ka.taus if i in kb.taus]
        n = len(shared)
        entry: JSON = {"metric": a, "other": b, "n": n, "z": None, "pvalue": None}
        diffs = [ka.taus[i] - kb.taus[i] for i in shared]
        if diffs:
            entry["tau_difference"] = sum(diffs) / n
            ci = ctx.guard(
                f"paired bootstrap of tau differences {a} vs {b}",
                partial(uncertainty.bootstrap_ci, diffs, level=o.level, resamples=o.resamples, seed=o.seed),
            )
            entry["tau_difference_ci"] = None if ci is None else list(ci)
        between = rank_agreement.metric_human_kendall(tables[a], tables[b], resamples=1)
        if ka.mean is None or kb.mean is None or between.mean is None or n < 4:
            ctx.undefined.append(
                f"Fisher-Z {a} vs {b}: needs a defined mean tau for both and 4+ shared items"
            )
        else:
            test = ctx.guard(
                f"Fisher-Z {a} vs {b}",
                partial(agreement.compare_dependent_correlations, ka.mean, kb.mean, between.mean, n),
            )
            if test is not None:
                entry["z"], entry["pvalue"] = test.z, test.pvalue
        out.append(entry)
    return out


def _point_biserial(ctx: Context, human: ScoreTable) -> JSON | None:
    o = ctx.options
    assert o.correct is not None
    correct = ctx.cells(ctx.primary, o.correct)
    pairs = [
        (c, human.values[i, j])
        for i, item in enumerate(human.items)
        for j, model in enumerate(human.models)
        if (c := correct.get((item, model))) is not None and not math.isnan(human.values[i, j])
    ]
    what = "point-biserial correct vs rank"
    # point_biserial takes fewer than 3 values as a caller's mistake; here it is what the data has
    if not ctx.enough(what, len(pairs), 3, f"responses with both {o.correct!r} and a rank"):
        return None
    result = ctx.guard(what, lambda: agreement.point_biserial([p[0] for p in pairs], [p[1] for p in pairs]))
    return None if result is None else {"r": result.statistic, "pvalue": result.pvalue, "n": result.n}


def _rater_tables(ctx: Context, column: str) -> dict[str, ScoreTable]:
    t, o = ctx.table, ctx.options
    assert o.rater is not None
    by_rater: dict[str, list[tuple[str, str, float | None]]] = defaultdict(list)
    for row in t.rows:
        rater = t.text(row, o.rater)
        if rater is None:
            raise UserError(f"{row.where}: column {o.rater!r} (the rater) is empty")
        by_rater[rater].append((str(t.text(row, o.item)), str(t.text(row, o.model)), t.number(row, column)))
    higher = column != o.human_rank
    return {r: ScoreTable.from_rows(rows, higher_is_better=higher) for r, rows in by_rater.items()}


def _rater_section(ctx: Context, column: str) -> JSON:
    o = ctx.options
    per_rater = _rater_tables(ctx, column)
    out: JSON = {"raters": len(per_rater)}
    if len(per_rater) >= 2:
        k = rank_agreement.inter_rater_kendall(per_rater, level=o.level, resamples=o.resamples, seed=o.seed)
        out["inter_rater_kendall"] = k.as_json()
    units = sorted({(i, m) for t in per_rater.values() for i in t.items for m in t.models})
    data = [[cell(t, i, m) for i, m in units] for t in per_rater.values()]
    out["krippendorff_alpha_ordinal"] = ctx.guard(
        "Krippendorff's alpha", lambda: agreement.krippendorff_alpha(data, level_of_measurement="ordinal")
    )
    return out


# --- judge vs human scores ------------------------------------------------------------------


def judge_section(ctx: Context, tables: dict[str, ScoreTable]) -> JSON:
    o = ctx.options
    assert o.human_score is not None
    human = ctx.score_table(o.human_score, higher_is_better=True)
    out: JSON = {"column": o.human_score}
    for col, judge in tables.items():
        out[col] = _judge_vs_human(ctx, col, human, judge)
    if o.rater is not None:
        out["raters"] = _rater_section(ctx, o.human_score)
    return out


def _judge_vs_human(ctx: Context, col: str, human: ScoreTable, judge: ScoreTable) -> JSON:
    """One judge column against the human scores: response-level correlations (pooled p-values,
    see :mod:`clinieval.analysis.judge_vs_human`), and with 2+ models the ordering accuracies and
    win/tie rates side by side."""
    models = [m for m in human.models if m in judge.models]
    items = [i for i in human.items if judge.has_item(i)]
    scored = ScoredResponses(
        [[cell(human, i, m) for m in models] for i in items],
        [[cell(judge, i, m) for m in models] for i in items],
    )
    responses = len(scored.pairs()[0])
    out: JSON = {"responses": responses}
    for name in CORRELATIONS:
        what = f"{col}: {name} with {ctx.options.human_score}"
        enough = ctx.enough(what, responses, 3, "responses with both scores")
        r = ctx.guard(what, partial(scored.correlation, name)) if enough else None
        out[name] = None if r is None else {"r": r.statistic, "pvalue": r.pvalue}
    out.update(accuracy_2tuple=None, accuracy_triple=None, order_items=0, judge_missing=0, win_tie=[])
    if not ctx.enough(f"{col}: Accuracy 2-tuple / triple and win/tie rates", len(models), 2, "models"):
        return out
    oa = scored.order()
    out["accuracy_2tuple"], out["accuracy_triple"] = oa.accuracy_2tuple, oa.accuracy_triple
    out["order_items"], out["judge_missing"] = oa.items, oa.judge_missing
    pair_cmp = rankings.compare_pair_outcomes(human.restrict(models=models), judge.restrict(models=models))
    out["win_tie"] = [
        {
            "model": p.model,
            "opponent": p.opponent,
            "human": _shares(p.human),
            "judge": _shares(p.judge),
        }
        for p in pair_cmp
    ]
    return out


def _shares(p: rankings.PairOutcome) -> JSON:
    return {"win": p.win_share(), "tie": p.tie_share(), "loss": p.loss_share(), "battles": p.battles}
