"""MedEval's prompts by task name: what ``medeval run``, the tasks and the bench call.

Each function looks the task's entry up in :data:`~.task_table.TASK_TABLE` and builds with the
paper's strings and layouts (:mod:`.paper_prompts`, where the layout and its sources are described);
the per-task settings the command line and the bench read (the paper's few-shot counts and
examples, the sentence-level tasks) are views of the same table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clinieval.benchmarks.medeval.items import TASKS, ReportItem, SentenceItem, TaskName
from clinieval.benchmarks.medeval.paper_prompts import (
    PROMPT_OBSERVATIONS,
    Shots,
    code_tuples,
    diagnostic,
    findings_of,
)
from clinieval.benchmarks.medeval.task_table import TASK_TABLE, ReportTask, SentenceTask
from clinieval.errors import UserError

__all__ = [
    "PAPER_EXAMPLES",
    "PAPER_SHOTS",
    "PROMPT_OBSERVATIONS",
    "SENTENCE_TASKS",
    "TASKS",
    "Shots",
    "TaskName",
    "code_tuples",
    "data_shots",
    "diagnostic",
    "example_line",
    "findings_of",
    "gold_label",
    "paper_shots",
    "report_prompt",
    "sentence_prompt",
]

SENTENCE_TASKS: tuple[TaskName, ...] = tuple(t.name for t in TASK_TABLE.values() if t.level == "sentence")
PAPER_SHOTS: Mapping[TaskName, int] = {t.name: t.paper_shots for t in TASK_TABLE.values()}
"""The paper's few-shot setting per task (:attr:`~.task_table.SentenceTask.paper_shots`)."""
PAPER_EXAMPLES: Mapping[TaskName, tuple[str, ...]] = {
    t.name: t.paper_examples for t in TASK_TABLE.values() if t.paper_examples is not None
}
"""The paper's fixed few-shot examples (none were published for code prediction or summaries)."""


def example_line(task: TaskName, item: SentenceItem | ReportItem) -> str:
    """One few-shot example in the layout of the paper's examples for ``task``."""
    return TASK_TABLE[task].example_line(item)


def gold_label(task: TaskName, item: SentenceItem) -> str:
    """The label word a sentence-classification answer should be."""
    return TASK_TABLE[task].gold_label(item)


def sentence_prompt(
    task: TaskName, item: SentenceItem, shots: Shots = Shots(), *, with_label: bool = True
) -> str:
    """The prompt for one sentence-level item (abnormality, ambiguity or rewriting).

    ``with_label=False`` gives rewriting Appendix C.3's label-free query line (``Sentence: {}.
    Rewrite:``), a named option: the model then rewrites without being told the finding. Example
    lines keep their labels, as all of the paper's do."""
    entry = TASK_TABLE[task]
    if not isinstance(entry, SentenceTask):
        raise UserError(f"task {task} is a report task, not a sentence task")
    return entry.prompt(item, shots, with_label)


def report_prompt(task: TaskName, item: ReportItem, shots: Shots = Shots()) -> str:
    """The prompt for one report-level item (code prediction or summarisation)."""
    entry = TASK_TABLE[task]
    if not isinstance(entry, ReportTask):
        raise UserError(f"task {task} is a sentence task, not a report task")
    return entry.prompt(item, shots)


def paper_shots(task: TaskName) -> Shots:
    """The paper's own examples for ``task``; code prediction and summaries have none published."""
    return TASK_TABLE[task].paper_shots_given()


def data_shots(task: TaskName, examples: Sequence[SentenceItem | ReportItem]) -> Shots:
    """Examples drawn from the data (the train split), written in the paper's layout."""
    return TASK_TABLE[task].data_shots(examples)
