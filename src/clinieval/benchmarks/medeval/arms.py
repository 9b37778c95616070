"""MedEval arms read back from their run folders, and the settings every statistic over them uses.

An arm is one ``clinieval medeval run`` folder (a model on one task with one shot setting, on the
test or the validation split) or a trained baseline's answers written as one. Kept apart from the
statistics so that the per-arm metrics (:mod:`.analysis`) and the comparisons between arms
(:mod:`.comparisons`) can both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.items import TASKS, TaskName
from clinieval.errors import UserError
from clinieval.records.runs import RunDir
from clinieval.records.sample_record import SampleRecord

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Arm:
    """One run folder read back: which model, task and setting, and its records.

    The setting is every task parameter the run recorded that changes what the model is asked or
    how its answer is scored: the number of examples and where they come from (the paper's own, or
    drawn from train with a seed), whether a rewriting query carries its ``Diagnostic:`` label,
    the qualified rule and what an absent code is asked as. Arms that differ in any of these are
    different settings, so validation matches a test arm only to its like."""

    path: Path
    model: str
    task: TaskName
    shots: int
    paper_examples: bool
    records: tuple[SampleRecord, ...]
    split: str = "test"
    """The split the arm answered: test (reported) or validation (only to choose settings on)."""
    shot_seed: int = 0
    """The seed the examples were drawn with (drawn examples only)."""
    rewrite_label: bool | None = None
    """Whether a rewriting query carried ``Diagnostic: Normal.|Abnormal.`` (None: not rewriting)."""
    qualified_rule: str | None = None
    """The label tasks' qualified rule (None: not a label task)."""
    absent_as: str | None = None
    """What a code the report never mentions was asked as (None: not code prediction)."""

    @property
    def family(self) -> str:
        """The paper's two families: adapted PLMs (trained baselines) and prompted LLMs."""
        return "adapted PLM" if self.model.startswith("baseline:") else "prompted LLM"

    @property
    def departures(self) -> tuple[str, ...]:
        """The prompt and scoring options that depart from the paper's (its labelled rewriting
        query, its qualified rule, absent codes as unknown), as the setting's name shows them."""
        out = []
        if self.rewrite_label is False:
            out.append("no Diagnostic: label")
        if self.qualified_rule not in (None, "paper"):
            out.append(f"{self.qualified_rule} qualified rule")
        if self.absent_as not in (None, "unknown"):
            out.append(f"absent codes asked as {self.absent_as}")
        return tuple(out)

    @property
    def setting(self) -> str:
        """The setting's name: shots and their source, then each departure from the paper's
        prompt or rule ("zero-shot", "3-shot (paper's examples)", "3-shot (drawn, seed 0)",
        "zero-shot, no Diagnostic: label")."""
        if self.model == "baseline:lead-sentence":
            return "extractive (first FINDINGS sentence)"
        if self.family == "adapted PLM":
            return "trained on the train split"
        if self.shots == 0:
            shots = "zero-shot"
        elif self.paper_examples:
            shots = f"{self.shots}-shot (paper's examples)"
        else:
            shots = f"{self.shots}-shot (drawn, seed {self.shot_seed})"
        return ", ".join((shots, *self.departures))


def _optional(params: JSON, key: str) -> str | None:
    value = params.get(key)
    return None if value is None else str(value)


def read_arm(path: Path, model: str | None = None) -> Arm:
    """A ``clinieval medeval run`` folder as an arm (refusing runs of other benchmarks); ``model``
    names its model in tables (default: the run's model spec; a suite passes its own names)."""
    run = RunDir.open(path)
    spec = run.manifest().get("spec", {})
    params = (spec.get("task") or {}).get("params") or {}
    task = params.get("task")
    if task not in TASKS:
        raise UserError(f"{path}: not a MedEval run (made by `clinieval medeval run`)")
    records = tuple(r for r in run.records() if r.repeat == 0)
    if not records:
        raise UserError(f"{path}: the run has no finished samples")
    model = model or str((spec.get("model") or {}).get("spec") or path.name)
    shots, paper = int(params.get("shots") or 0), bool(params.get("paper_examples"))
    label = params.get("rewrite_label")
    return Arm(
        path,
        model,
        task,
        shots,
        paper,
        records,
        str(params.get("split") or "test"),
        shot_seed=int(params.get("shot_seed") or 0),
        rewrite_label=None if label is None else bool(label),
        qualified_rule=_optional(params, "qualified_rule"),
        absent_as=_optional(params, "absent_as"),
    )


@dataclass(frozen=True, slots=True)
class Settings:
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    intervals: bool = True
    """False for breakdowns, which show point values (the CIs stay on the whole arm)."""
