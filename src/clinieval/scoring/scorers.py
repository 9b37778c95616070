"""Scorers: turn one persisted model answer into a :class:`Score`.

Scorers read only what a run directory holds (the sample and the model's recorded outputs), so
``clinieval score RUN`` can apply any of them later without calling the model under test.

A failed model call is never scored as wrong here: the score's value is ``None`` and its
metadata carries the error kind, and the summary decides how to show it (both views).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.choices import read_choice, shows_lettered
from clinieval.types import JSON, ModelOutput, Score

ECHOED_PROMPT = "echoed_prompt"
"""Why an answer is left unscored when it mostly repeats its prompt (a base model behind a chat
template); the run counts and names it (summary.echo_count)."""

Needs = Literal["generate", "loglikelihood"]


class Scorer(Protocol):
    """Scores one sample from its record."""

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> Needs:
        """Which model request the scorer reads: generated text or choice log-likelihoods."""
        ...

    @property
    def needs_choices(self) -> bool:
        """Whether every sample must carry ``choices`` (checked before a run starts)."""
        ...

    def score(self, record: SampleRecord) -> Score: ...


def failed_score(kind: str | None, message: str | None) -> Score:
    """An unscored result carrying why the model call failed (never a 0)."""
    return Score(value=None, explanation=message, metadata={"error_kind": kind})


def no_reference() -> Score:
    """An unscored result for a sample with nothing to compare against: neither right nor wrong,
    and not a failure (the summary counts it as ``unscored``, outside both means)."""
    return Score(value=None, metadata={"unscored": "no_reference"})


def generated_output(record: SampleRecord, scorer: str) -> ModelOutput:
    """The record's generated output, or a UserError for runs made without generation."""
    if record.output is None:
        raise UserError(f"scorer {scorer}: the run holds no generated text; run it with generation")
    return record.output


class AnswerScorer:
    """The first step every scorer of a generated answer shares.

    :meth:`score` reads the record's generated answer (a UserError for runs made without
    generation); a failed call stays unscored with its error kind, never a 0, and a successful
    one goes to :meth:`score_text`. A scorer that must refuse a sample even when its call failed
    (a set without answer keys) does so in :meth:`check`, which runs first.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The scorer's name (a subclass's field or property)."""
        raise NotImplementedError

    def score(self, record: SampleRecord) -> Score:
        self.check(record)
        out = generated_output(record, self.name)
        if not out.ok:
            return failed_score(out.error_kind, out.error_message)
        return self.score_text(record, out.text)

    def check(self, record: SampleRecord) -> None:
        """Raise a UserError for a sample this scorer can never score (nothing to check by default)."""

    def score_text(self, record: SampleRecord, text: str) -> Score:
        """The score of a successful call's answer ``text``."""
        raise NotImplementedError


class LoglikScorer:
    """The first step every scorer of log-likelihoods shares.

    :meth:`score` reads the record's log-likelihoods (a UserError ending in ``LOGLIK_FIX``, how
    to make a run that has them, when it holds none); a failed call stays unscored with its error
    kind, and a successful one goes to :meth:`score_logliks`.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The scorer's name (a subclass's field or property)."""
        raise NotImplementedError

    LOGLIK_FIX: ClassVar[str]

    def score(self, record: SampleRecord) -> Score:
        ll = record.loglik
        if ll is None:
            raise UserError(f"scorer {self.name}: the run holds no log-likelihoods; {self.LOGLIK_FIX}")
        if not ll.ok:
            return failed_score(ll.error_kind, ll.error_message)
        return self.score_logliks(record, ll.logliks)

    def score_logliks(self, record: SampleRecord, logliks: list[float]) -> Score:
        """The score of a successful call's log-likelihoods."""
        raise NotImplementedError


def extract_choice(
    text: str, choices: tuple[str, ...], *, lettered: bool = False, sent: Sequence[str] = ()
) -> str | None:
    """Which choice a free-text answer commits to, as written in the sample; None when it commits
    to none (:func:`clinieval.scoring.choices.read_choice` says why, under the reading policy of
    docs/judge.md: several options named, a conflict, a refusal, an echo of the prompt ...).

    With ``lettered`` (the prompt listed the choices as ``A. ...`` lines) a letter counts: a
    leading label (``B``, ``B.``, ``(B)``) or a cue (``Answer: B``). Without it a letter is never
    read (PubMedQA's yes/no/maybe are not lettered: a model that answers "C" did not choose
    "maybe"). ``sent`` is what the model was sent: a copy of it in the answer is never read.
    """
    reading = read_choice(text, choices, lettered=lettered, sent=sent)
    return None if reading.index is None else choices[reading.index]


@dataclass(frozen=True, slots=True)
class ChoiceExtraction(AnswerScorer):
    """Accuracy of the choice read out of generated text.

    An answer that commits to no choice (several options named, a conflict, a refusal) counts as
    wrong and is flagged ``unparsed`` with its ``reason``; one that mostly repeats its prompt is
    unscored (``echoed_prompt``), since it is no answer at all. A letter is accepted only when the
    record's messages (the prompt as sent) listed the choices lettered, so the same scorer serves
    lettered tasks and PubMedQA's unlettered yes/no/maybe.
    """

    name: str = "choice_extract"
    needs: Needs = "generate"
    needs_choices: bool = True

    def score_text(self, record: SampleRecord, text: str) -> Score:
        sample = record.sample
        if not sample.all_targets:
            return no_reference()
        sent = [m.content for m in record.messages]
        lettered = shows_lettered(sent, sample.choices)
        reading = read_choice(text, sample.choices, lettered=lettered, sent=sent)
        if reading.reason == ECHOED_PROMPT:  # the prompt, not an answer: left out, counted
            return Score(value=None, metadata={"unscored": ECHOED_PROMPT, "unparsed": True})
        answer = None if reading.index is None else sample.choices[reading.index]
        accepted = {t.lower() for t in _targets_as_choices(sample.all_targets, sample.choices, lettered)}
        correct = answer is not None and answer.lower() in accepted
        metadata: JSON = {"unparsed": answer is None}
        if reading.reason is not None:
            metadata["reason"] = reading.reason
        return Score(value=1.0 if correct else 0.0, answer=answer, metadata=metadata)


def _targets_as_choices(targets: tuple[str, ...], choices: tuple[str, ...], lettered: bool) -> list[str]:
    """The targets, with a letter target (``"B"``) also meaning its choice when the options were
    shown lettered, so a file may give the answer either way (a letter that is itself a choice
    keeps its meaning)."""
    found = list(targets)
    if lettered:
        for t in targets:
            letter = t.strip().upper()
            index = ord(letter) - ord("A") if len(letter) == 1 else -1
            if 0 <= index < len(choices) and t not in choices:
                found.append(choices[index])
    return found


@dataclass(frozen=True, slots=True)
class ChoiceLoglik(LoglikScorer):
    """Accuracy of the highest log-likelihood choice; ``normalize`` divides by characters (acc_norm)."""

    name: str = "choice_loglik"
    needs: Needs = "loglikelihood"
    needs_choices: bool = True
    normalize: bool = False
    LOGLIK_FIX: ClassVar[str] = "run it with a log-likelihood scorer"

    def score_logliks(self, record: SampleRecord, logliks: list[float]) -> Score:
        if not record.sample.all_targets:
            return no_reference()
        choices = record.sample.choices
        values = list(logliks)
        if self.normalize:
            values = [v / max(1, len(c)) for v, c in zip(values, choices, strict=True)]
        best = max(range(len(values)), key=lambda i: values[i])
        answer = choices[best]
        correct = answer.lower() in {t.lower() for t in record.sample.all_targets}
        probs = _softmax(values)
        return Score(
            value=1.0 if correct else 0.0,
            answer=answer,
            metadata={"logliks": dict(zip(choices, logliks, strict=True)), "p_answer": probs[best]},
        )


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _normalize_text(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


@dataclass(frozen=True, slots=True)
class ExactMatch(AnswerScorer):
    """1 when the normalised answer equals a normalised target."""

    name: str = "exact_match"
    needs: Needs = "generate"
    needs_choices: bool = False

    def score_text(self, record: SampleRecord, text: str) -> Score:
        if not record.sample.all_targets:
            return no_reference()
        got = _normalize_text(text)
        hit = any(got == _normalize_text(t) for t in record.sample.all_targets)
        return Score(value=1.0 if hit else 0.0, answer=text.strip())


@dataclass(frozen=True, slots=True)
class Answered(AnswerScorer):
    """1 when the model gave a non-empty answer: the only reference-free check of a free-text task
    (its quality is scored afterwards by text metrics and judges over the saved run)."""

    name: str = "answered"
    needs: Needs = "generate"
    needs_choices: bool = False

    def score_text(self, record: SampleRecord, text: str) -> Score:
        return Score(value=1.0 if text.strip() else 0.0, metadata={"chars": len(text)})
