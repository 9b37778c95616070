"""MedEval's comparisons between arms, made the way the paper makes them and a reviewer accepts them.

Three rules hold for every comparison here:

* **Settings are chosen on validation, never on test.** The paper picks prompts on the validation
  split and reports test. When a model ran a task in several settings (zero-shot, k-shot) and each
  also ran on validation (``medeval run --split validation``), the setting with the best validation
  score is taken and its *test* score reported. A setting is every option that changes the prompt
  or the scoring (:class:`~.arms.Arm`: shots, the examples' source and seed, the rewriting label,
  the qualified rule, absent codes), so a test arm is matched to its own validation arm only.
  Without validation runs nothing is chosen: the paper's own setting (its number of examples, its
  own examples over drawn ones, its prompt; fixed before any result) is used, whatever order the
  arms were read in, and the report says so. A test score never decides which arm is shown.
* **Rows are compared on the same items, paired.** Arms may cover different items (``--limit``,
  failed calls, baselines that answer the whole test split); a comparison keeps only the items every
  compared arm answered, says how many (``n``) and how many it dropped, and gives each side's mean
  with a 95% bootstrap CI and the paired difference with its CI and p-value.
* **No average mixes metrics** (:func:`clinieval.benchmarks.medeval.analysis.by_level`).

Per-item values are each task's per-answer score with unqualified answers and failed calls counted
wrong (0): accuracy for the label tasks, the share of the 14 observations right (all-or-nothing per
report, as the paper) for codes, ROUGE-L F for summaries and sentence BLEU-4 for rewrites (the
corpus BLEU-4 of the task tables is not defined per item).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clinieval.benchmarks.medeval.arms import Arm, Settings
from clinieval.benchmarks.medeval.items import TaskName
from clinieval.benchmarks.medeval.task_table import TASK_TABLE

if TYPE_CHECKING:
    from clinieval.records.sample_record import SampleRecord

JSON = dict[str, Any]

FAMILIES = ("adapted PLM", "prompted LLM")


def record_score(task: TaskName, record: SampleRecord) -> float | None:
    """One record's score for ``task`` on 0-100, an unqualified answer 0; None when the record
    has no score for it (its model call failed before scoring)."""
    score = record.scores.get(f"medeval_{task}")
    return None if score is None else TASK_TABLE[task].item_scale * (score.value or 0.0)


def per_item(arm: Arm) -> dict[str, float]:
    """Sample id -> the arm's per-item score on 0-100, failed calls and unqualified answers as 0."""
    return {r.sample.id: record_score(arm.task, r) or 0.0 for r in arm.records}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True, slots=True)
class Choice:
    """The arm a model is represented by on one task, and how it was chosen."""

    arm: Arm
    how: str
    validation: dict[str, float]
    """Setting -> validation score of each candidate (empty when none ran on validation)."""

    def describe(self) -> JSON:
        return {
            "model": self.arm.model,
            "setting": self.arm.setting,
            "chosen_by": self.how,
            "validation": self.validation,
        }


def _paper_rank(arm: Arm) -> tuple[int, bool, int, int, int, str]:
    """How close an arm is to the paper's own setting, lowest first: its number of examples (or its
    own examples), else zero-shot, else the fewest examples; then the paper's own examples over
    drawn ones; then the fewest departures from its prompt and rule; then a fixed order (shots,
    seed, name), so the pick never depends on the order the arms were read in."""
    paper_shots = TASK_TABLE[arm.task].paper_shots
    place = 0 if arm.paper_examples or arm.shots == paper_shots else 1 if arm.shots == 0 else 2
    return (place, not arm.paper_examples, len(arm.departures), arm.shots, arm.shot_seed, arm.setting)


def _paper_setting(candidates: Sequence[Arm]) -> Arm:
    return min(candidates, key=_paper_rank)


def choose(candidates: Sequence[Arm], validation: Sequence[Arm]) -> Choice:
    """One model's test arm for one task among its settings, chosen on validation (see the module)."""
    first = candidates[0]
    if len(candidates) == 1:
        return Choice(first, "the only setting run", {})
    scores: dict[str, float] = {}
    for arm in candidates:
        match = [v for v in validation if v.setting == arm.setting]
        if match:
            scores[arm.setting] = _mean(list(per_item(match[0]).values()))
    if len(scores) == len(candidates):
        best = min(candidates, key=lambda a: (-scores[a.setting], a.shots, _paper_rank(a)))
        return Choice(best, "best validation score", scores)
    picked = _paper_setting(candidates)
    missing = len(candidates) - len(scores)
    how = f"the paper's setting, fixed in advance ({missing} of {len(candidates)} without a validation run)"
    return Choice(picked, how, scores)


def choices(arms: Sequence[Arm]) -> dict[tuple[str, TaskName], Choice]:
    """Per (model, task): the chosen test arm. Validation arms only inform the choice."""
    tests: dict[tuple[str, TaskName], list[Arm]] = defaultdict(list)
    vals: dict[tuple[str, TaskName], list[Arm]] = defaultdict(list)
    for a in arms:
        (vals if a.split == "validation" else tests)[(a.model, a.task)].append(a)
    return {key: choose(found, vals.get(key, [])) for key, found in tests.items()}


def _side(values: Sequence[float], s: Settings) -> JSON:
    from clinieval.analysis.uncertainty import bootstrap_ci

    ci = None
    if len(values) > 1:
        low, high = bootstrap_ci(values, level=s.level, resamples=s.resamples, seed=s.seed)
        ci = [low, high]
    return {"value": _mean(values), "ci": ci}


def paired(sides: Mapping[str, Mapping[str, float]], s: Settings) -> JSON:
    """Each side's mean over the items *all* sides answered, with CIs, and (for two sides) the
    paired difference first minus second. ``dropped``: items a side answered that not all did."""
    from clinieval.analysis.uncertainty import paired_bootstrap

    names = list(sides)
    common = sorted(set.intersection(*(set(v) for v in sides.values())))
    out: JSON = {
        "n": len(common),
        "dropped": {k: len(v) - len(common) for k, v in sides.items()},
        "sides": {k: _side([v[i] for i in common], s) if common else None for k, v in sides.items()},
        "difference": None,
    }
    if len(names) == 2 and len(common) > 1:
        a, b = ([sides[k][i] for i in common] for k in names)
        boot = paired_bootstrap(a, b, level=s.level, resamples=s.resamples, seed=s.seed)
        out["difference"] = {
            "of": f"{names[0]} minus {names[1]}",
            "value": boot.mean_difference,
            "ci": [boot.ci_low, boot.ci_high],
            "p": boot.pvalue,
        }
    return out


def _family_items(chosen: Sequence[Choice]) -> dict[str, float]:
    """A family's per-item value: the mean over its models' chosen arms, on the items all answered."""
    tables = [per_item(c.arm) for c in chosen]
    common = set.intersection(*(set(t) for t in tables))
    return {i: _mean([t[i] for t in tables]) for i in common}


def family_comparison(arms: Sequence[Arm], s: Settings) -> JSON:
    """Per task: adapted PLMs vs prompted LLMs, each family the average of its models (each at its
    chosen setting, as the paper averages per family), on the same test items, paired."""
    chosen = choices(arms)
    out: JSON = {}
    for task in sorted({t for _, t in chosen}):
        members = {
            f: [c for (_, t), c in chosen.items() if t == task and c.arm.family == f] for f in FAMILIES
        }
        if not all(members.values()):
            continue
        sides = {f: _family_items(members[f]) for f in FAMILIES}
        out[task] = {
            "metric": TASK_TABLE[task].item_metric,
            "split": "test",
            **paired({"prompted LLM": sides["prompted LLM"], "adapted PLM": sides["adapted PLM"]}, s),
            "members": {f: [c.describe() for c in members[f]] for f in FAMILIES},
        }
    return out


def zero_vs_few(arms: Sequence[Arm], s: Settings) -> list[JSON]:
    """Per prompted model and task: zero-shot against its few-shot setting (chosen on validation
    among the few-shot ones, else the paper's), on the same test items, paired. The zero-shot arm
    is the one with the few-shot arm's other options (the same rewriting label, qualified rule,
    absent codes), so only the examples differ; else the one closest to the paper's."""
    tests: dict[tuple[str, TaskName], list[Arm]] = defaultdict(list)
    vals: dict[tuple[str, TaskName], list[Arm]] = defaultdict(list)
    for a in arms:
        if a.family == "prompted LLM":
            (vals if a.split == "validation" else tests)[(a.model, a.task)].append(a)
    rows = []
    for (model, task), found in sorted(tests.items()):
        zero = [a for a in found if a.shots == 0]
        few = [a for a in found if a.shots > 0]
        if not zero or not few:
            continue
        pick = choose(few, [v for v in vals.get((model, task), []) if v.shots > 0])
        like = [a for a in zero if a.departures == pick.arm.departures]
        base = _paper_setting(like or zero)
        compared = paired({"few-shot": per_item(pick.arm), "zero-shot": per_item(base)}, s)
        rows.append(
            {
                "model": model,
                "task": task,
                "metric": TASK_TABLE[task].item_metric,
                "few_shot": pick.describe(),
                "zero_shot": {"setting": base.setting},
                **compared,
            }
        )
    return rows
