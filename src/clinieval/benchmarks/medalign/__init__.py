"""MedAlign: clinician instructions over long patient records (see README.md beside this file)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clinieval.benchmark import BenchmarkBase, TaskRequest, own_scorers
from clinieval.errors import UserError

if TYPE_CHECKING:
    import typer

    from clinieval.judge.catalog import RubricEntry
    from clinieval.review.sources import ReviewSource
    from clinieval.suite.part import SuitePart
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class MedAlign(BenchmarkBase):
    name: str = "medalign"
    description: str = (
        "MedAlign: clinician instructions over long patient records (run, judge, analyze, build)"
    )

    def task(self, request: TaskRequest) -> Task:
        """One arm under the paper's keep-recent budget over ``--data``: the release folder, or a
        folder with ``instructions.csv`` and ``ehrs/`` (what ``clinieval medalign demo`` writes).
        ``clinieval medalign run`` runs several models and strategies as arms."""
        from clinieval.benchmarks.medalign.data import load_folder
        from clinieval.benchmarks.medalign.task import MedAlignSettings, StrategyOptions, medalign_task
        from clinieval.datasets import find_dataset_dir

        if request.split is not None:
            raise UserError("--split does not apply to medalign")
        samples, files = load_folder(find_dataset_dir(self.name, request.data))
        fit = StrategyOptions(tokenizer=request.budget_tokenizer, max_context=request.max_context)
        settings = MedAlignSettings(strategy=fit)
        task = medalign_task(samples, "keep-recent", settings, files)
        return own_scorers(task, request)

    def commands(self) -> typer.Typer | None:
        from clinieval.benchmarks.medalign.cli import app

        return app

    def review_sources(self) -> Sequence[ReviewSource]:
        """What ``clinieval review import`` reads of this benchmark's files (``review.py``)."""
        from clinieval.benchmarks.medalign.review import REVIEW_SOURCE

        return (REVIEW_SOURCE,)

    def rubrics(self) -> Sequence[RubricEntry]:
        """MedAlign's clinician criteria, shown ``--snippets`` BM25 excerpts of the record."""
        from clinieval.benchmarks.medalign.scoring import retrieval_rubric
        from clinieval.judge.catalog import RubricEntry

        return (
            RubricEntry(
                name="medalign_judge",
                description="MedAlign's C1-C3 correctness and 1-5 score, shown EHR excerpts",
                build=lambda options: retrieval_rubric(options.snippets),
                uses_snippets=True,
            ),
        )

    def suite(self) -> SuitePart | None:
        """One arm per model (``suite_part.py``): the strategy's answers, judged with the rubric."""
        from clinieval.benchmarks.medalign.suite_part import MedAlignPart

        return MedAlignPart()


BENCHMARK = MedAlign()
