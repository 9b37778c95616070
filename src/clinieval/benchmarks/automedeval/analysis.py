"""Several judges over one set, side by side: what ``clinieval automedeval analyze`` computes.

For each judge (a folder written by ``automedeval judge``): the parse rate; agreement with the
physicians (Accuracy_2-tuple and Accuracy_triple with percentile-bootstrap CIs over items,
response-level Spearman and Pearson with Fisher-z CIs); win/tie/loss per pair of judged models
beside the physicians'; the position and length bias rates; and, when the set has reference
rationales, BERTScore F1 of the judge's rationales against them. The best judge is the one with
the highest Accuracy_triple (the paper's headline; ties broken by Accuracy_2-tuple); every other
judge is tested against it over the same items: a paired t-test on the per-item share of pairs
ordered right (the paper's significance test), a paired-bootstrap CI of that difference, and
McNemar's test on the items' triple outcomes.

A statistic the data cannot define is None with its reason in ``undefined``, never NaN.
BARTScore is reported "not available": it needs a BART checkpoint (facebook/bart-large-cnn in the
paper) that is not installed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.benchmarks.automedeval.judging import Entry, judge_bias, mean_scores, read_verdicts
from clinieval.benchmarks.automedeval.records import JudgeItem
from clinieval.datasets import read_json
from clinieval.errors import UserError

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


def _per_item_order(
    items: Sequence[JudgeItem], judged: dict[str, list[float] | None]
) -> dict[str, tuple[float, float]]:
    """Item id -> (share of pairs ordered right, triple right 0/1), for items physicians rated."""
    from clinieval.analysis.rank_agreement import order_agreement

    out = {}
    for item in items:
        ref = item.human_scores()
        if any(s is None for s in ref):
            continue
        oa = order_agreement([[float(s) for s in ref if s is not None]], [judged.get(item.id)])
        out[item.id] = (oa.accuracy_2tuple, oa.accuracy_triple)
    return out


def _ci(values: Sequence[float], resamples: int, seed: int) -> list[float] | None:
    from clinieval.analysis.uncertainty import bootstrap_ci

    if len(values) < 2:
        return None
    low, high = bootstrap_ci(values, resamples=resamples, seed=seed)
    return [low, high]


def _correlation_ci(entry: JSON | None) -> None:
    from clinieval.analysis.agreement import fisher_z_ci

    if entry is None:
        return
    r, n = entry["r"], entry["n"]
    try:
        entry["ci"] = list(fisher_z_ci(r, n)) if r is not None and abs(r) < 1 else None
    except (UndefinedStatisticError, UserError):
        entry["ci"] = None


def _score_table(items: Sequence[JudgeItem], scores: dict[str, list[float] | None]) -> Any:
    from clinieval.analysis.rankings import ScoreTable

    rows = [
        (item.id, r.model, None if scores.get(item.id) is None else scores[item.id][j])  # type: ignore[index]
        for item in items
        for j, r in enumerate(item.responses)
    ]
    return ScoreTable.from_rows(rows)


def _human_scores(items: Sequence[JudgeItem]) -> dict[str, list[float] | None]:
    out: dict[str, list[float] | None] = {}
    for item in items:
        ref = item.human_scores()
        out[item.id] = None if any(s is None for s in ref) else [float(s) for s in ref if s is not None]
    return out


def _outcome(o: Any) -> JSON:
    n = o.wins + o.ties + o.losses
    return {
        "wins": o.wins, "ties": o.ties, "losses": o.losses,
        "win_rate": o.wins / n if n else None, "tie_rate": o.ties / n if n else None,
    }  # fmt: skip


def win_tie(items: Sequence[JudgeItem], scores: dict[str, list[float] | None]) -> list[JSON]:
    """Win/tie/loss of the first model against the second for every pair, over the items scored."""
    from clinieval.analysis.rankings import pair_outcomes

    return [
        {"model": o.model, "opponent": o.opponent, **_outcome(o)}
        for o in pair_outcomes(_score_table(items, scores))
    ]


def _same_models(items: Sequence[JudgeItem]) -> bool:
    return len({item.models for item in items}) == 1


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
) -> tuple[JSON, dict[str, tuple[float, float]]]:
    from clinieval.benchmarks.automedeval.agreement import judge_agreement

    _check_items(items, run)
    judged = mean_scores(items, run.entries)
    parsed = sum(e.scores is not None for e in run.entries)
    block: JSON = {
        "judge": run.name,
        "verdicts": len(run.entries),
        "parsed": parsed,
        "parse_rate": parsed / len(run.entries) if run.entries else None,
        "items_scored": sum(v is not None for v in judged.values()),
        "lookups": sum(len(e.lookups) for e in run.entries),
        "calls": run.summary.get("calls"),
    }
    per_item: dict[str, tuple[float, float]] = {}
    if rated:
        block["agreement"] = agreement = judge_agreement(items, judged)
        per_item = _per_item_order(items, judged)
        values = list(per_item.values())
        agreement["accuracy_2tuple_ci"] = _ci([v[0] for v in values], settings.resamples, settings.seed)
        agreement["accuracy_triple_ci"] = _ci([v[1] for v in values], settings.resamples, settings.seed)
        for name in ("spearman", "pearson"):
            _correlation_ci(agreement.get(name))
    if _same_models(items):
        block["win_tie"] = win_tie(items, judged)
    block["bias"] = judge_bias(items, run.entries)
    block["rationale"] = rationale_quality(items, run.entries) if settings.rationale else None
    return block, per_item


@dataclass(frozen=True)
class AnalysisSettings:
    resamples: int = 2000
    seed: int = 0
    rationale: bool = True
    """Score rationales with BERTScore (loads a small model: a few seconds)."""


def _paired_test(
    best: dict[str, tuple[float, float]], other: dict[str, tuple[float, float]], seed: int
) -> JSON:
    """The other judge against the best over the items both were measured on."""
    from scipy import stats

    from clinieval.analysis.uncertainty import mcnemar, paired_bootstrap

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
    m = mcnemar([other[i][1] for i in shared], [best[i][1] for i in shared])
    out["mcnemar_triple"] = {"b": m.b, "c": m.c, "pvalue": m.pvalue, "method": m.method}
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
        "bartscore": BARTSCORE_NOT_AVAILABLE,
        "settings": {"resamples": settings.resamples, "seed": settings.seed},
        "undefined": [],
        "warnings": [*warnings, *(w for r in runs if (w := r.summary.get("warning")))],
    }
    if not _same_models(items):
        result["undefined"].append(
            "win/tie rates: the items do not all have the same models in the same order"
        )
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
    rated = [s for s in humans.values() if s is not None]
    if not rated:
        return {}
    return {model: sum(s[j] for s in rated) / len(rated) for j, model in enumerate(items[0].models)}
