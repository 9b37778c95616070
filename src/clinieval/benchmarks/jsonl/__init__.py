"""A user's own task as a JSON Lines or CSV file (``clinieval run my-task.jsonl``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.benchmark import BenchmarkBase, TaskRequest
from clinieval.errors import UserError

if TYPE_CHECKING:
    from clinieval.task import Task


@dataclass(frozen=True, slots=True)
class JsonlTask(BenchmarkBase):
    name: str = "jsonl"
    description: str = (
        "your own samples: a .jsonl file (id, input, optional context, choices, target; or MedQA's or "
        "MedMCQA's shape) or a spreadsheet's .csv; --field NAME=COLUMN for other names"
    )

    def matches(self, name: str) -> bool:
        # .json too: MedMCQA publishes JSON Lines as train.json, dev.json and test.json
        return name.lower().endswith((".jsonl", ".json", ".csv"))

    def task(self, request: TaskRequest) -> Task:
        from clinieval.benchmarks.jsonl.task import jsonl_task

        if request.data is not None or request.split is not None:
            raise UserError(
                f"{request.name}: a task of your own is the file itself; --data and --split do not apply"
            )
        scorers = list(request.scorers) if request.scorers else None
        return jsonl_task(Path(request.name), scorers, prompt=request.prompt, fields=request.fields)


BENCHMARK = JsonlTask()
