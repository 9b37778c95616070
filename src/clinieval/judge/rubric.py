"""What a judge is asked and how its reply is read: :class:`Rubric`, :class:`Verdict` and the parsers.

A rubric is the prompt for one recorded answer plus the parser for the judge's reply; MedAlign's
clinician criteria, EHRNoteQA's yes/no judge and AutoMedEval-style 1-5 scores are all rubrics.
The parsers here (JSON objects in prose, yes/no, labelled scores, labelled sections) are the
building blocks rubrics compose; each reads only the reply's final verdict block, the principle
:mod:`clinieval.judge.verdict` states. Every one raises :class:`VerdictParseError` (with a typed
``reason``) on a reply it cannot read, which :func:`clinieval.judge.run.judge_run` records as
unscored, never as "no" or 0.

Nothing here calls a model or touches a run directory: that is :mod:`clinieval.judge.run`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clinieval.judge.verdict import VerdictParseError, check_range, read_number, score_verdict
from clinieval.judge.verdict_json import final_json_object, json_field
from clinieval.judge.verdict_yes_no import yes_no_verdict
from clinieval.records.sample_record import SampleRecord
from clinieval.types import Message


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a rubric read from one judge reply; the raw reply is kept by the caller."""

    values: dict[str, float]
    rationale: str | None = None


class Rubric(Protocol):
    """A judging protocol: the prompt for one recorded answer and the parser for the reply."""

    @property
    def name(self) -> str:
        """File name of the scores (``scores/NAME.jsonl``) and part of every judge cache key."""
        ...

    @property
    def fields(self) -> tuple[str, ...]:
        """The numeric fields every verdict carries; the first is the score's ``value``."""
        ...

    def messages(self, record: SampleRecord) -> list[Message]:
        """The judge prompt for the answer in ``record`` (called only when the answer exists)."""
        ...

    def parse(self, text: str) -> Verdict:
        """Read a judge reply; raise VerdictParseError when it cannot be read."""
        ...


# --------------------------------------------------------------------------------------------
# Parsers rubrics compose: every one reads only the reply's final verdict block
# (:mod:`clinieval.judge.verdict` states the principle and holds the readers).


def extract_json_object(text: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """The reply's final verdict object: the last object that has every ``required`` key (any
    case), not one nested in another (:func:`clinieval.judge.verdict_json.final_json_object`).

    Judges wrap JSON in ```json fences, prose before and after, or echo the requested format
    first (not JSON, so never read); a verdict corrected by a later object is not read, and a key
    given twice with different values is unparsed. A Python-style dict (single quotes,
    True/False) is accepted as well.
    """
    return final_json_object(text, required)


_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0"})


def as_bool(value: Any, name: str) -> bool:
    """A boolean verdict field: true/false, 1/0, or the strings yes/no/true/false (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().strip(".!*`'\" ").lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise VerdictParseError(f"field {name!r} is not true/false: {str(value)[:40]!r}", "not_a_verdict")


def as_score(value: Any, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """A numeric verdict field: a number, or a string such as ``"4"`` or ``"4/5"``, in range; a
    decimal, a range (``"3-4"``) and a fraction of another scale are unparsed with their reason."""
    if isinstance(value, bool):
        raise VerdictParseError(f"field {name!r} is a boolean, not a score", "not_a_verdict")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer with hundreds of digits
            number = math.inf
        return check_range(number, low, high, name, integral=integral)
    if isinstance(value, str):
        read = read_number(value, 0, low, high, name, integral=integral)
        if read is not None and not value[read.end :].strip():
            return read.value
    raise VerdictParseError(f"field {name!r} is not a number: {str(value)[:40]!r}", "not_a_verdict")


def parse_yes_no(text: str) -> bool:
    """A yes/no verdict: ``Yes.``, ``no, because …``, ``**Yes**``, ``Answer: no`` and the like.

    The final verdict block is read: the reply's last labelled line that holds a yes or no
    (``Verdict: yes``, ``Final answer: no``; an earlier one, corrected or an echoed format, is
    not read). Without one the whole reply is the block: its first word (not an idiom such as
    "No doubt"), a line that is only yes or no and an unquoted final word must agree. A "no"
    inside a sentence or in quotes is never read; a hedge ("yes and no") or a block that says
    both is a parse failure rather than a guess.
    """
    return yes_no_verdict(text)


def parse_score(text: str, low: float, high: float, *, label: str = "score", integral: bool = True) -> float:
    """A numeric verdict: ``Score: 4``, ``score = 3/5``, ``4 out of 5`` or ``4/5``, in range.

    Read where the format puts it: the last ``Score:`` line (an echoed format or a corrected
    verdict before it is not read), else the last ``score: N`` inside a line, else the reply's one
    fraction. A number that merely follows the word (an echoed instruction such as "Score 1 if
    the answer is correct") is not a verdict; a decimal, a range (``3-4``), a fraction out of
    anything but ``high`` and a value outside [low, high] are parse failures (a 7 on a 1-5 scale
    is a misread, not a 5).
    """
    return score_verdict(text, low, high, label=label, integral=integral)


def strip_echo(reply: str, prompt: str) -> str:
    """``reply`` without an echo of ``prompt``: small models often repeat the instruction before
    (or instead of) answering, and the instruction's own words ("Score 1 if ...", 'respond "yes"')
    must never be read as the verdict. Whatever follows the last full echo is the reply."""
    tail = prompt.strip()[-200:]
    if len(tail) < 20:
        return reply
    at = reply.rfind(tail)
    return reply if at < 0 else reply[at + len(tail) :]


def labelled_text(text: str, label: str) -> str | None:
    """Everything after ``LABEL:`` on its line and below (e.g. a ``Reasoning:`` section)."""
    # markup closing the label ("**Reasoning:** ...") is not part of the text
    m = re.search(rf"(?im)^[\W_]*{re.escape(label)}[\W_]*?\s*:\s*[*_`]*\s*", text)
    if m is None:
        return None
    rest = text[m.end() :].strip()
    return rest or None


__all__ = [
    "Rubric",
    "Verdict",
    "VerdictParseError",
    "as_bool",
    "as_score",
    "check_range",
    "extract_json_object",
    "json_field",
    "labelled_text",
    "parse_score",
    "parse_yes_no",
    "strip_echo",
]
