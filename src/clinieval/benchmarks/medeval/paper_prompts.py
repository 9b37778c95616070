"""MedEval's prompts (the paper's Appendix C), zero-shot and k-shot, built character for character.

The zero-shot prompts and the paper's own few-shot examples are quoted in
``shared/spec/medeval.md``; every string below comes from there. The spec gives the parts of a
few-shot prompt (the introduction, ``Here are N examples.``, the example lines, the closing
instruction) but not what joins them; they are joined here by single spaces within a sentence and a
newline before each example line and before the closing instruction, so the examples stand on lines
of their own. k-shot prompts with examples drawn from the train split use the same layout; the
count is written as the paper writes it (``Here are 2 examples.``, ``Here are three examples.`` for
the paper's rewriting examples, digits otherwise, and ``Here is 1 example.`` for one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, ReportItem, SentenceItem
from clinieval.errors import UserError

TaskName: TypeAlias = Literal["abnormality", "ambiguity", "rewriting", "codes", "summarization"]
TASKS: tuple[TaskName, ...] = ("abnormality", "ambiguity", "rewriting", "codes", "summarization")
SENTENCE_TASKS: tuple[TaskName, ...] = ("abnormality", "ambiguity", "rewriting")

PAPER_SHOTS: dict[TaskName, int] = {
    "abnormality": 2,
    "ambiguity": 2,
    "rewriting": 3,
    "codes": 2,
    "summarization": 3,
}
"""The paper's few-shot setting: as many examples as classes for NLU (2), three for NLG. Code
prediction is multi-label; the paper's NLU rule gives it 2 as well."""

PROMPT_OBSERVATIONS = tuple(
    "Enlarged Cardiomeastinum" if o == "Enlarged Cardiomediastinum" else o for o in CHEXPERT_OBSERVATIONS
)
"""The observations as the paper's prompt spells them (its misspelling "Cardiomeastinum" kept)."""

# --- the paper's strings ---------------------------------------------------------------------

_ABNORMAL_INTRO = (
    "We are here to address a new task, abnormal identification. Given a sentence from a radiology "
    "report, written by a radiologist, please tell if this sentence indicates abnormal findings or not."
)
_ABNORMAL_ASK = (
    "Now here is a new sentence, tell me if it is normal or abnormal, without saying anything else."
)

_AMBIGUITY_DEFINITION = (
    "A sentence is defined to be ambiguous because of (1) medical jargon with meanings different from "
    "everyday general usage, such as unremarkable; (2) contradictory findings in the same sentence; "
    "(3) misleading grammatical errors such as no period between full sentences."
)
_AMBIGUITY_INTRO = (
    "Here is a task to classify ambiguous sentences. Given a sentence in a radiology report, written by "
    "a radiologist, please tell if it is ambiguous. " + _AMBIGUITY_DEFINITION
)
_AMBIGUITY_ASK = (
    'Now given a new sentence, answer me with "ambiguous" or "unambiguous", without saying anything else.'
)

_REWRITE_INTRO = (
    "Here is a task to rewrite ambiguous sentences to be less ambiguous. Given a sentence in a radiology "
    "report, written by a radiologist, please rewrite it to be more explicit about the diagnostic "
    "decision reflected in the sentence, however, maintain the main meaning of the original sentence. "
    + _AMBIGUITY_DEFINITION
)
_REWRITE_ASK = "Now given a new sentence, answer me with its rewrite, without saying anything else."

_CODES_INTRO = (
    "Here is a task to classify the observations of the chest reports. Given a radiology report written "
    "by a radiologist, please predict if every one of the following 14 observations is positive, "
    "negative, or unknown. The 14 observations are "
    + ", ".join(PROMPT_OBSERVATIONS)
    + ". Answer me only with the tuples of each observation and its prediction, without saying anything "
    "else. There should be 14 tuples in your answer and tuples are separated by comma."
)

_SUMMARY_INTRO = (
    "Here is a summarization task. Given a radiology report written by a radiologist, please write a "
    "summary of the report."
)
_SUMMARY_ASK_ZERO = "Answer me with its summary only, without saying anything else."
_SUMMARY_ASK_FEW = "Now given a new report, answer me with its summary only, without saying anything else."

PAPER_EXAMPLES: dict[TaskName, tuple[str, ...]] = {
    "abnormality": (
        "Sentence: there is likely left basilar opacity. Label: abnormal.",
        "Sentence: unchanged exam without acute abnormality. Label: normal.",
    ),
    "ambiguity": (
        "Sentence: lungs are unremarkable. Label: ambiguous.",
        "Sentence: unchanged chronic appearance of the left lung. Label: unambiguous.",
    ),
    "rewriting": (
        "Sentence: Lungs are unremarkable. Diagnostic: Normal. Rewrite: Lungs are normal.",
        "Sentence: The lung volumes are low normal. Diagnostic: Normal. Rewrite: The lung volumes are in "
        "the lower range of normal limit.",
        "Sentence: Cardiomegaly and hiatal hernia without an acute abnormality identified. Diagnostic: "
        "Abnormal. Rewrite: Cardiomegaly and hiatal hernia. Without an acute abnormality identified.",
    ),
}
"""The paper's fixed few-shot examples (none were published for code prediction or summaries)."""


# --- example lines from data -----------------------------------------------------------------


def _bare(sentence: str) -> str:
    """A sentence without its final period, for templates that add one (``Sentence: {}.``)."""
    return sentence.strip().rstrip(".").rstrip()


def diagnostic(item: SentenceItem) -> str:
    """``Normal`` or ``Abnormal``: the label the rewriting prompt carries with each sentence."""
    if item.abnormal is None:
        raise UserError(
            f"{item.source or item.id}: the rewriting task needs the sentence's normal/abnormal label"
        )
    return "Abnormal" if item.abnormal else "Normal"


def example_line(task: TaskName, item: SentenceItem | ReportItem) -> str:
    """One few-shot example in the layout of the paper's examples for ``task``."""
    if task in ("abnormality", "ambiguity") and isinstance(item, SentenceItem):
        return f"Sentence: {item.sentence} Label: {gold_label(task, item)}."
    if task == "rewriting" and isinstance(item, SentenceItem):
        if not item.rewrite:
            raise UserError(f"{item.source or item.id}: a rewriting example needs its rewrite")
        return f"Sentence: {_bare(item.sentence)}. Diagnostic: {diagnostic(item)}. Rewrite: {item.rewrite}"
    if task == "codes" and isinstance(item, ReportItem):
        return f"Report: {item.text} Mentioned observations: {code_tuples(item)}"
    if task == "summarization" and isinstance(item, ReportItem):
        return f"Report: {findings_of(item)}. Summary: {item.impression}"
    raise UserError(f"task {task}: an example must be a {'sentence' if task in SENTENCE_TASKS else 'report'}")


def findings_of(item: ReportItem) -> str:
    """What a summary is written from: the FINDINGS section. Never the whole report, which holds
    the impression, the gold summary itself."""
    if not item.findings.strip() or not item.impression.strip():
        raise UserError(
            f"{item.source or item.id}: summarisation needs both a FINDINGS and an IMPRESSION section"
        )
    return item.findings.strip().rstrip(".")


def gold_label(task: TaskName, item: SentenceItem) -> str:
    """The label word a sentence-classification answer should be."""
    if task == "abnormality" and item.abnormal is not None:
        return "abnormal" if item.abnormal else "normal"
    if task == "ambiguity" and item.ambiguous is not None:
        return "ambiguous" if item.ambiguous else "unambiguous"
    raise UserError(f"{item.source or item.id}: no {task} label")


def code_tuples(item: ReportItem, absent_as: str = "unknown") -> str:
    """A report's 14 codes as the answer format asks: ``(No Finding, negative), ...``."""
    values = [item.codes.get(o, "absent") for o in CHEXPERT_OBSERVATIONS]
    shown = [absent_as if v == "absent" else v for v in values]
    return ", ".join(f"({name}, {v})" for name, v in zip(PROMPT_OBSERVATIONS, shown, strict=True))


# --- whole prompts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shots:
    """The few-shot examples of a prompt, already written as lines, and how to announce them."""

    lines: tuple[str, ...] = ()
    paper: bool = False

    def announce(self) -> str:
        n = len(self.lines)
        if self.paper and n == 3:
            return "Here are three examples."
        return "Here is 1 example." if n == 1 else f"Here are {n} examples."


def _with_shots(intro: str, shots: Shots, ask: str, query: str) -> str:
    if not shots.lines:
        return f"{intro} {ask} {query}"
    examples = "\n".join(shots.lines)
    return f"{intro} {shots.announce()}\n{examples}\n{ask} {query}"


def sentence_prompt(
    task: TaskName, item: SentenceItem, shots: Shots = Shots(), *, with_label: bool = True
) -> str:
    """The prompt for one sentence-level item (abnormality, ambiguity or rewriting).

    ``with_label=False`` gives rewriting Appendix C.3's label-free query line (``Sentence: {}.
    Rewrite:``), a named option: the model then rewrites without being told the finding. Example
    lines keep their labels, as all of the paper's do."""
    if task == "abnormality":
        return _with_shots(_ABNORMAL_INTRO, shots, _ABNORMAL_ASK, f"Sentence: {item.sentence} Label:")
    if task == "ambiguity":
        # the paper's zero-shot ambiguity prompt starts its closing instruction on a new line
        query = f"Sentence: {item.sentence} Label:"
        if not shots.lines:
            return f"{_AMBIGUITY_INTRO}\n{_AMBIGUITY_ASK} {query}"
        return _with_shots(_AMBIGUITY_INTRO, shots, _AMBIGUITY_ASK, query)
    if task == "rewriting":
        # zero-shot too carries the sentence's label: every zero-shot rewrite prompt the paper shows
        # does (its Appendix C.3 template line alone omits it; shared/spec/medeval.md, corrected)
        label = f" Diagnostic: {diagnostic(item)}." if with_label else ""
        query = f"Sentence: {_bare(item.sentence)}.{label} Rewrite:"
        if not shots.lines:
            return f"{_REWRITE_INTRO} {_REWRITE_ASK} {query}"
        return _with_shots(_REWRITE_INTRO, shots, _REWRITE_ASK, query)
    raise UserError(f"task {task} is a report task, not a sentence task")


def report_prompt(task: TaskName, item: ReportItem, shots: Shots = Shots()) -> str:
    """The prompt for one report-level item (code prediction or summarisation)."""
    if task == "codes":
        query = f"Report: {item.text} Mentioned observations:"
        if not shots.lines:
            return f"{_CODES_INTRO} {query}"
        return f"{_CODES_INTRO} {shots.announce()}\n" + "\n".join(shots.lines) + f"\n{query}"
    if task == "summarization":
        text = findings_of(item)
        if not shots.lines:
            return f"{_SUMMARY_INTRO} {_SUMMARY_ASK_ZERO} Report: {text}. Summary:"
        return _with_shots(_SUMMARY_INTRO, shots, _SUMMARY_ASK_FEW, f"Report: {text}. Summary:")
    raise UserError(f"task {task} is a sentence task, not a report task")


def paper_shots(task: TaskName) -> Shots:
    """The paper's own examples for ``task``; code prediction and summaries have none published."""
    lines = PAPER_EXAMPLES.get(task)
    if lines is None:
        raise UserError(
            f"the paper published no few-shot examples for {task}; "
            "use --shots N to draw them from the train split"
        )
    return Shots(lines, paper=True)


def data_shots(task: TaskName, examples: Sequence[SentenceItem | ReportItem]) -> Shots:
    """Examples drawn from the data (the train split), written in the paper's layout."""
    return Shots(tuple(example_line(task, x) for x in examples))
