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
        from clinieval.benchmarks.medeval.prompts import TASKS
        from clinieval.benchmarks.medeval.task import MedEvalSettings, medeval_task

        name = request.name.removeprefix(f"{self.name}-") if request.name != self.name else "abnormality"
        task = one_of(name, TASKS, "MedEval task")
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
        from clinieval.benchmarks.medeval.scoring import CodeAccuracy, LabelAccuracy, TextOverlap

        return (
            LabelAccuracy("abnormality"),
            LabelAccuracy("ambiguity"),
            CodeAccuracy(),
            TextOverlap("summarization", "rougeL"),
            TextOverlap("rewriting", "bleu"),
        )


BENCHMARK = MedEval()
