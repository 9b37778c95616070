"""MedEval's numbers from arm run directories: per task x model x shot setting, with CIs.

Every arm is one ``clinieval medeval run`` folder (a model on one task with one shot setting). Each
is measured by its task's kind of answer (:mod:`.answers`, :mod:`.arm_metrics`: accuracy and
macro-F1, average accuracy and exact match, ROUGE and BLEU), twice, as the paper's "qualified rate"
demands: over the qualified answers only, and with unqualified answers (and failed calls) counted
wrong; the qualified rate sits beside both. Rewriting's classifier deltas are computed when
classifiers are given (:mod:`clinieval.benchmarks.medeval.rewriting`). This module gathers the
arms: each one's result, its per-domain headline, the k-shot curves, the per-level averages and the
comparisons (:mod:`.comparisons`).

Statistics the data cannot define (no qualified answer, one item) are None with the reason in
``undefined``, never NaN.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.arm_metrics import counts
from clinieval.benchmarks.medeval.arm_metrics import macro_f1 as macro_f1
from clinieval.benchmarks.medeval.arms import Arm as Arm
from clinieval.benchmarks.medeval.arms import Settings as Settings
from clinieval.benchmarks.medeval.arms import read_arm as read_arm
from clinieval.benchmarks.medeval.items import TaskName
from clinieval.benchmarks.medeval.task_table import TASK_TABLE
from clinieval.records.sample_record import SampleRecord

JSON = dict[str, Any]


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
        **counts(arm),
        "metrics": TASK_TABLE[arm.task].answers.metrics(arm, s),
    }
    out["by_domain"] = _by_domain(arm, s)
    return out


MAIN_METRIC: Mapping[TaskName, str] = {t.name: t.main_metric for t in TASK_TABLE.values()}
"""Each task's headline number (counted-wrong view) for curves and breakdowns."""


def main_value(result: JSON) -> float | None:
    """The headline number of an arm result (the unqualified-counted-wrong view)."""
    entry = TASK_TABLE[result["task"]]
    value = entry.answers.headline(result["metrics"], entry.main_metric)
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
        metrics = TASK_TABLE[arm.task].answers.metrics(part, replace(s, intervals=False))
        out[domain] = {"items": len(records), "value": main_value({"task": arm.task, "metrics": metrics})}
    return out


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
        if not TASK_TABLE[arm.task].classifier_deltas:
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
    groups: dict[tuple[str, str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for r in results:
        value = main_value(r)
        if value is not None and r.get("split", "test") == "test":
            entry = TASK_TABLE[r["task"]]
            groups[(r["model"], r["setting"], entry.level, entry.main_metric)].append((r["task"], value))
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
