"""MedEval: radiology sentence and report tasks (see README.md beside this file)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clinieval.benchmark import BenchmarkBase, TaskRequest, own_scorers
from clinieval.errors import UserError, one_of

if TYPE_CHECKING:
    import typer

    from clinieval.review.sources import ReviewSource
    from clinieval.scoring.scorers import Scorer
    from clinieval.suite.part import SuitePart
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class MedEval(BenchmarkBase):
    name: str = "medeval"
    description: str = "MedEval: radiology sentence and report tasks (run, analyze, label, train, demo)"

    def matches(self, name: str) -> bool:
        """``medeval`` (abnormality identification) or ``medeval-TASK`` for any of the five tasks."""
        return name == self.name or name.startswith(f"{self.name}-")

    def task(self, request: TaskRequest) -> Task:
        """One task zero-shot over ``--data`` (a MedEval-shaped folder); ``--split`` picks the split."""
        from clinieval.benchmarks.medeval.data import load_folder
        from clinieval.benchmarks.medeval.items import SPLITS
        from clinieval.benchmarks.medeval.task import MedEvalSettings, medeval_task
        from clinieval.benchmarks.medeval.task_table import task_entry

        name = request.name.removeprefix(f"{self.name}-") if request.name != self.name else "abnormality"
        task = task_entry(name).name
        if request.data is None:
            raise UserError(
                "medeval needs --data: a MedEval-shaped folder "
                "(`clinieval medeval demo` writes a synthetic one)"
            )
        split = one_of(request.split or "test", SPLITS, "--split")
        loaded = load_folder(request.data, seed=0)
        settings = MedEvalSettings(split=split)
        built = medeval_task(task, loaded.items_for(task), settings, loaded.files, loaded.split_info())
        return own_scorers(built, request)

    def commands(self) -> typer.Typer | None:
        from clinieval.benchmarks.medeval.cli import app

        return app

    def review_sources(self) -> Sequence[ReviewSource]:
        """What ``clinieval review import`` reads of this benchmark's files (``review.py``)."""
        from clinieval.benchmarks.medeval.review import REVIEW_SOURCE

        return (REVIEW_SOURCE,)

    def scorers(self) -> Sequence[Scorer]:
        """Each task's scorer, under the paper's qualified rule (in the order ``--scorer``'s list of
        known names has always shown them: the NLU tasks first)."""
        from clinieval.benchmarks.medeval.items import TaskName
        from clinieval.benchmarks.medeval.task_table import TASK_TABLE

        listed: tuple[TaskName, ...] = ("abnormality", "ambiguity", "codes", "summarization", "rewriting")
        return tuple(TASK_TABLE[t].scorer() for t in listed)

    def suite(self) -> SuitePart | None:
        """Every model on the chosen tasks through ``run_task_arm`` (``suite_part.py``)."""
        from clinieval.benchmarks.medeval.suite_part import MedEvalPart

        return MedEvalPart()


BENCHMARK = MedEval()
