"""PubMedQA in a suite: each model answers the questions once; the headline is accuracy.

The cell is one ordinary run (:func:`clinieval.engine.session.run_evaluation`, as ``clinieval run
pubmedqa --shuffle SEED --limit N`` does it) in the cell's folder, so it resumes as any run does and
``clinieval view`` reads it. The score is the task's own choice scorer (the answer read from the
generated text); the log-likelihood scorer is left out so that a cell costs exactly one call per
question on any server, chat-only ones included. The questions are shuffled with the suite's seed
before the limit, because the published order starts with twenty "yes" items.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.errors import UserError
from clinieval.suite.part import Cell, CheckedModels, Headline, Prepared, Shared, Step

if TYPE_CHECKING:
    from clinieval.review.items import ReviewItem
    from clinieval.task import Task

METRIC = "accuracy (yes/no/maybe read from the answer)"
SYNTHETIC_LIMIT = 10
"""How many questions the demo asks each model (PubMedQA has no synthetic set: its own data)."""


@dataclass(frozen=True, slots=True)
class PubMedQAOptions:
    """The ``[benchmarks.pubmedqa]`` table."""

    data: Path | None = field(
        default=None,
        metadata={
            "help": "folder with ori_pqal.json and test_ground_truth.json (default: shared/data/pubmedqa)"
        },
    )
    split: Literal["test", "all"] = field(
        default="test", metadata={"help": "test (the 500 labelled test items) or all (1,000)"}
    )
    shuffle: bool = field(
        default=True, metadata={"help": "shuffle the questions with the suite's seed before the limit"}
    )
    max_tokens: int = field(default=16, metadata={"help": "tokens each answer may take"})


@dataclass(frozen=True, slots=True)
class Loaded:
    """What prepare checked: the data folder and how many questions there are."""

    folder: Path | None
    total: int


@dataclass(frozen=True, slots=True)
class PubMedQAPart:
    """PubMedQA's :class:`~clinieval.suite.part.SuitePart`."""

    name: str = "pubmedqa"
    options: type[Any] = PubMedQAOptions
    judged: bool = False
    metric: str = METRIC

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        assert isinstance(options, PubMedQAOptions)
        folder = None if options.data is None else base / options.data
        if folder is not None and not folder.is_dir():
            raise UserError(f"data: {folder}: not a folder (it should hold ori_pqal.json)")
        task = self._task(folder, options)
        total = len(task.load())
        items = total if shared.limit is None else min(total, shared.limit)
        return Prepared(
            benchmark=self.name,
            options=options,
            items=items,
            data_files=list(task.data_files),
            describe=f"{items} of {total} {options.split} questions",
            payload=Loaded(folder, total),
        )

    def _task(self, folder: Path | None, options: PubMedQAOptions) -> Task:
        from clinieval.benchmarks.pubmedqa.task import pubmedqa_task
        from clinieval.scoring.scorers import ChoiceExtraction
        from clinieval.types import GenerationConfig

        return pubmedqa_task(
            folder, options.split, [ChoiceExtraction()], GenerationConfig(max_tokens=options.max_tokens)
        )

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        return [Step(f"answer {prepared.items} questions", cell.model.spec, prepared.items)]

    def _cell_task(self, prepared: Prepared, cell: Cell) -> tuple[Task, int | None]:
        """The task a cell runs (the suite's seed in its generation) and its shuffle seed."""
        from dataclasses import replace

        loaded, options = prepared.payload, prepared.options
        assert isinstance(loaded, Loaded) and isinstance(options, PubMedQAOptions)
        task = self._task(loaded.folder, options)
        task.generation = replace(task.generation, seed=cell.shared.seed)
        return task, cell.shared.seed if options.shuffle else None

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        from clinieval.engine.session import check_run

        task, shuffle = self._cell_task(prepared, cell)
        model = await models.checked(cell.model.spec)
        await check_run(
            task, model, limit=cell.shared.limit, shuffle=shuffle, concurrency=cell.shared.concurrency
        )

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        from clinieval.engine.session import RunRequest, run_evaluation
        from clinieval.models.spec import parse_model_spec

        task, shuffle = self._cell_task(prepared, cell)
        request = RunRequest(
            task=task,
            model=parse_model_spec(cell.model.spec, cell.shared.backend),
            model_spec=cell.model.spec,
            out=cell.out,
            default_out=lambda _: cell.out,
            limit=cell.shared.limit,
            shuffle=shuffle,
            concurrency=cell.shared.concurrency,
            progress=cell.shared.progress,
        )
        await run_evaluation(request)

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        from clinieval.records.runs import RunDir

        scores: dict[str, float] = {}
        failed = 0
        for record in RunDir.open(cell.out).records():
            score = record.scores.get("choice_extract")
            if record.error_kind() is not None or score is None:
                failed += 1
                continue
            scores[record.sample.id] = float(score.value or 0.0)  # an unreadable answer is wrong
        return Headline(metric=self.metric, scores=scores, runs=[cell.out], failed=failed)

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        from clinieval.report import Document, Paragraph, Table, write_report

        rows: list[list[str]] = []
        result: dict[str, Any] = {"benchmark": self.name, "metric": self.metric, "models": {}}
        for cell in cells:
            line = self.headline(prepared, cell)
            accuracy = sum(line.scores.values()) / len(line.scores) if line.scores else None
            result["models"][cell.model.name] = {
                "spec": cell.model.spec,
                "accuracy": accuracy,
                "scored": len(line.scores),
                "failed": line.failed,
            }
            shown = "n/a" if accuracy is None else f"{accuracy:.3f}"
            rows.append([cell.model.name, shown, str(len(line.scores)), str(line.failed)])
        doc = Document(
            title="PubMedQA",
            blocks=[
                Paragraph(f"{prepared.describe}; {self.metric}. Failed model calls are left out."),
                Table(["model", "accuracy", "scored", "failed"], rows),
            ],
        )
        return write_report(result, doc, out, "report")[2]

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        """PubMedQA has no synthetic set: the demo reads its own data, a few questions of it."""
        return {"limit": SYNTHETIC_LIMIT}

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """No judge decides PubMedQA's score, so there is nothing to calibrate with clinicians."""
        return ()
