"""PubMedQA (PQA-L): yes / no / maybe research questions over an abstract.

The worked example of a benchmark package (docs/architecture.md): ``data.py`` reads the files,
``prompts.py`` holds the prompt, ``task.py`` builds the :class:`~clinieval.task.Task`, and this
module says what the benchmark is to the CLI. Imports stay inside the methods so that listing
the benchmarks costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from clinieval.benchmark import BenchmarkBase, TaskRequest, check_split

if TYPE_CHECKING:
    from clinieval.suite.part import SuitePart
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class PubMedQA(BenchmarkBase):
    name: str = "pubmedqa"
    description: str = "PubMedQA (PQA-L): yes / no / maybe research questions over an abstract"

    def task(self, request: TaskRequest) -> Task:
        from clinieval.benchmarks.pubmedqa.data import SPLITS
        from clinieval.benchmarks.pubmedqa.task import pubmedqa_task

        split = check_split(request, SPLITS, "test")
        return pubmedqa_task(request.data, split, list(request.scorers) if request.scorers else None)

    def suite(self) -> SuitePart | None:
        from clinieval.benchmarks.pubmedqa.suite_part import PubMedQAPart

        return PubMedQAPart()


BENCHMARK = PubMedQA()
