"""AutoMedEval: a medical judge that scores several answers with a rationale (see README.md).

A judge is evaluated over a set of answers (``clinieval automedeval judge | analyze``), and its
training data is built by ``clinieval automedeval build ...``; there is no single-arm run, so
``clinieval run automedeval`` says where to go instead of running anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clinieval.benchmark import BenchmarkBase, TaskRequest
from clinieval.errors import UserError

if TYPE_CHECKING:
    import typer

    from clinieval.review.sources import ReviewSource
    from clinieval.suite.part import SuitePart
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class AutoMedEval(BenchmarkBase):
    name: str = "automedeval"
    description: str = "AutoMedEval: a medical judge scoring several answers, against physicians"

    def task(self, request: TaskRequest) -> Task:
        """AutoMedEval judges sets of answers rather than answering; it has no single-arm run."""
        raise UserError(
            "automedeval has no single-arm run: it judges sets of answers; see `clinieval automedeval judge "
            "--help` (or `clinieval automedeval demo`)"
        )

    def commands(self) -> typer.Typer | None:
        """The ``clinieval automedeval`` tree, mounted from ``cli/`` (one module per command group);
        imported only here, so listing the benchmarks stays fast."""
        from clinieval.benchmarks.automedeval.cli import app

        return app

    def review_sources(self) -> Sequence[ReviewSource]:
        """What ``clinieval review import`` reads of this benchmark's files (``review.py``)."""
        from clinieval.benchmarks.automedeval.review import REVIEW_SOURCE

        return (REVIEW_SOURCE,)

    def suite(self) -> SuitePart | None:
        """Each suite model as a judge of one judge-evaluation set, ranked by its agreement with the
        physicians (``suite_part.py``)."""
        from clinieval.benchmarks.automedeval.suite_part import AutoMedEvalPart

        return AutoMedEvalPart()


BENCHMARK = AutoMedEval()
