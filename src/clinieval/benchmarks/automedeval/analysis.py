"""Several judges over one set, side by side: what ``clinieval automedeval analyze`` computes.

For each judge (a folder written by ``automedeval judge``): the parse rate; agreement with the
physicians under the estimator asked for (``per-run``, the paper's and the default: each metric on
each run's own verdicts, averaged over the runs, with their spread; or ``mean-scores``: each
response's mean score over its parsed repeats) — Accuracy_2-tuple and Accuracy_triple with
percentile-bootstrap CIs over items, response-level Spearman and Pearson with CIs and p-values
that resample and permute whole items (the pooled Fisher-z CI and p-value beside them, labelled);
win/tie/loss per pair of judged models by the judge and by the physicians on the same items (or
(item, run) units), with n; the position and length bias figures with CIs and verdicts; and, when
the set has reference rationales, BERTScore F1 of the judge's rationales against them. The best
judge is the one with the highest Accuracy_triple (the paper's headline; ties broken by
Accuracy_2-tuple); every other judge is tested against it over the same items: a paired t-test on
the per-item share of pairs ordered right (averaged over runs under ``per-run``; the paper's
significance test), a paired-bootstrap CI of that difference, and McNemar's test on the triple
outcomes (per (item, run) unit, clustered by item, under ``per-run``).

A statistic the data cannot define is None with its reason in ``undefined``, never NaN.
BARTScore is reported "not available": it needs a BART checkpoint (facebook/bart-large-cnn in the
paper) that is not installed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.benchmarks.automedeval.judging import (
    ESTIMATORS,
    Entry,
    agreement_of,
    judge_bias,
    mean_scores,
    read_verdicts,
    run_scores,
)
from clinieval.datasets import read_json
from clinieval.errors import UserError

if TYPE_CHECKING:
    from clinieval.analysis.rankings import PairOutcome

JSON = dict[str, Any]

BARTSCORE_NOT_AVAILABLE = (
    "BARTScore: not available (it needs a BART checkpoint such as facebook/bart-large-cnn, which is not "
    "installed and cannot be downloaded here)"
)


@dataclass(frozen=True)
class JudgeRun:
    """One judge's verdicts on the set, and the name it is reported under."""

    name: str
    entries: list[Entry]
    summary: JSON


def read_judge_runs(folders: Sequence[Path]) -> list[JudgeRun]:
    """Each folder's verdicts, named by its judge (the folder's name where two judges share one)."""
    if not folders:
        raise UserError("give one or more folders written by `automedeval judge`")
    runs = []
    for folder in folders:
        summary_path = folder / "summary.json"
        summary = read_json(summary_path) if summary_path.is_file() else {}
        if not isinstance(summary, dict):
            raise UserError(f"{summary_path}: expected the JSON object `automedeval judge` writes")
        name = str((summary.get("judge") or {}).get("name") or folder.name)
        runs.append(JudgeRun(name, read_verdicts(folder), summary))
    names = [r.name for r in runs]
    return [
        JudgeRun(f"{r.name} [{f.name}]" if names.count(r.name) > 1 else r.name, r.entries, r.summary)
        for r, f in zip(runs, folders, strict=True)
    ]


def _check_items(items: Sequence[JudgeItem], run: JudgeRun) -> None:
    known = {i.id for i in items}
    strangers = sorted({e.item for e in run.entries} - known)
    if strangers:
        raise UserError(
            f"judge {run.name!r} has verdicts for item(s) not in the set: {', '.join(strangers[:5])}; "
            "give the set the judge ran on"
        )


ScoreSets = list[dict[str, list[float] | None]]
"""A judge's scores as the estimator sees them: one map per run (``per-run``), or one map of the
mean scores (``mean-scores``); item id -> scores in the item's order, None when missing."""


def score_sets(items: Sequence[JudgeItem], entries: Sequence[Entry], estimator: str) -> ScoreSets:
    if estimator not in ESTIMATORS:
        raise UserError(f"unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")
    return run_scores(items, entries) if estimator == "per-run" else [mean_scores(items, entries)]


@dataclass(frozen=True)
class PerItem:
    """Per rated item: (share of pairs ordered right, triple right) averaged over the score sets;
    per (item, set) unit: triple right 0/1 (what the paired tests read)."""

    items: dict[str, tuple[float, float]]
    units: dict[tuple[str, int], float]


def _per_item_order(items: Sequence[JudgeItem], sets: ScoreSets) -> PerItem:
    from clinieval.analysis.judge_vs_human import complete
    from clinieval.analysis.rank_agreement import order_agreement

    out: dict[str, tuple[float, float]] = {}
    units: dict[tuple[str, int], float] = {}
    for item in items:
        ref = complete(item.human_scores())
        if ref is None:
            continue
        shares, triples = [], []
        for r, scores in enumerate(sets):
            oa = order_agreement([ref], [scores.get(item.id)])
            shares.append(oa.accuracy_2tuple)
            triples.append(oa.accuracy_triple)
            units[(item.id, r)] = oa.accuracy_triple
        out[item.id] = (sum(shares) / len(shares), sum(triples) / len(triples))
    return PerItem(out, units)


def _ci(values: Sequence[float], resamples: int, seed: int) -> list[float] | None:
    from clinieval.analysis.uncertainty import bootstrap_ci

    if len(values) < 2:
        return None
    low, high = bootstrap_ci(values, resamples=resamples, seed=seed)
    return [low, high]


def _clustered_correlations(
    items: Sequence[JudgeItem], sets: ScoreSets, agreement: JSON, settings: AnalysisSettings
) -> None:
    """Each correlation's item-clustered CI and p-value (the figure itself is the estimator's),
    the pooled figure kept beside them as ``pooled``."""
    from clinieval.benchmarks.automedeval.agreement import correlations_clustered

    found = correlations_clustered(items, sets, resamples=settings.resamples, seed=settings.seed)
    for name in ("spearman", "pearson"):
        entry, clustered = agreement.get(name), found[name]
        if entry is None or clustered is None:
            continue
        entry.update({k: v for k, v in clustered.items() if k not in ("r", "why_no_ci")})
        if "why_no_ci" in clustered:
            agreement["undefined"].append(clustered["why_no_ci"])


def _score_table(items: Sequence[JudgeItem], scores: dict[str, list[float] | None]) -> Any:
    from clinieval.analysis.rankings import ScoreTable

    rows = [
        (item.id, model, value) for item in items for model, value in _by_model(item, scores.get(item.id))
    ]
    return ScoreTable.from_rows(rows)


def _by_model(item: JudgeItem, values: Sequence[float] | None) -> list[tuple[str, float | None]]:
    """An item's values as (model, value), models in name order: items may list their models in
    any order (the synthetic set shuffles them), and every table keys on the name, not the slot."""
    shown = [None] * len(item.models) if values is None else list(values)
    return sorted(zip(item.models, shown, strict=True))


def _human_scores(items: Sequence[JudgeItem]) -> dict[str, list[float] | None]:
    """Item id -> the physicians' mean scores, None unless every response was rated."""
    from clinieval.analysis.judge_vs_human import complete

    return {item.id: complete(item.human_scores()) for item in items}


def _outcome(o: PairOutcome) -> JSON:
    """One pair's counts and rates (rates over all battles, ties included; None without one)."""
    return {
        "model": o.model, "opponent": o.opponent, "wins": o.wins, "ties": o.ties, "losses": o.losses,
        "win_rate": o.win_share(), "tie_rate": o.tie_share(),
    }  # fmt: skip


def win_tie(items: Sequence[JudgeItem], scores: dict[str, list[float] | None]) -> list[JSON]:
    """Win/tie/loss of the first model against the second for every pair, over the items scored."""
    from clinieval.analysis.rankings import pair_outcomes

    return [_outcome(o) for o in pair_outcomes(_score_table(items, scores))]


def paired_win_tie(items: Sequence[JudgeItem], sets: ScoreSets) -> JSON:
    """Win/tie/loss per model pair by the judge and by the physicians on the same units: every
    (item, score set) whose responses the physicians all rated and the judge scored (under
    ``per-run``, an item counts once per run its verdict parsed, for both columns)."""
    from clinieval.analysis.rankings import ScoreTable, compare_pair_outcomes

    humans = _human_scores(items)
    rows_h: list[tuple[str, str, float | None]] = []
    rows_j: list[tuple[str, str, float | None]] = []
    scored: set[str] = set()
    units = 0
    for r, scores in enumerate(sets):
        for item in items:
            h, j = humans[item.id], scores.get(item.id)
            if h is None or j is None:
                continue
            unit = f"{item.id}\x1f{r}"
            rows_h += [(unit, m, v) for m, v in _by_model(item, h)]
            rows_j += [(unit, m, v) for m, v in _by_model(item, j)]
            scored.add(item.id)
            units += 1
    out: JSON = {"items": len(scored), "units": units, "physicians": [], "judge": []}
    if units:
        side_by_side = compare_pair_outcomes(ScoreTable.from_rows(rows_h), ScoreTable.from_rows(rows_j))
        out["physicians"] = [_outcome(p.human) for p in side_by_side]
        out["judge"] = [_outcome(p.judge) for p in side_by_side]
    return out


def runs_identical(entries: Sequence[Entry]) -> bool:
    """Two or more runs, and every item got the same scores (or the same failure) in each: a
    deterministic judge, whose spread across runs is 0 by construction, not a measurement."""
    if len({e.repeat for e in entries}) < 2:
        return False
    seen: dict[str, set[tuple[int, ...] | None]] = {}
    for e in entries:
        seen.setdefault(e.item, set()).add(None if e.scores is None else tuple(e.scores))
    return all(len(v) == 1 for v in seen.values())


def _same_models(items: Sequence[JudgeItem]) -> bool:
    """Every item answered by the same models (in whatever order it lists them)."""
    return len({tuple(sorted(item.models)) for item in items}) == 1


def rationale_quality(items: Sequence[JudgeItem], entries: Sequence[Entry]) -> JSON | None:
    """BERTScore F1 (all-MiniLM-L6-v2) of each parsed verdict's rationale against the item's
    reference rationale, averaged per item, then over items; None when no item has one."""
    from clinieval.scoring.text.embedding import BertScore

    reference = {i.id: i.rationale for i in items if i.rationale}
    pairs = [(e.item, e.rationale, reference[e.item]) for e in entries if e.rationale and e.item in reference]
    if not reference:
        return None
    if not pairs:
        return {"bertscore_f1": None, "items": 0, "verdicts": 0, "why": "no parsed verdict has a rationale"}
    f1 = BertScore().compute([p[1] for p in pairs], [[p[2]] for p in pairs])["bertscore_f1"].values
    per_item: dict[str, list[float]] = {}
    for (item, _, _), value in zip(pairs, f1, strict=True):
        per_item.setdefault(item, []).append(float(value))
    means = [sum(v) / len(v) for v in per_item.values()]
    return {
        "bertscore_f1": sum(means) / len(means),
        "items": len(means),
        "verdicts": len(pairs),
        "values": means,
    }


def _judge_block(
    items: Sequence[JudgeItem], run: JudgeRun, rated: bool, settings: AnalysisSettings
) -> tuple[JSON, PerItem]:
    _check_items(items, run)
    sets = score_sets(items, run.entries, settings.estimator)
    parsed = sum(e.scores is not None for e in run.entries)
    order = run.summary.get("order")
    block: JSON = {
        "judge": run.name,
        "verdicts": len(run.entries),
        "parsed": parsed,
        "parse_rate": parsed / len(run.entries) if run.entries else None,
        "runs": len({e.repeat for e in run.entries}),
        "runs_identical": runs_identical(run.entries),
        "order": order,
        "items_scored": sum(v is not None for v in mean_scores(items, run.entries).values()),
        "lookups": sum(len(e.lookups) for e in run.entries),
        "calls": run.summary.get("calls"),
    }
    per_item = PerItem({}, {})
    if rated:
        block["agreement"] = agreement = agreement_of(items, run.entries, settings.estimator)
        per_item = _per_item_order(items, sets)
        values = list(per_item.items.values())
        agreement["accuracy_2tuple_ci"] = _ci([v[0] for v in values], settings.resamples, settings.seed)
        agreement["accuracy_triple_ci"] = _ci([v[1] for v in values], settings.resamples, settings.seed)
        _clustered_correlations(items, sets, agreement, settings)
        if _same_models(items):
            block["win_tie"] = paired_win_tie(items, sets)
    elif _same_models(items):
        means = mean_scores(items, run.entries)
        block["win_tie"] = {
            "items": sum(v is not None for v in means.values()),
            "physicians": [],
            "judge": win_tie(items, means),
        }
    block["bias"] = judge_bias(
        items, run.entries, order if isinstance(order, str) else None,
        resamples=settings.resamples, seed=settings.seed,
    )  # fmt: skip
    block["rationale"] = rationale_quality(items, run.entries) if settings.rationale else None
    return block, per_item


@dataclass(frozen=True)
class AnalysisSettings:
    resamples: int = 2000
    seed: int = 0
    rationale: bool = True
    """Score rationales with BERTScore (loads a small model: a few seconds)."""
    estimator: str = "per-run"
    """How repeats become one figure (:data:`~clinieval.benchmarks.automedeval.judging.ESTIMATORS`):
    per-run (the paper's) or mean-scores."""


def _paired_test(best_item: PerItem, other_item: PerItem, seed: int) -> JSON:
    """The other judge against the best over the items both were measured on."""
    from scipy import stats

    from clinieval.analysis.uncertainty import mcnemar, paired_bootstrap

    best, other = best_item.items, other_item.items
    shared = sorted(set(best) & set(other))
    out: JSON = {"items": len(shared), "undefined": []}
    if len(shared) < 2:
        out["undefined"].append("paired tests: fewer than 2 items in common")
        return out
    a = [other[i][0] for i in shared]
    b = [best[i][0] for i in shared]
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    if all(d == diffs[0] for d in diffs):
        out["t_test"] = None
        out["undefined"].append("t-test: the per-item differences are all equal (no variance)")
    else:
        t = stats.ttest_rel(a, b)
        out["t_test"] = {"statistic": float(t.statistic), "pvalue": float(t.pvalue), "df": len(shared) - 1}
    boot = paired_bootstrap(a, b, seed=seed)
    out["difference_2tuple"] = {"mean": boot.mean_difference, "ci": [boot.ci_low, boot.ci_high]}
    units = sorted(set(best_item.units) & set(other_item.units))
    clustered = len({u[0] for u in units}) < len(units)  # several runs per item: cluster by item
    m = mcnemar(
        [other_item.units[u] for u in units],
        [best_item.units[u] for u in units],
        clusters=[u[0] for u in units] if clustered else None,
    )
    out["mcnemar_triple"] = {"b": m.b, "c": m.c, "pvalue": m.pvalue, "method": m.method, "units": len(units)}
    return out


def _best(blocks: Sequence[JSON]) -> int | None:
    scored = [
        (b["agreement"]["accuracy_triple"], b["agreement"]["accuracy_2tuple"], -i)
        for i, b in enumerate(blocks)
        if b.get("agreement")
    ]
    return -max(scored)[2] if scored else None


def analyze(
    items: Sequence[JudgeItem],
    runs: Sequence[JudgeRun],
    settings: AnalysisSettings | None = None,
    warnings: Sequence[str] = (),
) -> JSON:
    """Everything above, as one JSON-ready dict (the report is built from it alone)."""
    from clinieval.benchmarks.automedeval.agreement import physician_reliability

    settings = settings or AnalysisSettings()
    rated = any(r.ratings for item in items for r in item.responses)
    humans = _human_scores(items)
    result: JSON = {
        "items": len(items),
        "responses_per_item": sorted({len(i.responses) for i in items}),
        "rated": rated,
        "physicians": physician_reliability(items) if rated else None,
        "physician_win_tie": win_tie(items, humans) if rated and _same_models(items) else None,
        "model_means": _model_means(items, humans) if rated and _same_models(items) else None,
        "physician_win_tie_items": sum(h is not None for h in humans.values()) if rated else 0,
        "bartscore": BARTSCORE_NOT_AVAILABLE,
        "estimator": settings.estimator,
        "settings": {"resamples": settings.resamples, "seed": settings.seed, "estimator": settings.estimator},
        "undefined": [],
        "warnings": [*warnings, *(w for r in runs if (w := r.summary.get("warning")))],
    }
    if not _same_models(items):
        result["undefined"].append("win/tie rates: the items do not all have the same models")
    pairs = [_judge_block(items, run, rated, settings) for run in runs]
    blocks = [b for b, _ in pairs]
    best = _best(blocks)
    result["best"] = None if best is None else blocks[best]["judge"]
    for i, (block, per_item) in enumerate(pairs):
        if best is not None and i != best:
            block["vs_best"] = _paired_test(pairs[best][1], per_item, settings.seed)
    result["judges"] = blocks
    if not rated:
        result["undefined"].append("agreement with physicians: the set has no physician ratings")
    return result


def _model_means(items: Sequence[JudgeItem], humans: dict[str, list[float] | None]) -> dict[str, float]:
    """Each model's mean physician score over the items whose responses were all rated (none such:
    an empty table)."""
    sums: dict[str, float] = {}
    count = 0
    for item in items:
        scores = humans.get(item.id)
        if scores is None:
            continue
        count += 1
        for model, value in zip(item.models, scores, strict=True):
            sums[model] = sums.get(model, 0.0) + value
    return {model: total / count for model, total in sorted(sums.items())} if count else {}
