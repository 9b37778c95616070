"""``clinieval analyze``: the statistics of the papers over a long table users already have.

The input is one row per (item, model) — optionally per rater or per repeated run — with score
columns (metric values, judge scores, correctness) and optionally a clinician rank or score. The
output is one JSON-ready dict and a Markdown rendering of it. Statistics are only computed where
the columns they need were given; a statistic that is undefined on this data (a constant
column, a subgroup with one level) is listed under ``undefined`` with the reason, never shown as
NaN or left out silently.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import combinations
from typing import Any, TypeVar

import numpy as np

from clinieval.analysis import agreement, rank_agreement, rankings, uncertainty
from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.table import ATTRIBUTE_PREFIX, LongTable, Row
from clinieval.errors import UserError

JSON = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class AnalyzeOptions:
    """Which columns mean what, and the resampling settings.

    ``scores`` empty means every numeric column not named elsewhere. ``lower_is_better`` names
    score columns where smaller is better (a rank, an error). With ``rater``, the first rater
    listed on an item is the primary one for every per-item statistic (MedAlign used one primary
    ranking per instruction) and the other raters feed only the inter-rater statistics. With
    ``run``, each (item, model) value is the mean over runs, and run-level means give each
    model's spread over runs and EHRNoteQA's rank instability.

    ``resamples`` is the number of bootstrap resamples (CIs, paired bootstrap, Kendall CIs) and
    also the number of random sign patterns of the paired permutation test, which is exact over
    all 2^n patterns when 2^n <= ``resamples``. ``human_label`` names whoever produced
    ``human_rank`` / ``human_score`` ("clinician" by default; "computed reference" for a ranking
    derived from another column) and is carried into the output and every heading of the report.
    """

    item: str = "item"
    model: str = "model"
    scores: tuple[str, ...] = ()
    lower_is_better: frozenset[str] = frozenset()
    human_rank: str | None = None
    human_score: str | None = None
    correct: str | None = None
    cluster: str | None = None
    groups: tuple[str, ...] = ()
    rater: str | None = None
    run: str | None = None
    gold_rank: rank_agreement.GoldRule = "smallest"
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    human_label: str = "clinician"

    def named(self) -> list[str]:
        """Columns given a role other than score."""
        roles = [self.item, self.model, self.human_rank, self.human_score, self.cluster, self.rater, self.run]
        return [c for c in (*roles, *self.groups) if c is not None]


@dataclass
class _Context:
    table: LongTable
    options: AnalyzeOptions
    primary: list[Row]
    undefined: list[str] = field(default_factory=list)

    @cached_property
    def clusters(self) -> dict[str, str] | None:
        """Item → cluster label (from the item's first row), worked out once for every score
        column; None without ``--cluster``."""
        t, o = self.table, self.options
        if o.cluster is None:
            return None
        out: dict[str, str] = {}
        for row in self.primary:
            label = t.text(row, o.cluster)
            if label is None:
                raise UserError(f"{row.where}: column {o.cluster!r} (the cluster) is empty")
            out.setdefault(str(t.text(row, o.item)), label)
        return out

    def enough(self, what: str, found: int, minimum: int, unit: str) -> bool:
        """Whether ``found`` reaches ``minimum``; if not, the statistic is recorded as undefined.

        For statistics whose library function takes too few values as a caller's mistake (a
        UserError): here the data simply does not define them."""
        if found >= minimum:
            return True
        self.undefined.append(f"{what}: needs at least {minimum} {unit}, found {found}")
        return False

    def guard(self, what: str, compute: Callable[[], T]) -> T | None:
        """Run one statistic; an undefined one is recorded with its reason and gives None."""
        try:
            return compute()
        except UndefinedStatisticError as e:
            self.undefined.append(f"{what}: {e}")
            return None


def _about(table: LongTable, what: str, compute: Callable[[], T]) -> T:
    """``compute()``; a UserError from the statistics below, which know numbers but not files, is
    raised again (same class) naming the table and the column it was computing, unless it names
    the table already (a row, a cell)."""
    try:
        return compute()
    except UserError as e:
        if str(table.path) in str(e):
            raise
        raise type(e)(f"{table.path}: {what}: {e}") from None


def analyze(table: LongTable, options: AnalyzeOptions) -> JSON:
    """Every statistic the given columns allow, as a JSON-ready dict."""
    _check_columns(table, options)
    scores = _score_columns(table, options)
    ctx = _Context(table, options, _primary_rows(table, options))
    tables = {
        col: _score_table(ctx, col, higher_is_better=col not in options.lower_is_better) for col in scores
    }
    first = next(iter(tables.values()), None)
    models = list(first.models) if first else _models(ctx)
    out: JSON = {
        "table": str(table.path),
        "rows": len(table.rows),
        "items": len({table.text(r, options.item) for r in ctx.primary}),
        "models": models,
        "options": _options_json(options, scores),
        "scores": {
            col: _about(table, f"score column {col!r}", partial(_score_section, ctx, col, t))
            for col, t in tables.items()
        },
    }
    human = _about(
        table, f"column {options.human_rank!r} (--human-rank)", partial(_human_section, ctx, tables)
    )
    if human is not None:
        out["human"] = human
    if options.human_score is not None:
        what = f"column {options.human_score!r} (--human-score)"
        out["judge_vs_human"] = _about(table, what, partial(_judge_section, ctx, tables))
    if options.correct is not None and options.groups:
        what = f"column {options.correct!r} (--correct)"
        out["subgroups"] = _about(table, what, partial(_subgroup_section, ctx))
    if options.run is not None:
        what = f"column {options.run!r} (--run), score column"
        out["runs"] = {
            col: _about(table, f"{what} {col!r}", partial(_run_section, ctx, col)) for col in scores
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


def _models(ctx: _Context) -> list[str]:
    return list(dict.fromkeys(str(ctx.table.text(r, ctx.options.model)) for r in ctx.primary))


def _cells(ctx: _Context, rows: Sequence[Row], column: str) -> dict[tuple[str, str], float | None]:
    """(item, model) → value; repeated runs are averaged, other repeats are an error."""
    t, o = ctx.table, ctx.options
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    seen: dict[tuple[str, str], str] = {}
    for row in rows:
        key = (str(t.text(row, o.item)), str(t.text(row, o.model)))
        if o.run is None and key in seen:
            raise UserError(
                f"{row.where}: item {key[0]!r} and model {key[1]!r} already appear at {seen[key]}; "
                "give one row per item and model (or name the --rater or --run column)"
            )
        seen.setdefault(key, row.where)
        value = t.number(row, column)
        if value is not None:
            sums[key].append(value)
    return {k: (sum(sums[k]) / len(sums[k]) if sums[k] else None) for k in seen}


def _score_table(ctx: _Context, column: str, *, higher_is_better: bool) -> ScoreTable:
    cells = _cells(ctx, ctx.primary, column)
    return ScoreTable.from_rows(((i, m, v) for (i, m), v in cells.items()), higher_is_better=higher_is_better)


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


def _model_stats(ctx: _Context, column: str, table: ScoreTable) -> JSON:
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


def _h2h_json(h: rankings.HeadToHead) -> JSON:
    return {
        "models": list(h.models),
        "rates": [list(r) for r in h.rates],
        "battles": [list(b) for b in h.battles],
    }


def _ranking_json(ctx: _Context, what: str, table: ScoreTable, skipped: str) -> JSON:
    """Mean rank (re-ranked per item, ties averaged), win rates and head-to-head matrices. With
    one model only the mean rank: the rest (``skipped``, named in the undefined entry) is None."""
    out: JSON = {"mean_rank": rankings.mean_ranks(table)}
    if not ctx.enough(f"{what}: {skipped}", len(table.models), 2, "models"):
        none: dict[str, float | None] = dict.fromkeys(table.models)
        return {
            **out,
            "win_rate": none,
            "win_rate_non_tied": dict(none),
            "head_to_head": None,
            "head_to_head_non_tied": None,
        }
    return {
        **out,
        "win_rate": rankings.win_rates(table),
        "win_rate_non_tied": rankings.win_rates(table, exclude_ties=True),
        "head_to_head": _h2h_json(rankings.head_to_head(table)),
        "head_to_head_non_tied": _h2h_json(rankings.head_to_head(table, exclude_ties=True)),
    }


def _is_binary(values: np.ndarray[Any, np.dtype[np.float64]]) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


def _pair(ctx: _Context, column: str, table: ScoreTable, a: int, b: int) -> JSON | None:
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
    ctx: _Context, table: ScoreTable, both: np.ndarray[Any, np.dtype[np.bool_]]
) -> list[str] | None:
    """The cluster (patient) of each item two models were both scored on; None unclustered."""
    clusters = ctx.clusters
    if clusters is None:
        return None
    return [clusters[i] for i, keep in zip(table.items, both, strict=True) if keep]


def _pairs(ctx: _Context, column: str, table: ScoreTable) -> list[JSON]:
    pairs = [
        p for a, b in combinations(range(len(table.models)), 2) if (p := _pair(ctx, column, table, a, b))
    ]
    for p, adj in zip(pairs, uncertainty.bonferroni([p["pvalue"] for p in pairs]), strict=True):
        p["pvalue_bonferroni"] = adj
    return pairs


def _score_section(ctx: _Context, column: str, table: ScoreTable) -> JSON:
    # with one model this records the undefined entry, and there are no pairs either
    ranking = _ranking_json(ctx, column, table, "win rates, head-to-head and paired comparisons")
    return {
        "higher_is_better": table.higher_is_better,
        "per_model": _model_stats(ctx, column, table),
        **ranking,
        "pairs": _pairs(ctx, column, table) if len(table.models) >= 2 else [],
    }


# --- the human reference (clinicians) -------------------------------------------------------------


def _kendall_json(k: rank_agreement.KendallAgreement) -> JSON:
    return {
        "mean_tau_b": k.mean,
        "ci": list(k.ci) if k.ci else None,
        "items": k.items,
        "pairs": k.pairs,
        "skipped_constant": len(k.skipped_constant),
        "skipped_incomplete": len(k.skipped_incomplete),
    }


def _human_section(ctx: _Context, tables: dict[str, ScoreTable]) -> JSON | None:
    o = ctx.options
    if o.human_rank is None:
        return None
    human = _score_table(ctx, o.human_rank, higher_is_better=False)
    ranking = _ranking_json(
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
            **_kendall_json(k),
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
    ctx: _Context, tables: dict[str, ScoreTable], agreements: dict[str, rank_agreement.KendallAgreement]
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


def _point_biserial(ctx: _Context, human: ScoreTable) -> JSON | None:
    o = ctx.options
    assert o.correct is not None
    correct = _cells(ctx, ctx.primary, o.correct)
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


def _rater_tables(ctx: _Context, column: str) -> dict[str, ScoreTable]:
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


def _rater_section(ctx: _Context, column: str) -> JSON:
    o = ctx.options
    per_rater = _rater_tables(ctx, column)
    out: JSON = {"raters": len(per_rater)}
    if len(per_rater) >= 2:
        k = rank_agreement.inter_rater_kendall(per_rater, level=o.level, resamples=o.resamples, seed=o.seed)
        out["inter_rater_kendall"] = _kendall_json(k)
    units = sorted({(i, m) for t in per_rater.values() for i in t.items for m in t.models})
    data = [[_cell(t, i, m) for i, m in units] for t in per_rater.values()]
    out["krippendorff_alpha_ordinal"] = ctx.guard(
        "Krippendorff's alpha", lambda: agreement.krippendorff_alpha(data, level_of_measurement="ordinal")
    )
    return out


def _cell(table: ScoreTable, item: str, model: str) -> float | None:
    if not table.has_item(item) or model not in table.models:
        return None
    return table.row(item)[table.models.index(model)]  # row() looks the item up in the table's index


# --- judge vs clinician scores (AutoMedEval) ------------------------------------------------------


def _judge_section(ctx: _Context, tables: dict[str, ScoreTable]) -> JSON:
    o = ctx.options
    assert o.human_score is not None
    human = _score_table(ctx, o.human_score, higher_is_better=True)
    out: JSON = {"column": o.human_score}
    for col, judge in tables.items():
        out[col] = _judge_vs_human(ctx, col, human, judge)
    if o.rater is not None:
        out["raters"] = _rater_section(ctx, o.human_score)
    return out


def _judge_vs_human(ctx: _Context, col: str, human: ScoreTable, judge: ScoreTable) -> JSON:
    models = [m for m in human.models if m in judge.models]
    items = [i for i in human.items if judge.has_item(i)]
    pairs = [
        (h, j)
        for i in items
        for m in models
        if (h := _cell(human, i, m)) is not None and (j := _cell(judge, i, m)) is not None
    ]
    hs, js = [p[0] for p in pairs], [p[1] for p in pairs]
    out: JSON = {"responses": len(pairs)}
    for name, fn in (("spearman", agreement.spearman), ("pearson", agreement.pearson)):
        what = f"{col}: {name} with {ctx.options.human_score}"
        enough = ctx.enough(what, len(pairs), 3, "responses with both scores")
        r = ctx.guard(what, partial(fn, js, hs)) if enough else None
        out[name] = None if r is None else {"r": r.statistic, "pvalue": r.pvalue}
    out.update(accuracy_2tuple=None, accuracy_triple=None, order_items=0, judge_missing=0, win_tie=[])
    if not ctx.enough(f"{col}: Accuracy 2-tuple / triple and win/tie rates", len(models), 2, "models"):
        return out
    ref = [_complete([_cell(human, i, m) for m in models]) for i in items]
    jud = [_complete([_cell(judge, i, m) for m in models]) for i in items]
    oa = rank_agreement.order_agreement(ref, jud)
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


def _complete(values: list[float | None]) -> list[float] | None:
    """An item's scores for order agreement: None (missing judge or reference) if any is missing."""
    return None if any(v is None for v in values) else [float(v) for v in values if v is not None]


def _shares(p: rankings.PairOutcome) -> JSON:
    return {"win": p.win_share(), "tie": p.tie_share(), "loss": p.loss_share(), "battles": p.battles}


# --- subgroups and runs --------------------------------------------------------------------------


def _subgroup_section(ctx: _Context) -> JSON:
    """Per model: is correctness independent of each attribute? Bonferroni over the attributes
    whose test is defined for that model."""
    o, t = ctx.options, ctx.table
    assert o.correct is not None
    out: JSON = {}
    for model in _models(ctx):
        rows, shares = _item_outcomes(ctx, model)
        if not rows:
            ctx.undefined.append(f"chi-square {model}: no response of {model} has a value in {o.correct!r}")
            out[model] = []
            continue
        # each item twice, correct with its share of correct runs and incorrect with the rest, so
        # an item counts once however many judge runs it had
        outcome = ["correct", "incorrect"] * len(rows)
        weights = [w for share in shares for w in (share, 1.0 - share)]
        tests: list[uncertainty.SubgroupChiSquare] = []
        for attr in o.groups:
            values = [v for r in rows for v in [t.text(r, attr)] * 2]
            found = ctx.guard(
                f"chi-square {model} by {attr}",
                partial(uncertainty.subgroup_chi_square, outcome, {attr: values}, weights=weights),
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


def _item_outcomes(ctx: _Context, model: str) -> tuple[list[Row], list[float]]:
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


def _run_section(ctx: _Context, column: str) -> JSON:
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
