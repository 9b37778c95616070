"""MedEval's numbers from arm run directories: per task x model x shot setting, with CIs.

Every arm is one ``clinieval medeval run`` folder (a model on one task with one shot setting). For
each, the paper's metrics are computed twice, as the paper's "qualified rate" demands: over the
qualified answers only, and with unqualified answers (and failed calls) counted wrong; the qualified
rate sits beside both. Intervals are seeded percentile bootstraps over items.

* abnormality, ambiguity: accuracy and macro-F1;
* code prediction: average accuracy over the 14 observations and exact match rate;
* summarisation: ROUGE-1, ROUGE-2, ROUGE-L (F, x100), their sum, corpus BLEU-4;
* rewriting: corpus BLEU-4 against the clinician rewrite (the classifier deltas are computed when
  classifiers are given, see :mod:`clinieval.benchmarks.medeval.rewriting`).

Statistics the data cannot define (no qualified answer, one item) are None with the reason in
``undefined``, never NaN.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.arms import Arm as Arm
from clinieval.benchmarks.medeval.arms import Settings as Settings
from clinieval.benchmarks.medeval.arms import read_arm as read_arm
from clinieval.benchmarks.medeval.parsing import LABELS
from clinieval.benchmarks.medeval.prompts import TaskName
from clinieval.errors import UserError
from clinieval.sample_record import SampleRecord

JSON = dict[str, Any]


# --- small statistics ------------------------------------------------------------------------


def _mean_ci(values: Sequence[float], s: Settings, scale: float = 1.0) -> JSON:
    from clinieval.analysis.uncertainty import bootstrap_ci

    if not values:
        return {"value": None, "ci": None, "n": 0}
    mean = sum(values) / len(values)
    ci = None
    if s.intervals and len(values) > 1:
        low, high = bootstrap_ci(values, level=s.level, resamples=s.resamples, seed=s.seed)
        ci = [scale * low, scale * high]
    return {"value": scale * mean, "ci": ci, "n": len(values)}


def macro_f1(gold: Sequence[str], predicted: Sequence[str | None], classes: Sequence[str]) -> float:
    """Macro-F1 over ``classes`` with an unqualified answer (None) wrong for its item: the shared
    implementation in :mod:`clinieval.scoring.classification`, never a second one."""
    from clinieval.scoring.classification import precision_recall_f1

    f1 = precision_recall_f1(gold, predicted, average="macro", labels=classes).f1
    return 0.0 if f1 is None else f1


# --- one arm ---------------------------------------------------------------------------------


def _score_of(arm: Arm, record: SampleRecord) -> tuple[float | None, JSON]:
    score = record.scores.get(f"medeval_{arm.task}")
    if score is None:
        raise UserError(f"{arm.path}: sample {record.sample.id} has no medeval_{arm.task} score")
    return score.value, dict(score.metadata or {})


def _counts(arm: Arm) -> JSON:
    failed = sum(1 for r in arm.records if r.output is None or not r.output.ok)
    qualified = sum(1 for r in arm.records if _score_of(arm, r)[1].get("qualified"))
    n = len(arm.records)
    return {"items": n, "failed": failed, "qualified": qualified, "qualified_rate": qualified / n}


def _label_metrics(arm: Arm, s: Settings) -> JSON:
    classes = LABELS[arm.task]
    gold = [str(r.sample.target) for r in arm.records]
    meta = [_score_of(arm, r)[1] for r in arm.records]
    predicted = [m.get("label") if m.get("qualified") else None for m in meta]
    right = [float(p == g) for p, g in zip(predicted, gold, strict=True)]
    keep = [i for i, p in enumerate(predicted) if p is not None]
    out: JSON = {
        "accuracy": {
            "counted_wrong": _mean_ci(right, s, 100),
            "qualified": _mean_ci([right[i] for i in keep], s, 100),
        },
        "macro_f1": {
            "counted_wrong": 100 * macro_f1(gold, predicted, classes),
            "qualified": 100 * macro_f1([gold[i] for i in keep], [predicted[i] for i in keep], classes)
            if keep
            else None,
        },
    }
    return out


def _observation_credit(arm: Arm) -> list[float]:
    """Per report, the share of the 14 observations the answer got right, counting every tuple it
    gave even when it is unqualified (13 right and one missing is 13/14 here, 0 in the paper's
    all-or-nothing figure). A failed call is 0."""
    from clinieval.scoring.classification import multilabel_scores

    gold = [dict(r.sample.metadata["codes"]) for r in arm.records]
    said = [
        dict(_score_of(arm, r)[1].get("predictions") or {}) if r.output is not None and r.output.ok else None
        for r in arm.records
    ]
    shares = []
    for g, p in zip(gold, said, strict=True):
        shares.append(multilabel_scores([g], [p]).mean_item_accuracy)
    return shares


def _code_metrics(arm: Arm, s: Settings) -> JSON:
    values = [_score_of(arm, r) for r in arm.records]
    accuracy = [v or 0.0 for v, _ in values]
    exact = [float(bool(m.get("exact"))) for _, m in values]
    keep = [i for i, (_, m) in enumerate(values) if m.get("qualified")]
    credit = _observation_credit(arm)
    return {
        "per_observation_credit": {
            "counted_wrong": _mean_ci(credit, s, 100),
            "exact_match": _mean_ci([float(c == 1.0) for c in credit], s, 100),
        },
        "average_accuracy": {
            "counted_wrong": _mean_ci(accuracy, s, 100),
            "qualified": _mean_ci([accuracy[i] for i in keep], s, 100),
        },
        "exact_match": {
            "counted_wrong": _mean_ci(exact, s, 100),
            "qualified": _mean_ci([exact[i] for i in keep], s, 100),
        },
    }


def _answers(arm: Arm) -> tuple[list[str], list[str], list[bool]]:
    texts = [r.output.text.strip() if r.output is not None and r.output.ok else "" for r in arm.records]
    references = [str(r.sample.target or "") for r in arm.records]
    return texts, references, [bool(t) for t in texts]


def _nlg_metrics(arm: Arm, s: Settings) -> JSON:
    from clinieval.scoring.text.registry import score_texts

    texts, refs, qualified = _answers(arm)
    out: JSON = {}
    for view, keep in (
        ("counted_wrong", list(range(len(texts)))),
        ("qualified", [i for i, q in enumerate(qualified) if q]),
    ):
        if not keep:
            out[view] = None
            continue
        preds, golds = [texts[i] for i in keep], [refs[i] for i in keep]
        metrics = score_texts(("rouge1", "rouge2", "rougeL", "bleu"), preds, golds)
        rouge = {k: [100 * v for v in metrics[k].values] for k in ("rouge1", "rouge2", "rougeL")}
        total = [a + b + c for a, b, c in zip(rouge["rouge1"], rouge["rouge2"], rouge["rougeL"], strict=True)]
        out[view] = {
            **{k: _mean_ci(v, s) for k, v in rouge.items()},
            "rouge_sum": _mean_ci(total, s),
            "bleu4": metrics["bleu"].corpus,
        }
    return out


def arm_result(arm: Arm, s: Settings) -> JSON:
    """Everything about one arm: counts, the task's metrics in both views, and per-domain main metric."""
    out: JSON = {
        "path": str(arm.path),
        "model": arm.model,
        "family": arm.family,
        "task": arm.task,
        "setting": arm.setting,
        "shots": arm.shots,
        "split": arm.split,
        **_counts(arm),
    }
    if arm.task in LABELS:
        out["metrics"] = _label_metrics(arm, s)
    elif arm.task == "codes":
        out["metrics"] = _code_metrics(arm, s)
    else:
        out["metrics"] = _nlg_metrics(arm, s)
    out["by_domain"] = _by_domain(arm, s)
    return out


MAIN_METRIC: dict[TaskName, str] = {
    "abnormality": "accuracy",
    "ambiguity": "accuracy",
    "codes": "average_accuracy",
    "summarization": "rougeL",
    "rewriting": "bleu4",
}
"""Each task's headline number (counted-wrong view) for curves and breakdowns."""


def main_value(result: JSON) -> float | None:
    """The headline number of an arm result (the unqualified-counted-wrong view)."""
    metric = result["metrics"]
    key = MAIN_METRIC[result["task"]]
    if result["task"] in ("summarization", "rewriting"):
        view = metric.get("counted_wrong")
        value = None if view is None else view[key]
    else:
        value = metric[key]["counted_wrong"]
    if isinstance(value, dict):
        value = value["value"]
    return None if value is None else float(value)


def _by_domain(arm: Arm, s: Settings) -> JSON:
    groups: dict[str, list[SampleRecord]] = defaultdict(list)
    for r in arm.records:
        groups[str(r.sample.metadata.get("domain") or "")].append(r)
    if len(groups) < 2:
        return {}
    out: JSON = {}
    for domain, records in sorted(groups.items()):
        part = replace(arm, records=tuple(records))
        result = {"task": arm.task, "metrics": _metrics_only(part, s)}
        out[domain] = {"items": len(records), "value": main_value(result)}
    return out


def _metrics_only(arm: Arm, s: Settings) -> JSON:
    quick = replace(s, intervals=False)
    if arm.task in LABELS:
        return _label_metrics(arm, quick)
    if arm.task == "codes":
        return _code_metrics(arm, quick)
    return _nlg_metrics(arm, quick)


# --- all arms --------------------------------------------------------------------------------


def medeval_analysis(
    arms: Sequence[Arm], s: Settings = Settings(), classifiers: tuple[Path, Path] | None = None
) -> JSON:
    """Every test arm's result, the k-shot curves (task -> model -> setting -> headline value), the
    comparisons (settings chosen on validation arms, rows paired on the same items; see
    :mod:`clinieval.benchmarks.medeval.comparisons`), and what could not be computed.
    ``classifiers`` (the ambiguity and the abnormality classifier's folders) give each rewriting
    arm its ΔAcc_am and ΔAcc_ab."""
    from clinieval.benchmarks.medeval import comparisons
    from clinieval.benchmarks.medeval.rewriting import classifier_deltas

    tested = [a for a in arms if a.split != "validation"]
    validation = [a for a in arms if a.split == "validation"]
    results = [arm_result(a, s) for a in tested]
    undefined: list[str] = []
    for arm, result in zip(tested, results, strict=True):
        if arm.task != "rewriting":
            continue
        if classifiers is None:
            undefined.append(
                f"{arm.model}, {arm.setting}: ΔAcc_am and ΔAcc_ab need trained classifiers "
                "(`clinieval medeval train`, then `analyze --classifiers DIR`)"
            )
        else:
            result["classifier_deltas"] = classifier_deltas(
                arm.records, *classifiers, resamples=s.resamples, seed=s.seed
            )
    curves: dict[str, dict[str, dict[str, float | None]]] = defaultdict(lambda: defaultdict(dict))
    for r in results:
        if r["family"] == "prompted LLM":  # a trained baseline has no shot setting to plot
            curves[r["task"]][r["model"]][r["setting"]] = main_value(r)
    return {
        "options": {"level": s.level, "resamples": s.resamples, "seed": s.seed},
        "arms": results,
        "validation_arms": [
            {
                "model": a.model,
                "task": a.task,
                "setting": a.setting,
                "items": len(a.records),
                "path": str(a.path),
            }
            for a in validation
        ],
        "chosen": [c.describe() | {"task": t} for (_, t), c in sorted(comparisons.choices(arms).items())],
        "families": comparisons.family_comparison(arms, s),
        "levels": by_level(results),
        "zero_vs_few": comparisons.zero_vs_few(arms, s),
        "curves": {t: {m: dict(v) for m, v in by_model.items()} for t, by_model in curves.items()},
        "main_metric": dict(MAIN_METRIC),
        "undefined": undefined,
    }


def by_level(results: Sequence[JSON]) -> list[JSON]:
    """Per model and setting, the mean headline value of the tasks of one level that share a metric
    (the paper's per-level averages, without averaging accuracy with BLEU or ROUGE)."""
    from clinieval.benchmarks.medeval.prompts import SENTENCE_TASKS

    groups: dict[tuple[str, str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for r in results:
        value = main_value(r)
        if value is not None and r.get("split", "test") == "test":
            level = "sentence" if r["task"] in SENTENCE_TASKS else "report"
            groups[(r["model"], r["setting"], level, MAIN_METRIC[r["task"]])].append((r["task"], value))
    return [
        {
            "model": model,
            "setting": setting,
            "level": level,
            "metric": metric,
            "tasks": [t for t, _ in found],
            "value": sum(v for _, v in found) / len(found),
        }
        for (model, setting, level, metric), found in groups.items()
        if len(found) > 1
    ]
