"""EHRNoteQA's three scoring modes: the LLM judge, answer-letter extraction, option log-likelihood.

* **Judge** (the paper's mode): :class:`ChoiceJudgeRubric` is Appendix A.3's yes/no prompt,
  verbatim; :class:`FreeTextJudgeRubric` the 0/1 judge of free-text answers that also sees the
  notes. Both run through :func:`clinieval.judge.run.judge_run` (repeats as distinct cached
  requests, unreadable verdicts unscored and counted, never "no").
* **Letter extraction** (:class:`LetterExtraction`): deterministic, no second model. It reads
  the letter a generated answer gives (``B``, ``(B)``, ``B. text``, ``The answer is B``) or, failing
  that, the one option whose text the answer contains.
* **Log-likelihood** (:class:`OptionLoglik`): the option whose letter (or text) the model finds
  most likely after the prompt; no generation at all. One request scores the five letters and
  the five texts (:func:`option_continuations`), so both variants cost one prompt evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from clinieval.errors import UserError
from clinieval.judge.rubric import Verdict, parse_score, parse_yes_no
from clinieval.judge.verdict import score_marker, section
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.choices import read_choice
from clinieval.scoring.echo import mask_copies
from clinieval.scoring.scorers import ECHOED_PROMPT, AnswerScorer, LoglikScorer, Needs
from clinieval.task import LETTERS, option_lines
from clinieval.types import Message, Sample, Score

# --------------------------------------------------------------------------------------------
# Log-likelihood of the options


def option_continuations(sample: Sample) -> tuple[str, ...]:
    """`` A`` .. `` E`` then `` <text A>`` .. `` <text E>``: what one log-likelihood request scores.

    The leading space is the delimiter after the prompt's ``Answer :`` (as lm-evaluation-harness
    joins a prompt and its target).
    """
    letters = tuple(f" {LETTERS[i]}" for i in range(len(sample.choices)))
    return (*letters, *(f" {c}" for c in sample.choices))


@dataclass(frozen=True, slots=True)
class OptionLoglik(LoglikScorer):
    """Accuracy of the most likely option letter (``mode="letter"``) or option text (``"text"``)."""

    mode: Literal["letter", "text"] = "letter"
    needs: Needs = "loglikelihood"
    needs_choices: bool = True
    LOGLIK_FIX: ClassVar[str] = "run it without --no-loglik"

    @property
    def name(self) -> str:
        return f"loglik_{self.mode}"

    def score_logliks(self, record: SampleRecord, logliks: list[float]) -> Score:
        n = len(record.sample.choices)
        if len(logliks) != 2 * n:
            raise UserError(
                f"scorer {self.name}: sample {record.sample.id} has {len(logliks)} log-likelihoods, "
                f"expected {2 * n} (letters then texts); was the run made by `clinieval ehrnoteqa run`?"
            )
        values = logliks[:n] if self.mode == "letter" else logliks[n:]
        best = max(range(n), key=lambda i: values[i])
        letter = LETTERS[best]
        gold = str(record.sample.metadata.get("answer"))
        return Score(
            value=1.0 if letter == gold else 0.0,
            answer=letter,
            metadata={"logliks": dict(zip(LETTERS[:n], values, strict=True))},
        )


# --------------------------------------------------------------------------------------------
# Deterministic letter extraction

_NORM = re.compile(r"[^a-z0-9]+")


def _norm(text: str) -> str:
    return " " + _NORM.sub(" ", text.lower()).strip() + " "


def _by_text(answer: str, choices: tuple[str, ...]) -> str | None:
    """The one option whose text the answer contains (an option inside a longer one yields)."""
    said = _norm(answer)
    found = [i for i, c in enumerate(choices) if _norm(c).strip() and _norm(c) in said]
    found = [i for i in found if not any(j != i and _norm(choices[i]) in _norm(choices[j]) for j in found)]
    return LETTERS[found[0]] if len(found) == 1 else None


def extract_letter(
    answer: str, choices: tuple[str, ...], sent: Sequence[str] = ()
) -> tuple[str | None, str | None]:
    """(letter, how it was read) from a generated answer, or (None, why not).

    The project's reading policy (docs/judge.md) through the shared
    :func:`clinieval.scoring.choices.read_choice`: a leading label, an "answer is X" cue, the
    option the answer opens or closes with; several options named, a conflict, a refusal or an
    echo of the prompt (``sent``) is no answer, with its reason. An answer that names no option
    that way is read by the one option whose text it contains once punctuation is set aside.
    Letters must be capitals, so the article "a" is never an answer.
    """
    reading = read_choice(answer, choices, lettered=True, sent=sent)
    if reading.index is not None:
        return LETTERS[reading.index], reading.how
    if reading.reason != "no_verdict":
        return None, reading.reason
    own = mask_copies(answer, sent, keep=choices) if sent else answer
    letter = _by_text(own, choices)  # markup is punctuation to _norm
    return (letter, "text") if letter else (None, "no_verdict")


@dataclass(frozen=True, slots=True)
class LetterExtraction(AnswerScorer):
    """Accuracy of the option read out of the generated answer.

    An answer that commits to no option is wrong (the model did not choose) and flagged
    ``unparsed`` with its reason, so its rate is reported; one that mostly repeats its prompt is
    unscored (``echoed_prompt``); a failed model call stays unscored with its error kind.
    """

    name: str = "letter_extract"
    needs: Needs = "generate"
    needs_choices: bool = True

    def score_text(self, record: SampleRecord, text: str) -> Score:
        letter, how = extract_letter(text, record.sample.choices, [m.content for m in record.messages])
        if how == ECHOED_PROMPT:
            return Score(value=None, metadata={"unscored": ECHOED_PROMPT, "unparsed": True})
        gold = str(record.sample.metadata.get("answer"))
        why = {"read_by": how} if letter is not None else {"reason": how}
        return Score(
            value=1.0 if letter == gold else 0.0, answer=letter, metadata={"unparsed": letter is None, **why}
        )


# --------------------------------------------------------------------------------------------
# Judge rubrics

CHOICE_JUDGE_PROMPT = (
    "Your task is to evaluate the provided model output by determining whether it matches the correct "
    "answer from the multiple-choice options provided. The model output is correct and should be met "
    'with a "yes" if it accurately reflects the content of the correct answer choice, not necessarily '
    "its exact wording. If the content of the model output aligns with the correct answer choice, "
    'despite any additional details or varied phrasing, you are to respond "yes". Should the model '
    "output diverge in meaning or substance from the correct answer\u2014whether by selecting an "
    "alternative choice or providing a response not aligning with any provided options\u2014a response "
    'of "no" is necessary. Model Output: {output} Answer Choices: {choices} Correct Answer: {answer} '
    "With the given information, do you conclude that the model output substantively matches the "
    'correct answer provided? Respond solely with "yes" or "no"'
)
"""EHRNoteQA Appendix A.3, verbatim."""

FREE_TEXT_JUDGE_PROMPT = (
    "You are given a patient's discharge summaries, a question about them, the correct answer and "
    "a model's answer. Decide whether the model's answer is correct.\n\n"
    "Discharge Summary :\n{notes}\n\n"
    "Question : {question}\n"
    "Correct Answer : {answer}\n"
    "Model Answer : {output}\n\n"
    "Score 1 if the model's answer is correct: it conveys the content of the correct answer, in "
    "any wording. Score 0 if it is incorrect, or if it claims that the discharge summaries do not "
    "contain the answer.\n"
    "Reply in exactly this format:\n"
    "Score: <0 or 1>\n"
    "Reasoning: <your explanation>"
)
"""The project's wording of the public code's free-text judge (its reply format is the paper's:
``Score: 0|1`` then ``Reasoning:``); the paper does not print this prompt."""


def _gold(record: SampleRecord) -> tuple[str, str]:
    letter = str(record.sample.metadata.get("answer"))
    if letter not in LETTERS[: len(record.sample.choices)]:
        raise UserError(f"sample {record.sample.id}: no answer letter; was it loaded by clinieval ehrnoteqa?")
    return letter, record.sample.choices[LETTERS.index(letter)]


@dataclass(frozen=True, slots=True)
class ChoiceJudgeRubric:
    """The paper's judge of multiple-choice answers: yes (1) or no (0)."""

    name: str = "ehrnoteqa_judge"
    fields: tuple[str, ...] = ("correct",)

    def messages(self, record: SampleRecord) -> list[Message]:
        assert record.output is not None
        letter, text = _gold(record)
        prompt = CHOICE_JUDGE_PROMPT.format(
            output=record.output.text.strip(),
            choices=option_lines(record.sample.choices),
            answer=f"{letter}. {text}",
        )
        return [Message("user", prompt)]

    def parse(self, text: str) -> Verdict:
        # the final verdict block: the last labelled yes/no line, else the whole (short) reply
        return Verdict({"correct": 1.0 if parse_yes_no(text) else 0.0})


@dataclass(frozen=True, slots=True)
class FreeTextJudgeRubric:
    """The 0/1 judge of free-text answers, shown the notes; ``Score: N`` then ``Reasoning:``."""

    name: str = "ehrnoteqa_free_judge"
    fields: tuple[str, ...] = ("correct",)

    def messages(self, record: SampleRecord) -> list[Message]:
        assert record.output is not None
        _, text = _gold(record)
        prompt = FREE_TEXT_JUDGE_PROMPT.format(
            notes=record.sample.context,
            question=record.sample.input,
            answer=text,
            output=record.output.text.strip(),
        )
        return [Message("user", prompt)]

    def parse(self, text: str) -> Verdict:
        # Only a 0/1 score counts: "Score: correct" or a bare yes/no is a VerdictParseError (unscored).
        # The final Score: line is the verdict; its Reasoning: is the last one, up to a later Score: line.
        value = parse_score(text, 0, 1)
        return Verdict({"correct": value}, rationale=section(text, "Reasoning", stop=score_marker()))


__all__ = [
    "CHOICE_JUDGE_PROMPT",
    "FREE_TEXT_JUDGE_PROMPT",
    "ChoiceJudgeRubric",
    "FreeTextJudgeRubric",
    "LetterExtraction",
    "OptionLoglik",
    "extract_letter",
    "option_continuations",
]
