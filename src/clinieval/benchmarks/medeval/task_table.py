"""MedEval's five tasks as a typed table: one entry per task holding everything that differs.

A task is abnormality identification, ambiguity identification, disambiguation rewriting (the
sentence level), code prediction or summarisation (the report level). Its entry says which items it
can use, how its prompt and its few-shot example lines are built (:mod:`.paper_prompts`), what the
gold answer is, what kind of answer it asks for (:mod:`.answers`: the scorer, the metrics, the
report columns, whether a classifier can answer it), the paper's few-shot setting, its headline and
per-item metrics, and its report title. Every module that used to branch on a task's name looks its
entry up here (:func:`task_entry`) instead, so adding or changing a task is one entry.

The entries are :class:`SentenceTask` or :class:`ReportTask`, the two levels, whose items and
prompt builders differ in type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from clinieval.benchmarks.medeval import paper_prompts as paper
from clinieval.benchmarks.medeval.answers import CodeAnswers, LabelAnswers, TaskKnobs, TextAnswers
from clinieval.benchmarks.medeval.items import (
    CHEST,
    CHEXPERT_OBSERVATIONS,
    TASKS,
    Level,
    ReportItem,
    SentenceItem,
    TaskName,
)
from clinieval.benchmarks.medeval.paper_prompts import Shots
from clinieval.benchmarks.medeval.parsing import ABNORMALITY_LABELS, AMBIGUITY_LABELS, QualifiedRule
from clinieval.benchmarks.medeval.scoring import MedEvalScorer
from clinieval.errors import UserError, one_of

JSON = dict[str, Any]
Item = SentenceItem | ReportItem


@dataclass(frozen=True, slots=True, kw_only=True)
class _Task:
    """What every task has, whatever its level."""

    name: TaskName
    title: str
    """The report's section title."""
    answers: LabelAnswers | CodeAnswers | TextAnswers
    paper_shots: int
    """The paper's few-shot setting: as many examples as classes for NLU (2), three for NLG. Code
    prediction is multi-label; the paper's NLU rule gives it 2 as well."""
    paper_examples: tuple[str, ...] | None = None
    """The paper's own few-shot example lines (none were published for codes or summaries)."""
    main_metric: str
    """The headline number of an arm (counted-wrong view), for curves, breakdowns and levels."""
    item_metric: str
    """What a comparison's per-item value is (x100)."""
    item_scale: float = 100.0
    """What turns the per-answer score into 0-100 (sentence BLEU is already on that scale)."""
    classifier_deltas: bool = False
    """Whether an arm is also measured by trained classifiers (rewriting's ΔAcc_am and ΔAcc_ab)."""

    level: ClassVar[Level]

    def scorer(self, rule: QualifiedRule = "paper") -> MedEvalScorer:
        """The task's ``medeval_<task>`` scorer (``rule`` matters to the label tasks only)."""
        return self.answers.scorer(self.name, rule)

    def params(self, knobs: TaskKnobs) -> JSON:
        """The arm settings this task reads, as the run records them (None for the others)."""
        return {"absent_as": None, "qualified_rule": None, "rewrite_label": None} | self.answers.params(knobs)

    def gold_label(self, item: SentenceItem) -> str:
        """The label word a sentence-classification answer should be."""
        word = self.answers.word(item)
        if word is None:
            raise UserError(f"{item.source or item.id}: no {self.name} label")
        return word

    def paper_shots_given(self) -> Shots:
        """The paper's own examples; code prediction and summaries have none published."""
        if self.paper_examples is None:
            raise UserError(
                f"the paper published no few-shot examples for {self.name}; "
                "use --shots N to draw them from the train split"
            )
        return Shots(self.paper_examples, paper=True)

    def data_shots(self, examples: Sequence[Item]) -> Shots:
        """Examples drawn from the data (the train split), written in the paper's layout."""
        return Shots(tuple(self.example_line(x) for x in examples))

    def example_line(self, item: Item) -> str:
        """One few-shot example in the layout of the paper's examples."""
        raise NotImplementedError

    def wrong_level(self) -> UserError:
        return UserError(f"task {self.name}: an example must be a {self.level}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SentenceTask(_Task):
    """A task over report sentences."""

    level: ClassVar[Level] = "sentence"
    answers: LabelAnswers | TextAnswers
    build: Callable[[SentenceItem, Shots, bool], str]
    """The prompt: the item, the examples, and whether a rewriting query carries its label."""
    line: Callable[[SentenceTask, SentenceItem], str]
    """One few-shot example line."""
    usable: Callable[[SentenceItem], bool]
    """Whether a sentence has what the task needs."""
    target: Callable[[SentenceTask, SentenceItem], str | None]
    labelled_query: bool = False
    """Whether the query may carry the sentence's ``Diagnostic:`` (``rewrite_label``)."""

    def eligible(self, item: Item) -> bool:
        return isinstance(item, SentenceItem) and self.usable(item)

    def prompt(self, item: SentenceItem, shots: Shots, with_label: bool = True) -> str:
        return self.build(item, shots, with_label)

    def example_line(self, item: Item) -> str:
        if not isinstance(item, SentenceItem):
            raise self.wrong_level()
        return self.line(self, item)

    def balance_class(self, item: Item) -> str:
        """The class few-shot draws take in turn ("" for a task without classes)."""
        if not isinstance(item, SentenceItem):
            return ""
        return self.answers.word(item) or ""

    def params(self, knobs: TaskKnobs) -> JSON:
        own = {"rewrite_label": knobs.rewrite_label} if self.labelled_query else {}
        return _Task.params(self, knobs) | own

    def sample_parts(self, item: Item, shots: Shots, knobs: TaskKnobs) -> tuple[str, str | None, JSON]:
        """A sample's prompt, target (the label word, or the clinician's rewrite) and the metadata
        it holds beyond task, domain and split."""
        if not isinstance(item, SentenceItem):
            raise self.wrong_level()
        prompt = self.prompt(item, shots, knobs.rewrite_label)
        return (
            prompt,
            self.target(self, item),
            {
                "level": self.level,
                "sentence": item.sentence,
                "abnormal": item.abnormal,
                "ambiguous": item.ambiguous,
                "ambiguity_kind": item.ambiguity_kind,
            },
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTask(_Task):
    """A task over whole reports."""

    level: ClassVar[Level] = "report"
    answers: CodeAnswers | TextAnswers
    build: Callable[[ReportItem, Shots], str]
    line: Callable[[ReportItem], str]
    usable: Callable[[ReportItem], bool]
    target: Callable[[ReportItem], str | None]
    extra: Callable[[ReportItem, TaskKnobs], JSON]
    """The sample metadata the scorer or the report reads (the codes, the findings)."""

    def eligible(self, item: Item) -> bool:
        return isinstance(item, ReportItem) and self.usable(item)

    def prompt(self, item: ReportItem, shots: Shots) -> str:
        return self.build(item, shots)

    def example_line(self, item: Item) -> str:
        if not isinstance(item, ReportItem):
            raise self.wrong_level()
        return self.line(item)

    def balance_class(self, item: Item) -> str:
        return ""

    def sample_parts(self, item: Item, shots: Shots, knobs: TaskKnobs) -> tuple[str, str | None, JSON]:
        """A sample's prompt, target (the impression; None for codes, which the metadata holds)
        and the metadata it holds beyond task, domain and split."""
        if not isinstance(item, ReportItem):
            raise self.wrong_level()
        prompt = self.prompt(item, shots)
        return prompt, self.target(item), {"level": self.level} | self.extra(item, knobs)


MedEvalTask = SentenceTask | ReportTask


# --- what differs, task by task --------------------------------------------------------------


def _label_line(task: SentenceTask, item: SentenceItem) -> str:
    return paper.label_example(item, task.gold_label(item))


def _rewriting_line(task: SentenceTask, item: SentenceItem) -> str:
    return paper.rewriting_example(item)


def _label_target(task: SentenceTask, item: SentenceItem) -> str | None:
    return task.gold_label(item)


def _rewrite_target(task: SentenceTask, item: SentenceItem) -> str | None:
    return item.rewrite


def _rewritable(item: SentenceItem) -> bool:
    return bool(item.ambiguous) and bool(item.rewrite) and item.abnormal is not None


def _summarisable(item: ReportItem) -> bool:
    return bool(item.findings.strip()) and bool(item.impression.strip())


def _asked_codes(item: ReportItem, knobs: TaskKnobs) -> JSON:
    """The report's 14 codes as the answer should give them (absent ones as ``absent_as``)."""
    codes = {o: item.codes.get(o, "absent") for o in CHEXPERT_OBSERVATIONS}
    return {"codes": {o: knobs.absent_as if v == "absent" else v for o, v in codes.items()}}


def _findings(item: ReportItem, knobs: TaskKnobs) -> JSON:
    return {"findings": paper.findings_of(item)}


def _label_task(
    name: TaskName,
    title: str,
    answers: LabelAnswers,
    examples: tuple[str, ...],
    build: Callable[[SentenceItem, Shots, bool], str],
) -> SentenceTask:
    """A sentence-classification task: a sentence is usable when it carries the task's flag, its
    gold answer and example label are the flag's word, and the paper's NLU setting gives it as many
    examples as classes and accuracy as its headline."""
    return SentenceTask(
        name=name,
        title=title,
        answers=answers,
        paper_shots=len(answers.labels),
        paper_examples=examples,
        main_metric="accuracy",
        item_metric="accuracy",
        build=build,
        line=_label_line,
        usable=lambda item: answers.flag(item) is not None,
        target=_label_target,
    )


ABNORMALITY = _label_task(
    "abnormality",
    "Abnormality identification (sentence NLU)",
    LabelAnswers(ABNORMALITY_LABELS, lambda item: item.abnormal),
    paper.ABNORMALITY_EXAMPLES,
    paper.abnormality_prompt,
)
AMBIGUITY = _label_task(
    "ambiguity",
    "Ambiguity identification (sentence NLU)",
    LabelAnswers(AMBIGUITY_LABELS, lambda item: item.ambiguous),
    paper.AMBIGUITY_EXAMPLES,
    paper.ambiguity_prompt,
)
REWRITING = SentenceTask(
    name="rewriting",
    title="Disambiguation rewriting (sentence NLG)",
    answers=TextAnswers("bleu", content=True),
    paper_shots=3,
    paper_examples=paper.REWRITING_EXAMPLES,
    main_metric="bleu4",
    item_metric="sentence BLEU-4",
    item_scale=1.0,
    classifier_deltas=True,
    build=paper.rewriting_prompt,
    line=_rewriting_line,
    usable=_rewritable,
    target=_rewrite_target,
    labelled_query=True,
)
CODES = ReportTask(
    name="codes",
    title="Report code prediction (report NLU, 14 chest observations)",
    answers=CodeAnswers(),
    paper_shots=2,
    main_metric="average_accuracy",
    item_metric="average accuracy",
    build=paper.codes_prompt,
    line=paper.codes_example,
    usable=lambda item: item.domain == CHEST,
    target=lambda item: None,
    extra=_asked_codes,
)
SUMMARIZATION = ReportTask(
    name="summarization",
    title="Report summarisation (report NLG)",
    answers=TextAnswers("rougeL"),
    paper_shots=3,
    main_metric="rougeL",
    item_metric="ROUGE-L F",
    build=paper.summary_prompt,
    line=paper.summary_example,
    usable=_summarisable,
    target=lambda item: item.impression,
    extra=_findings,
)

TASK_TABLE: Mapping[TaskName, MedEvalTask] = {
    t.name: t for t in (ABNORMALITY, AMBIGUITY, REWRITING, CODES, SUMMARIZATION)
}
"""Every task's entry, in the paper's order (:data:`~.items.TASKS`; a test holds them equal)."""


def task_entry(name: str, what: str = "MedEval task") -> MedEvalTask:
    """The entry of the task called ``name``, or one error naming the five (``what`` says which
    option or field gave the name)."""
    return TASK_TABLE[one_of(name, TASKS, what)]
