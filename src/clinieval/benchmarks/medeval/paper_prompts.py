"""MedEval's prompts (the paper's Appendix C), zero-shot and k-shot, built character for character.

The paper's strings and each task's layout, with no knowledge of task names: which task uses which
builder is its entry in :data:`~.task_table.TASK_TABLE`, and :mod:`.prompts` builds by task name.

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

from dataclasses import dataclass

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, ReportItem, SentenceItem
from clinieval.errors import UserError

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

ABNORMALITY_EXAMPLES = (
    "Sentence: there is likely left basilar opacity. Label: abnormal.",
    "Sentence: unchanged exam without acute abnormality. Label: normal.",
)
AMBIGUITY_EXAMPLES = (
    "Sentence: lungs are unremarkable. Label: ambiguous.",
    "Sentence: unchanged chronic appearance of the left lung. Label: unambiguous.",
)
REWRITING_EXAMPLES = (
    "Sentence: Lungs are unremarkable. Diagnostic: Normal. Rewrite: Lungs are normal.",
    "Sentence: The lung volumes are low normal. Diagnostic: Normal. Rewrite: The lung volumes are in "
    "the lower range of normal limit.",
    "Sentence: Cardiomegaly and hiatal hernia without an acute abnormality identified. Diagnostic: "
    "Abnormal. Rewrite: Cardiomegaly and hiatal hernia. Without an acute abnormality identified.",
)
"""The paper's fixed few-shot examples (none were published for code prediction or summaries)."""


# --- parts of example lines and queries ------------------------------------------------------


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


def findings_of(item: ReportItem) -> str:
    """What a summary is written from: the FINDINGS section. Never the whole report, which holds
    the impression, the gold summary itself."""
    if not item.findings.strip() or not item.impression.strip():
        raise UserError(
            f"{item.source or item.id}: summarisation needs both a FINDINGS and an IMPRESSION section"
        )
    return item.findings.strip().rstrip(".")


def code_tuples(item: ReportItem, absent_as: str = "unknown") -> str:
    """A report's 14 codes as the answer format asks: ``(No Finding, negative), ...``."""
    values = [item.codes.get(o, "absent") for o in CHEXPERT_OBSERVATIONS]
    shown = [absent_as if v == "absent" else v for v in values]
    return ", ".join(f"({name}, {v})" for name, v in zip(PROMPT_OBSERVATIONS, shown, strict=True))


# --- one example line per task ---------------------------------------------------------------


def label_example(item: SentenceItem, label: str) -> str:
    """A classification example (abnormality, ambiguity): the sentence and its gold label word."""
    return f"Sentence: {item.sentence} Label: {label}."


def rewriting_example(item: SentenceItem) -> str:
    if not item.rewrite:
        raise UserError(f"{item.source or item.id}: a rewriting example needs its rewrite")
    return f"Sentence: {_bare(item.sentence)}. Diagnostic: {diagnostic(item)}. Rewrite: {item.rewrite}"


def codes_example(item: ReportItem) -> str:
    return f"Report: {item.text} Mentioned observations: {code_tuples(item)}"


def summary_example(item: ReportItem) -> str:
    return f"Report: {findings_of(item)}. Summary: {item.impression}"


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


def abnormality_prompt(item: SentenceItem, shots: Shots, with_label: bool = True) -> str:
    """Abnormality identification (``with_label`` concerns rewriting only)."""
    return _with_shots(_ABNORMAL_INTRO, shots, _ABNORMAL_ASK, f"Sentence: {item.sentence} Label:")


def ambiguity_prompt(item: SentenceItem, shots: Shots, with_label: bool = True) -> str:
    """Ambiguity identification (``with_label`` concerns rewriting only)."""
    query = f"Sentence: {item.sentence} Label:"
    if not shots.lines:
        # the paper's zero-shot ambiguity prompt starts its closing instruction on a new line
        return f"{_AMBIGUITY_INTRO}\n{_AMBIGUITY_ASK} {query}"
    return _with_shots(_AMBIGUITY_INTRO, shots, _AMBIGUITY_ASK, query)


def rewriting_prompt(item: SentenceItem, shots: Shots, with_label: bool = True) -> str:
    """Disambiguation rewriting. Zero-shot too carries the sentence's label: every zero-shot rewrite
    prompt the paper shows does (its Appendix C.3 template line alone omits it;
    shared/spec/medeval.md, corrected). ``with_label=False`` gives that label-free query line
    (``Sentence: {}. Rewrite:``), a named option: the model then rewrites without being told the
    finding. Example lines keep their labels, as all of the paper's do."""
    label = f" Diagnostic: {diagnostic(item)}." if with_label else ""
    return _with_shots(
        _REWRITE_INTRO, shots, _REWRITE_ASK, f"Sentence: {_bare(item.sentence)}.{label} Rewrite:"
    )


def codes_prompt(item: ReportItem, shots: Shots) -> str:
    """Code prediction: the introduction holds the whole instruction; no closing one."""
    query = f"Report: {item.text} Mentioned observations:"
    if not shots.lines:
        return f"{_CODES_INTRO} {query}"
    return f"{_CODES_INTRO} {shots.announce()}\n" + "\n".join(shots.lines) + f"\n{query}"


def summary_prompt(item: ReportItem, shots: Shots) -> str:
    """Summarisation of the FINDINGS (:func:`findings_of`); zero-shot's closing instruction differs."""
    query = f"Report: {findings_of(item)}. Summary:"
    ask = _SUMMARY_ASK_FEW if shots.lines else _SUMMARY_ASK_ZERO
    return _with_shots(_SUMMARY_INTRO, shots, ask, query)
