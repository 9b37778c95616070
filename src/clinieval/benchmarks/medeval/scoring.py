"""Per-answer scores of the five MedEval tasks, read from a run's records.

Each score's value is what the "unqualified counted wrong" view averages (an unqualified answer
scores 0); its metadata says whether the answer was qualified, so the analysis can also average
over qualified answers only, and report the qualified rate beside both. A failed model call is
never scored (value None, with its error kind), as everywhere in clinieval.

The NLG tasks score each answer with one text metric here (ROUGE-L for summaries, BLEU-4 against
the clinician's rewrite for rewriting) so a run's summary has a number; the analysis computes the
paper's full set (ROUGE-1/2/L, their sum, corpus BLEU-4, and the classifier deltas) from the
recorded answers.

One scorer class serves every task (:class:`MedEvalScorer`: the task's name, the failed-call rule);
what differs is how an answer is read, one reader per kind of answer (a label word, the 14 code
tuples, free text), which each task's entry in :data:`~.task_table.TASK_TABLE` picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS
from clinieval.benchmarks.medeval.parsing import QualifiedRule, read_codes, read_label
from clinieval.benchmarks.medeval.rewrite_content import without_content
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.scorers import AnswerScorer
from clinieval.types import Score


class AnswerReader(Protocol):
    """How one kind of answer is scored, once the model call is known to have succeeded."""

    def __call__(self, text: str, record: SampleRecord) -> Score: ...


@dataclass(frozen=True, slots=True)
class MedEvalScorer(AnswerScorer):
    """A task's scorer, ``medeval_<task>``: a failed call is unscored (with its error kind, as
    :class:`~clinieval.scoring.scorers.AnswerScorer` does for every scorer), any other answer goes
    to ``read``."""

    task: str
    read: AnswerReader
    needs: Literal["generate"] = "generate"
    needs_choices: bool = False

    @property
    def name(self) -> str:
        return f"medeval_{self.task}"

    def score_text(self, record: SampleRecord, text: str) -> Score:
        return self.read(text, record)


@dataclass(frozen=True, slots=True)
class LabelAccuracy:
    """Abnormality or ambiguity: 1 when the answer gives the gold label, qualified by ``rule``
    (the paper's: exactly one label word in the answer)."""

    labels: tuple[str, str]
    rule: QualifiedRule = "paper"

    def __call__(self, text: str, record: SampleRecord) -> Score:
        label = read_label(text, self.labels, self.rule, [m.content for m in record.messages])
        gold = str(record.sample.target)
        why = "exactly one label word" if self.rule == "paper" else "the label and nothing else"
        return Score(
            value=float(label == gold),
            explanation=None if label is not None else f"unqualified: not {why}",
            metadata={"qualified": label is not None, "label": label, "gold": gold, "rule": self.rule},
        )


@dataclass(frozen=True, slots=True)
class CodeAccuracy:
    """Code prediction: the share of the 14 observations predicted right (the paper averages this
    over reports as "average accuracy"), and whether all 14 were right (exact match)."""

    def __call__(self, text: str, record: SampleRecord) -> Score:
        answer = read_codes(text)
        gold = record.sample.metadata["codes"]
        right = {o: answer.qualified and answer.predictions.get(o) == gold[o] for o in CHEXPERT_OBSERVATIONS}
        return Score(
            value=sum(right.values()) / len(right),
            explanation="; ".join(answer.problems) or None,
            metadata={
                "qualified": answer.qualified,
                "exact": all(right.values()),
                "correct": right,
                "predictions": answer.predictions,
            },
        )


@dataclass(frozen=True, slots=True)
class TextOverlap:
    """An NLG answer against its reference (the impression, or the clinician's rewrite) with one
    text metric; an empty answer is unqualified. With ``content`` (rewriting), so is a rewrite
    without clinical content (:mod:`.rewrite_content`: punctuation, the label alone, under three
    words, none of the sentence's finding words), which scores 0: it restated nothing."""

    metric: str
    content: bool = False

    def __call__(self, text: str, record: SampleRecord) -> Score:
        from clinieval.scoring.text.registry import text_metric

        answer = text.strip()
        reference = str(record.sample.target)
        why = "empty" if not answer else None
        if why is None and self.content:
            why = without_content(answer, str(record.sample.metadata.get("sentence") or ""))
        value = text_metric(self.metric).sentence([answer], [reference])[0] if why is None else 0.0
        meta = {"qualified": why is None, "metric": self.metric}
        if why is not None and answer:
            meta["without_content"] = why
        return Score(value=value, explanation=None if why is None else f"unqualified: {why}", metadata=meta)
