"""``clinieval analyze``: the statistics of the papers over a long table users already have.

The input is one row per (item, model) — optionally per rater or per repeated run — with score
columns (metric values, judge scores, correctness) and optionally a clinician rank or score. The
output is one JSON-ready dict and a Markdown rendering of it. Statistics are only computed where
the columns they need were given; a statistic that is undefined on this data (a constant
column, a subgroup with one level) is listed under ``undefined`` with the reason, never shown as
NaN or left out silently.

Generic by design: no benchmark's rule lives here. This module assembles the output and computes
what the score columns say on their own (per-model CIs, rankings, paired tests, subgroups, runs);
the sections measured against a human reference are in :mod:`clinieval.analysis.analyze_human`,
and what both read the table through in :mod:`clinieval.analysis.analyze_context`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import partial
from itertools import combinations
from typing import Any

import numpy as np

from clinieval.analysis import rank_agreement, subgroups, uncertainty
from clinieval.analysis.analyze_context import JSON, AnalyzeOptions, Context, about, ranking_json
from clinieval.analysis.analyze_human import human_section, judge_section
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.table import ATTRIBUTE_PREFIX, LongTable, Row
from clinieval.errors import UserError

__all__ = ["AnalyzeOptions", "analyze"]


def analyze(table: LongTable, options: AnalyzeOptions) -> JSON:
    """Every statistic the given columns allow, as a JSON-ready dict."""
    _check_columns(table, options)
    scores = _score_columns(table, options)
    ctx = Context(table, options, _primary_rows(table, options))
    tables = {
        col: ctx.score_table(col, higher_is_better=col not in options.lower_is_better) for col in scores
    }
    first = next(iter(tables.values()), None)
    models = list(first.models) if first else ctx.models()
    out: JSON = {
        "table": str(table.path),
        "rows": len(table.rows),
        "items": len({table.text(r, options.item) for r in ctx.primary}),
        "models": models,
        "options": _options_json(options, scores),
        "scores": {
            col: about(table, f"score column {col!r}", partial(_score_section, ctx, col, t))
            for col, t in tables.items()
        },
    }
    human = about(table, f"column {options.human_rank!r} (--human-rank)", partial(human_section, ctx, tables))
    if human is not None:
        out["human"] = human
    if options.human_score is not None:
        what = f"column {options.human_score!r} (--human-score)"
        out["judge_vs_human"] = about(table, what, partial(judge_section, ctx, tables))
    if options.correct is not None and options.groups:
        what = f"column {options.correct!r} (--correct)"
        out["subgroups"] = about(table, what, partial(_subgroup_section, ctx))
    if options.run is not None:
        what = f"column {options.run!r} (--run), score column"
        out["runs"] = {
            col: about(table, f"{what} {col!r}", partial(_run_section, ctx, col)) for col in scores
        }
    out["undefined"] = ctx.undefined
    return out


# --- columns and tables --------------------------------------------------------------------------


def _check_columns(table: LongTable, options: AnalyzeOptions) -> None:
    table.require(*options.named(), *options.scores, *([options.correct] if options.correct else []))
    unknown = sorted(options.lower_is_better - set(options.scores or table.columns))
    if unknown:
        raise UserError(f"--lower-is-better names {', '.join(unknown)}, which is not a score column")
    if options.rater is not None and options.human_rank is None and options.human_score is None:
        raise UserError("--rater needs --human-rank or --human-score: raters are compared on those columns")


def _score_columns(table: LongTable, options: AnalyzeOptions) -> tuple[str, ...]:
    if options.scores:
        return options.scores
    named = set(options.named())
    found = tuple(
        c
        for c in table.columns
        if c not in named and not c.startswith(ATTRIBUTE_PREFIX) and table.is_numeric(c)
    )
    if not found and options.human_rank is None and options.human_score is None:
        raise UserError(
            f"{table.path}: no numeric score column besides {', '.join(sorted(named))}; "
            "name them with --score, or give --human-rank"
        )
    return found


def _primary_rows(table: LongTable, options: AnalyzeOptions) -> list[Row]:
    """Rows of each item's first-listed rater (all rows without --rater), with item and model."""
    first_rater: dict[str, str | None] = {}
    rows: list[Row] = []
    for row in table.rows:
        item, model = table.text(row, options.item), table.text(row, options.model)
        if item is None or model is None:
            missing = options.item if item is None else options.model
            raise UserError(f"{row.where}: column {missing!r} is empty")
        if options.rater is not None:
            rater = table.text(row, options.rater)
            if first_rater.setdefault(item, rater) != rater:
                continue
        rows.append(row)
    return rows


def _options_json(options: AnalyzeOptions, scores: Sequence[str]) -> JSON:
    return {
        "item": options.item,
        "model": options.model,
        "scores": list(scores),
        "lower_is_better": sorted(options.lower_is_better),
        "human_rank": options.human_rank,
        "human_score": options.human_score,
        "correct": options.correct,
        "cluster": options.cluster,
        "groups": list(options.groups),
        "rater": options.rater,
        "run": options.run,
        "level": options.level,
        "resamples": options.resamples,
        "seed": options.seed,
        "human_label": options.human_label,
    }


# --- per score column ----------------------------------------------------------------------------


def _column_values(table: ScoreTable, j: int) -> tuple[list[str], np.ndarray[Any, np.dtype[np.float64]]]:
    present = ~np.isnan(table.values[:, j])
    return [i for i, p in zip(table.items, present, strict=True) if p], table.values[present, j]


def _model_stats(ctx: Context, column: str, table: ScoreTable) -> JSON:
    o = ctx.options
    clusters = ctx.clusters
    out: JSON = {}
    for j, model in enumerate(table.models):
        items, values = _column_values(table, j)
        stats: JSON = {"n": int(values.size), "mean": None, "sd": None, "ci": None}
        if values.size:
            stats["mean"] = float(values.mean())
            stats["sd"] = float(values.std(ddof=1)) if values.size > 1 else None
            if clusters is not None:
                ci = uncertainty.cluster_bootstrap_ci(
                    values, [clusters[i] for i in items], level=o.level, resamples=o.resamples, seed=o.seed
                )
            else:
                ci = uncertainty.bootstrap_ci(values, level=o.level, resamples=o.resamples, seed=o.seed)
            stats["ci"] = list(ci)
        out[model] = stats
    return out


def _is_binary(values: np.ndarray[Any, np.dtype[np.float64]]) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


def _pair(ctx: Context, column: str, table: ScoreTable, a: int, b: int) -> JSON | None:
    o = ctx.options
    has_a, has_b = ~np.isnan(table.values[:, a]), ~np.isnan(table.values[:, b])
    both = has_a & has_b
    x, y = table.values[both, a], table.values[both, b]
    ma, mb = table.models[a], table.models[b]
    # items only one of the two has a value for (missing, or a failed call): left out of the
    # paired comparison, and counted so the report says how many
    unpaired = int(np.count_nonzero(has_a ^ has_b))
    entry: JSON = {"model": ma, "opponent": mb, "n": int(x.size), "unpaired": unpaired}
    if x.size < 2:
        ctx.undefined.append(
            f"{column}: {ma} vs {mb}: fewer than 2 items scored for both ({unpaired} scored for only one)"
        )
        return None
    clusters = _pair_clusters(ctx, table, both)
    if clusters is not None:
        entry["clusters"] = len(set(clusters))
        if entry["clusters"] < 2:
            ctx.undefined.append(f"{column}: {ma} vs {mb}: the items scored for both share one {o.cluster}")
            return None
    boot = uncertainty.paired_bootstrap(
        x, y, level=o.level, resamples=o.resamples, seed=o.seed, clusters=clusters
    )
    perm = uncertainty.paired_permutation_test(x, y, resamples=o.resamples, seed=o.seed, clusters=clusters)
    entry.update(mean_difference=boot.mean_difference, ci=[boot.ci_low, boot.ci_high], pvalue=perm.pvalue)
    if _is_binary(x) and _is_binary(y):
        mc = uncertainty.mcnemar(x, y, clusters=clusters)
        entry["mcnemar"] = {"b": mc.b, "c": mc.c, "pvalue": mc.pvalue, "method": mc.method}
    sigma_d = float(np.std(x - y, ddof=1))
    entry["sigma_d"] = sigma_d
    entry["minimum_detectable_difference"] = (
        uncertainty.minimum_detectable_difference(sigma_d, int(x.size)) if sigma_d > 0 else None
    )
    return entry


def _pair_clusters(
    ctx: Context, table: ScoreTable, both: np.ndarray[Any, np.dtype[np.bool_]]
) -> list[str] | None:
    """The cluster (patient) of each item two models were both scored on; None unclustered."""
    clusters = ctx.clusters
    if clusters is None:
        return None
    return [clusters[i] for i, keep in zip(table.items, both, strict=True) if keep]


def _pairs(ctx: Context, column: str, table: ScoreTable) -> list[JSON]:
    pairs = [
        p for a, b in combinations(range(len(table.models)), 2) if (p := _pair(ctx, column, table, a, b))
    ]
    for p, adj in zip(pairs, uncertainty.bonferroni([p["pvalue"] for p in pairs]), strict=True):
        p["pvalue_bonferroni"] = adj
    return pairs


def _score_section(ctx: Context, column: str, table: ScoreTable) -> JSON:
    # with one model this records the undefined entry, and there are no pairs either
    ranking = ranking_json(ctx, column, table, "win rates, head-to-head and paired comparisons")
    return {
        "higher_is_better": table.higher_is_better,
        "per_model": _model_stats(ctx, column, table),
        **ranking,
        "pairs": _pairs(ctx, column, table) if len(table.models) >= 2 else [],
    }


# --- subgroups and runs --------------------------------------------------------------------------


def _subgroup_section(ctx: Context) -> JSON:
    """Per model: is correctness independent of each attribute? Bonferroni over the attributes
    whose test is defined for that model."""
    o, t = ctx.options, ctx.table
    assert o.correct is not None
    out: JSON = {}
    for model in ctx.models():
        rows, shares = _item_outcomes(ctx, model)
        if not rows:
            ctx.undefined.append(f"chi-square {model}: no response of {model} has a value in {o.correct!r}")
            out[model] = []
            continue
        # each item twice, correct with its share of correct runs and incorrect with the rest, so
        # an item counts once however many judge runs it had
        outcome = ["correct", "incorrect"] * len(rows)
        weights = [w for share in shares for w in (share, 1.0 - share)]
        tests: list[subgroups.SubgroupChiSquare] = []
        for attr in o.groups:
            values = [v for r in rows for v in [t.text(r, attr)] * 2]
            found = ctx.guard(
                f"chi-square {model} by {attr}",
                partial(subgroups.subgroup_chi_square, outcome, {attr: values}, weights=weights),
            )
            tests.extend(found or [])
        adjusted = uncertainty.bonferroni([s.test.pvalue for s in tests])
        out[model] = [
            {
                "attribute": s.attribute,
                "groups": list(s.groups),
                "table": [list(r) for r in s.table],
                "chi2": s.test.statistic,
                "dof": s.test.dof,
                "pvalue": s.test.pvalue,
                "pvalue_bonferroni": adj,
                "min_expected": s.test.min_expected,
            }
            for s, adj in zip(tests, adjusted, strict=True)
        ]
    return out


def _item_outcomes(ctx: Context, model: str) -> tuple[list[Row], list[float]]:
    """One entry per item a model answered: its first row (the item's attributes) and its share of
    correct over the item's rows (1 or 0 for one row; the mean over judge runs with ``--run``)."""
    o, t = ctx.options, ctx.table
    assert o.correct is not None
    first: dict[str, Row] = {}
    values: dict[str, list[float]] = defaultdict(list)
    for row in ctx.primary:
        value = t.number(row, o.correct)
        if t.text(row, o.model) != model or value is None:
            continue
        item = str(t.text(row, o.item))
        first.setdefault(item, row)
        values[item].append(1.0 if value else 0.0)
    return list(first.values()), [sum(values[i]) / len(values[i]) for i in first]


def _run_section(ctx: Context, column: str) -> JSON:
    """Each model's mean per run, mean ± SD over runs, and the rank instability of the runs."""
    t, o = ctx.table, ctx.options
    assert o.run is not None
    per_run: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in ctx.primary:
        value = t.number(row, column)
        run = t.text(row, o.run)
        if run is None:
            raise UserError(f"{row.where}: column {o.run!r} (the run) is empty")
        if value is not None:
            per_run[(run, str(t.text(row, o.model)))].append(value)
    means = ScoreTable.from_rows(
        ((run, model, sum(v) / len(v)) for (run, model), v in per_run.items()),
        higher_is_better=column not in o.lower_is_better,
    )
    spread: JSON = {}
    for j, model in enumerate(means.models):
        col = means.values[:, j][~np.isnan(means.values[:, j])]
        spread[model] = {
            "runs": int(col.size),
            "mean": float(col.mean()),
            "sd": float(col.std(ddof=1)) if col.size > 1 else None,
        }
    inst = rank_agreement.rank_instability(means, gold_rule=o.gold_rank)
    return {
        "per_model": spread,
        "rank_instability": inst.total,
        "rank_instability_per_model": inst.per_model,
        "gold_ranks": inst.gold_ranks,
        "gold_rule": inst.gold_rule,
        "tied_modes": list(inst.tied_modes),
    }
