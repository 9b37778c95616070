"""What MedEval does with each kind of answer: a label word, the 14 code tuples, or free text.

Three of the five tasks share a kind with another (abnormality and ambiguity are both labels;
summaries and rewrites both text), and everything downstream of the prompt follows the kind, not the
task: which scorer reads the answer, which arm settings the run records, which of the paper's
metrics measure an arm (:mod:`.arm_metrics`), which number is its headline, which columns the report
shows, and whether a trained classifier can answer it (the adapted-PLM baselines). Each task's
entry in :data:`~.task_table.TASK_TABLE` holds one of these objects, so no module asks which task
it is looking at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from clinieval.benchmarks.medeval.arm_metrics import code_metrics, label_metrics, macro_f1, text_metrics
from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, ReportItem, SentenceItem
from clinieval.benchmarks.medeval.parsing import QualifiedRule
from clinieval.benchmarks.medeval.scoring import CodeAccuracy, LabelAccuracy, MedEvalScorer, TextOverlap
from clinieval.errors import UserError

if TYPE_CHECKING:  # run folders (clinieval.records.runs) load only where arms are read
    from clinieval.benchmarks.medeval.arms import Arm, Settings

JSON = dict[str, Any]
Labels = tuple[str, ...]
Item = SentenceItem | ReportItem


class TaskKnobs(Protocol):
    """The arm settings a task may read (:class:`~.task.MedEvalSettings` has them all)."""

    @property
    def absent_as(self) -> str: ...

    @property
    def qualified(self) -> QualifiedRule: ...

    @property
    def rewrite_label(self) -> bool: ...


def number_cell(value: Any, digits: int = 1) -> str:
    """A number for a report table (``—`` when undefined)."""
    from clinieval.analysis.markdown import md_number

    return md_number(value, digits)


def ci_cell(entry: JSON | None) -> str:
    """A ``{"value", "ci"}`` statistic as ``12.3 [10.1-14.5]`` (an en dash between) (``—`` when undefined)."""
    if not entry or entry.get("value") is None:
        return "—"
    ci = entry.get("ci")
    return number_cell(entry["value"]) + ("" if not ci else f" [{ci[0]:.1f}–{ci[1]:.1f}]")


def _matches(gold: Sequence[str], predicted: Sequence[str]) -> int:
    return sum(a == b for a, b in zip(gold, predicted, strict=True))


@dataclass(frozen=True, slots=True)
class LabelAnswers:
    """One of two label words (abnormality: normal/abnormal; ambiguity: unambiguous/ambiguous),
    read from the sentence's flag."""

    labels: tuple[str, str]
    """(negative class, positive class)."""
    flag: Callable[[SentenceItem], bool | None]
    """The sentence's gold flag for this task (None: not labelled)."""

    def word(self, item: SentenceItem) -> str | None:
        """The gold label word, None when the sentence is not labelled for this task."""
        flag = self.flag(item)
        return None if flag is None else self.labels[flag]

    def scorer(self, task: str, rule: QualifiedRule) -> MedEvalScorer:
        return MedEvalScorer(task, LabelAccuracy(self.labels, rule))

    def params(self, knobs: TaskKnobs) -> JSON:
        return {"qualified_rule": knobs.qualified}

    def metrics(self, arm: Arm, s: Settings) -> JSON:
        return label_metrics(arm, s, self.labels)

    def headline(self, metrics: JSON, key: str) -> Any:
        return metrics[key]["counted_wrong"]

    def columns(self, metrics: JSON) -> tuple[list[str], list[str]]:
        a, f = metrics["accuracy"], metrics["macro_f1"]
        header = ["accuracy [95% CI]", "accuracy, qualified only", "macro-F1", "macro-F1, qualified only"]
        return header, [
            ci_cell(a["counted_wrong"]),
            ci_cell(a["qualified"]),
            number_cell(f["counted_wrong"]),
            number_cell(f["qualified"]),
        ]

    def classified(self) -> LabelAnswers:
        """A trained classifier can give this answer (one head, named after the task)."""
        return self

    def heads(self, task: str) -> tuple[str, ...]:
        return (task,)

    def example(self, item: Item, absent_as: str) -> tuple[str, Labels]:
        """The text a baseline reads and its gold label."""
        if not isinstance(item, SentenceItem) or (word := self.word(item)) is None:
            raise UserError(f"{item.source or item.id}: no label for a classifier to learn")
        return item.sentence, (word,)

    def answer_text(self, labels: Labels) -> str:
        """A prediction written as the task asks an LLM to answer: the label word."""
        return labels[0]

    def test_metrics(self, gold: Sequence[Labels], predicted: Sequence[Labels]) -> JSON:
        """A baseline's own test numbers: accuracy and macro-F1."""
        g, p = [x[0] for x in gold], [x[0] for x in predicted]
        return {"accuracy": 100 * _matches(g, p) / len(g), "macro_f1": 100 * macro_f1(g, p, self.labels)}


@dataclass(frozen=True, slots=True)
class CodeAnswers:
    """The 14 ``(observation, prediction)`` tuples of a chest report."""

    def word(self, item: SentenceItem) -> None:
        """No label word: the answer is 14 tuples."""
        return None

    def scorer(self, task: str, rule: QualifiedRule) -> MedEvalScorer:
        return MedEvalScorer(task, CodeAccuracy())

    def params(self, knobs: TaskKnobs) -> JSON:
        return {"absent_as": knobs.absent_as}

    def metrics(self, arm: Arm, s: Settings) -> JSON:
        return code_metrics(arm, s)

    def headline(self, metrics: JSON, key: str) -> Any:
        return metrics[key]["counted_wrong"]

    def columns(self, metrics: JSON) -> tuple[list[str], list[str]]:
        a, e = metrics["average_accuracy"], metrics["exact_match"]
        header = [
            "average accuracy [95% CI]",
            "qualified only",
            "exact match",
            "exact match, qualified only",
            "per-observation credit (not the paper's)",
        ]
        credit = (metrics.get("per_observation_credit") or {}).get("counted_wrong")
        return header, [
            ci_cell(a["counted_wrong"]),
            ci_cell(a["qualified"]),
            ci_cell(e["counted_wrong"]),
            ci_cell(e["qualified"]),
            ci_cell(credit),
        ]

    def classified(self) -> CodeAnswers:
        """A trained classifier can give this answer (one three-way head per observation)."""
        return self

    def heads(self, task: str) -> tuple[str, ...]:
        return CHEXPERT_OBSERVATIONS

    def example(self, item: Item, absent_as: str) -> tuple[str, Labels]:
        """The report text and its 14 codes, an absent one as ``absent_as``."""
        if not isinstance(item, ReportItem):
            raise UserError(f"{item.source or item.id}: a code classifier reads reports, not sentences")
        codes = tuple(item.codes.get(o, "absent") for o in CHEXPERT_OBSERVATIONS)
        return item.text, tuple(absent_as if c == "absent" else c for c in codes)

    def answer_text(self, labels: Labels) -> str:
        """A prediction written as the task asks an LLM to answer: the 14 tuples."""
        return ", ".join(f"({o}, {v})" for o, v in zip(CHEXPERT_OBSERVATIONS, labels, strict=True))

    def test_metrics(self, gold: Sequence[Labels], predicted: Sequence[Labels]) -> JSON:
        """A baseline's own test numbers: average accuracy and exact match."""
        per = [_matches(g, p) / len(g) for g, p in zip(gold, predicted, strict=True)]
        exact = [float(g == p) for g, p in zip(gold, predicted, strict=True)]
        return {"average_accuracy": 100 * sum(per) / len(per), "exact_match": 100 * sum(exact) / len(exact)}


@dataclass(frozen=True, slots=True)
class TextAnswers:
    """Free text against a reference (the impression, or the clinician's rewrite), scored per
    answer by ``metric`` (ROUGE-L for summaries, sentence BLEU-4 for rewrites); with ``content``
    (rewrites) an answer without clinical content is unqualified (:mod:`.rewrite_content`)."""

    metric: str
    content: bool = False

    def word(self, item: SentenceItem) -> None:
        """No label word: the answer is text."""
        return None

    def scorer(self, task: str, rule: QualifiedRule) -> MedEvalScorer:
        return MedEvalScorer(task, TextOverlap(self.metric, self.content))

    def params(self, knobs: TaskKnobs) -> JSON:
        return {}

    def metrics(self, arm: Arm, s: Settings) -> JSON:
        return text_metrics(arm, s)

    def headline(self, metrics: JSON, key: str) -> Any:
        view = metrics.get("counted_wrong")
        return None if view is None else view[key]

    def columns(self, metrics: JSON) -> tuple[list[str], list[str]]:
        header = ["ROUGE-1", "ROUGE-2", "ROUGE-L [95% CI]", "ROUGE sum", "BLEU-4", "BLEU-4, qualified only"]
        view, qual = metrics.get("counted_wrong") or {}, metrics.get("qualified") or {}
        cells = [ci_cell(view.get(k)) for k in ("rouge1", "rouge2", "rougeL", "rouge_sum")]
        return header, [*cells, number_cell(view.get("bleu4")), number_cell(qual.get("bleu4"))]

    def classified(self) -> None:
        """No trained classifier writes text (summaries get the lead-sentence baseline instead)."""
        return None
