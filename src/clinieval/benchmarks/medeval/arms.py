"""MedEval arms read back from their run folders, and the settings every statistic over them uses.

An arm is one ``clinieval medeval run`` folder (a model on one task with one shot setting, on the
test or the validation split) or a trained baseline's answers written as one. Kept apart from the
statistics so that the per-arm metrics (:mod:`.analysis`) and the comparisons between arms
(:mod:`.comparisons`) can both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clinieval.benchmarks.medeval.items import TASKS, TaskName
from clinieval.errors import UserError
from clinieval.runs import RunDir
from clinieval.sample_record import SampleRecord


@dataclass(frozen=True, slots=True)
class Arm:
    """One run folder read back: which model, task and shot setting, and its records."""

    path: Path
    model: str
    task: TaskName
    shots: int
    paper_examples: bool
    records: tuple[SampleRecord, ...]
    split: str = "test"
    """The split the arm answered: test (reported) or validation (only to choose settings on)."""

    @property
    def family(self) -> str:
        """The paper's two families: adapted PLMs (trained baselines) and prompted LLMs."""
        return "adapted PLM" if self.model.startswith("baseline:") else "prompted LLM"

    @property
    def setting(self) -> str:
        if self.model == "baseline:lead-sentence":
            return "extractive (first FINDINGS sentence)"
        if self.family == "adapted PLM":
            return "trained on the train split"
        if self.shots == 0:
            return "zero-shot"
        return f"{self.shots}-shot" + (" (paper's examples)" if self.paper_examples else "")


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
    return Arm(path, model, task, shots, paper, records, str(params.get("split") or "test"))


@dataclass(frozen=True, slots=True)
class Settings:
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    intervals: bool = True
    """False for breakdowns, which show point values (the CIs stay on the whole arm)."""
