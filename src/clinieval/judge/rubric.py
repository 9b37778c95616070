"""What a judge is asked and how its reply is read: :class:`Rubric`, :class:`Verdict` and the parsers.

A rubric is the prompt for one recorded answer plus the parser for the judge's reply; MedAlign's
clinician criteria, EHRNoteQA's yes/no judge and AutoMedEval-style 1-5 scores are all rubrics.
The parsers here (JSON objects in prose, yes/no, labelled scores, labelled sections) are the
building blocks rubrics compose. Every one raises :class:`VerdictParseError` on a reply it cannot
read, which :func:`clinieval.judge.run.judge_run` records as unscored, never as "no" or 0.

Nothing here calls a model or touches a run directory: that is :mod:`clinieval.judge.run`.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clinieval.records import SampleRecord
from clinieval.types import Message


class VerdictParseError(ValueError):
    """The judge's reply could not be read as a verdict.

    Not a UserError: nothing the user typed is wrong. judge_run records the repeat as unscored
    with this message, so an unreadable reply is counted, never read as "no".
    """


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
# Parsers rubrics compose


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``start``; braces inside quoted strings are skipped."""
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _balanced_objects(text: str) -> Iterator[str]:
    """Every balanced ``{...}`` span in reading order (an enclosing span before those inside it)."""
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end is not None:
            yield text[start : end + 1]
        start = text.find("{", start + 1)


def _as_mapping(span: str) -> dict[str, Any] | None:
    """A span read as a JSON object, or as a Python dict literal (single quotes, True/False)."""
    try:
        value = json.loads(span, strict=False)  # strict=False: raw newlines inside strings
    except (ValueError, RecursionError):  # not JSON, an integer over 4,300 digits, or nested too deep
        if len(span) > 20_000:
            return None
        try:
            value = ast.literal_eval(span)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
            return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return value


def _norm_key(key: str) -> str:
    return key.strip().lower()


def extract_json_object(text: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """The first object in ``text`` that parses and has every ``required`` key (any case).

    Judges wrap JSON in ```json fences, prose before and after, or echo the requested format
    first; scanning every balanced ``{...}`` in order and taking the first complete one reads all
    of these. A Python-style dict (single quotes, True/False) is accepted as well.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    wanted = {_norm_key(k) for k in required}
    found_any = False
    for span in _balanced_objects(text):
        obj = _as_mapping(span)
        if obj is None:
            continue
        found_any = True
        if wanted <= {_norm_key(k) for k in obj}:
            return obj
    if not found_any:
        raise VerdictParseError("no JSON object in the output")
    raise VerdictParseError(f"no JSON object with all of {', '.join(required)}")


def json_field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched case-insensitively; VerdictParseError when absent."""
    wanted = _norm_key(name)
    for key, value in obj.items():
        if _norm_key(key) == wanted:
            return value
    raise VerdictParseError(f"missing field {name!r}")


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
    raise VerdictParseError(f"field {name!r} is not true/false: {str(value)[:40]!r}")


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*$")


def check_range(value: float, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """``value`` if it lies in [low, high] (and is whole when ``integral``); never clipped."""
    if not math.isfinite(value):
        raise VerdictParseError(f"{name} is not a finite number")
    if integral and value != int(value):
        raise VerdictParseError(f"{name} {value:g} is not a whole number")
    if not low <= value <= high:
        raise VerdictParseError(f"{name} {value:g} is outside {low:g}-{high:g}")
    return float(value)


def as_score(value: Any, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """A numeric verdict field: a number, or a string such as ``"4"`` or ``"4/5"``, in range."""
    if isinstance(value, bool):
        raise VerdictParseError(f"field {name!r} is a boolean, not a score")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer with hundreds of digits
            number = math.inf
        return check_range(number, low, high, name, integral=integral)
    if isinstance(value, str):
        m = _NUMBER.match(value)
        if m:
            if m.group(2) is not None and float(m.group(2)) != high:
                raise VerdictParseError(f"{name} {value.strip()!r} is not out of {high:g}")
            return check_range(float(m.group(1)), low, high, name, integral=integral)
    raise VerdictParseError(f"field {name!r} is not a number: {str(value)[:40]!r}")


_MARKUP = re.compile(r"[*_`#>\"']+")
_VERDICT_LABEL = re.compile(
    r"^\s*(?:final\s+)?(?:answer|verdict|conclusion|judg(?:e)?ment|decision|response)\s*[:\-]\s*(.*)$",
    re.IGNORECASE,
)
_FIRST_WORD = re.compile(r"^\W*([A-Za-z]+)")


_NOT_A_VERDICT = re.compile(
    r"^(?:no\s+(?:doubt|way|one|matter|longer|problem|question|wonder|need|worries|more|less)"
    r"|yes\s+and|no\s+and|yes\s+or|no\s+or)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(r"\b(?:yes|no)\s*(?:and|or|/)\s*(?:yes|no)\b", re.IGNORECASE)
_FINAL_WORD = re.compile(r"(?<![\w\"'“”‘’])(yes|no)[.!]?\s*$", re.IGNORECASE)


def _yes_no_word(text: str) -> bool | None:
    """The verdict a reply opens with: ``Yes.``, ``no, because …`` — not ``No doubt, …``."""
    bare = _MARKUP.sub("", text).lstrip()
    if _NOT_A_VERDICT.match(bare):
        return None
    m = _FIRST_WORD.match(bare)
    if m is None:
        return None
    word = m.group(1).lower()
    return True if word == "yes" else False if word == "no" else None


def parse_yes_no(text: str) -> bool:
    """A yes/no verdict: ``Yes.``, ``no, because …``, ``**Yes**``, ``Answer: no`` and the like.

    Read only where a verdict stands: the reply's first word (not an idiom such as "No doubt"),
    a labelled line (``Verdict: yes``), a line that is only yes or no, or an unquoted final word.
    A "no" inside a sentence or in quotes (an echoed instruction such as 'respond "yes" or "no"')
    is never read; a hedge ("yes and no") or replies whose verdicts disagree are a parse failure
    rather than a guess.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    if _HEDGE.search(_MARKUP.sub("", text)):
        raise VerdictParseError("the output hedges between yes and no")
    found: set[bool] = set()
    first = _yes_no_word(text)
    if first is not None:
        found.add(first)
    for line in text.splitlines():
        m = _VERDICT_LABEL.match(_MARKUP.sub("", line))
        candidate = m.group(1) if m else line
        if m or re.fullmatch(r"\W*(yes|no)\W*", candidate, re.IGNORECASE):
            verdict = _yes_no_word(candidate)
            if verdict is not None:
                found.add(verdict)
    final = _FINAL_WORD.search(text.rstrip())
    if final is not None:
        found.add(final.group(1).lower() == "yes")
    if len(found) == 1:
        return found.pop()
    if found:
        raise VerdictParseError("the output says both yes and no")
    raise VerdictParseError("no yes/no verdict in the output")


_SCORE_ANCHORED = (
    r"(?im)^[^\w\n]*{label}[*_`]*\s*(?:[:=]|is\b)\s*[*_`]*\s*"
    r"(-?\d+(?:\.\d+)?)(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?"
)
_SCORE_INLINE = (
    r"(?i)\b{label}[*_`]*\s*[:=]\s*[*_`]*\s*(-?\d+(?:\.\d+)?)(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?"
)
_FRACTION = re.compile(r"(?<![\d.])(-?\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def _one_value(matches: list[re.Match[str]], label: str) -> re.Match[str] | None:
    """The verdict the matches agree on; a parse failure when they disagree."""
    if not matches:
        return None
    values = {(float(m.group(1)), None if m.group(2) is None else float(m.group(2))) for m in matches}
    if len(values) > 1:
        shown = ", ".join(repr(m.group(0).strip()) for m in matches[:3])
        raise VerdictParseError(f"the output gives different {label}s ({shown})")
    return matches[-1]


def parse_score(text: str, low: float, high: float, *, label: str = "score", integral: bool = True) -> float:
    """A numeric verdict: ``Score: 4``, ``score = 3/5``, ``4 out of 5`` or ``4/5``, in range.

    Read where the format puts it: a ``Score:`` line first, then ``score: N`` inside a line, then
    a bare fraction. A number that merely follows the word (an echoed instruction such as
    "Score 1 if the answer is correct") is not a verdict; verdicts that disagree, a fraction out
    of anything but ``high`` and a value outside [low, high] are parse failures (a 7 on a 1-5
    scale is a misread, not a 5).
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    m = None
    name = re.escape(label)
    for pattern in (_SCORE_ANCHORED.format(label=name), _SCORE_INLINE.format(label=name)):
        m = _one_value(list(re.finditer(pattern, text)), label)
        if m is not None:
            break
    if m is None:
        m = _one_value(list(_FRACTION.finditer(text)), label)
        if m is None:
            raise VerdictParseError(f"no {label} in the output")
    if m.group(2) is not None and float(m.group(2)) != high:
        raise VerdictParseError(f"{label} {m.group(0).strip()!r} is not out of {high:g}")
    return check_range(float(m.group(1)), low, high, label, integral=integral)


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
