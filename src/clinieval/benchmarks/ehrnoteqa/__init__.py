"""EHRNoteQA: questions over a patient's discharge summaries (see README.md beside this file)."""

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
    from clinieval.scoring.scorers import Scorer
    from clinieval.suite.part import SuitePart
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class EHRNoteQA(BenchmarkBase):
    name: str = "ehrnoteqa"
    description: str = (
        "EHRNoteQA: questions over a patient's discharge summaries (run, judge, analyze, build, demo)"
    )

    def task(self, request: TaskRequest) -> Task:
        """The multiple-choice arm over ``--data``: a jsonl with the notes inline, or a folder with
        ``qa.jsonl`` and ``discharge.csv`` (or ``.csv.gz``), as ``clinieval ehrnoteqa demo`` writes."""
        from clinieval.benchmarks.ehrnoteqa.data import load_folder, load_inline
        from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings, ehrnoteqa_task

        if request.split is not None:
            raise UserError("--split does not apply to ehrnoteqa")
        data = request.data
        if data is None:
            raise UserError(
                "ehrnoteqa needs --data: a jsonl with the notes inline, or a folder with qa.jsonl and "
                "discharge.csv (`clinieval ehrnoteqa demo` writes one)"
            )
        loaded = load_folder(data) if data.is_dir() else load_inline(data)
        task = ehrnoteqa_task(loaded.samples, "mc", EHRNoteQASettings(), loaded.files)
        return own_scorers(task, request)

    def commands(self) -> typer.Typer | None:
        from clinieval.benchmarks.ehrnoteqa.cli import app

        return app

    def review_sources(self) -> Sequence[ReviewSource]:
        """What ``clinieval review import`` reads of this benchmark's files (``review.py``)."""
        from clinieval.benchmarks.ehrnoteqa.review import REVIEW_SOURCE

        return (REVIEW_SOURCE,)

    def scorers(self) -> Sequence[Scorer]:
        from clinieval.benchmarks.ehrnoteqa.scoring import LetterExtraction, OptionLoglik

        return (LetterExtraction(), OptionLoglik("letter"), OptionLoglik("text"))

    def rubrics(self) -> Sequence[RubricEntry]:
        """Each answer format's judge with the generation `clinieval ehrnoteqa judge` uses, so both
        commands ask the same requests and share cached replies."""
        from clinieval.benchmarks.ehrnoteqa.task import JUDGING
        from clinieval.judge.catalog import RubricEntry, without_options

        return tuple(
            RubricEntry(
                name=judging.rubric().name,
                description=judging.description,
                build=without_options(judging.rubric),
                generation=judging.generation,
            )
            for judging in JUDGING.values()
        )

    def suite(self) -> SuitePart | None:
        """One arm per model in one format (``suite_part.py``), judged with the paper's judge."""
        from clinieval.benchmarks.ehrnoteqa.suite_part import EHRNoteQAPart

        return EHRNoteQAPart()


BENCHMARK = EHRNoteQA()
