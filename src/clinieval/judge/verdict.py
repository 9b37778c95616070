"""How every judge's reply is read: only its final verdict block, never the rationale or an echo.

One principle for every judge in the package (AutoMedEval's ``Score: Doctor N: X points``,
EHRNoteQA's yes/no and ``Score: 0|1`` judges, MedAlign's JSON object, the ``Verdict: yes|no``
reference rubric):

* **The verdict is the final block the format declares.** AutoMedEval's is what follows the
  reply's *last* ``Score:``; a ``Score: N`` rubric's is its last ``Score:`` line; a yes/no
  rubric's its last labelled line (``Verdict:``, ``Answer:``); a JSON rubric's its last verdict
  object. A rationale that says "Doctor 1: 3 key facts", a quoted answer ("Doctor 1: 2 tablets
  daily"), an echoed prompt or format, and a verdict the judge corrected later are all before the
  final block, so none of them is read.
* **The final block must say one thing.** Two different values in it (``Doctor 1: 4 ... Doctor 1:
  2``, ``yes. On reflection, no.``, a JSON key given twice), a decimal (``3.5``), a range
  (``3-4``, ``2 or 3``), a value outside the scale, a missing or an extra item are *unparsed*,
  each with its :data:`Reason`, never rounded, clipped or guessed.
* **What a careful reader tolerates is tolerated**: full-width colons (U+FF1A), bold or italic
  markdown around labels and values, any case, ``points``/``point``/``/5``, extra whitespace,
  a trailing period.
* **The rationale is what precedes the verdict block** (or, for a verdict written first, what
  follows it; or the format's labelled section such as ``Reasoning:``).

These rules are the judges' part of the project's reading policy (docs/judge.md, "Reading
policy"; :mod:`clinieval.scoring.reading`): a value only when the reply commits to one; a stated
revision ("on reflection", "Corrected:", "Final score:") replaces what it revises, while two
verdicts with no revision stated between them are ``conflict`` and a hedge is ``hedged``;
refusals are ``refusal``; and copies of the prompt are masked before any reader looks
(:mod:`clinieval.judge.quoted`).

Nothing here knows a benchmark: a benchmark passes in what is its own (the worked example its
one-shot prompt shows, the header that starts a new item).

This module states the principle and holds what every reader shares (:data:`Reason`,
:class:`VerdictParseError`, the tolerated markup, :func:`read_number`) with the line-based
readers of one labelled score (``Score: N``) and of a labelled section (the rationale). The
numbered scores reader (``Doctor N: X points``) is :mod:`clinieval.judge.verdict_numbered`, the
yes/no reader :mod:`clinieval.judge.verdict_yes_no`, the JSON object reader
:mod:`clinieval.judge.verdict_json`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from clinieval.scoring.reading import REVISED_LABEL, hedges, is_refusal, revised_later, revises

Reason = Literal[
    "empty",
    "no_verdict",
    "not_a_verdict",
    "echo",
    "decimal",
    "range",
    "out_of_range",
    "wrong_scale",
    "conflict",
    "missing",
    "extra",
    "order",
    "hedged",
    "several_options",
    "refusal",
    "echoed_prompt",
]
"""Why a reply is unparsed:

* ``empty``: no text at all;
* ``no_verdict``: no verdict block (no ``Score:`` line, no ``Verdict:`` line, no JSON object);
* ``not_a_verdict``: the block holds something else (``Doctor 1: X points``, ``<yes or no>``,
  ``Answer: (B)`` to a yes/no judge, ``"C1": "maybe"``): often the format, echoed;
* ``echo``: the only verdict is a copy of the prompt's worked example;
* ``decimal``: a fractional score (``3.5``) on a whole-number scale;
* ``range``: two values for one score (``3-4``, ``3 to 4``, ``2 or 3``);
* ``out_of_range``: a value outside the scale (``Doctor 1: 6``, ``Score: 2`` for 0/1);
* ``wrong_scale``: a fraction of another scale (``4/10`` on 1-5);
* ``conflict``: the final block gives the verdict twice with different values, or hedges;
* ``missing``: an item (a doctor, a JSON field) has no value;
* ``extra``: a value for an item that does not exist (``Doctor 4`` of three answers);
* ``order``: the items are not in the order the format fixes (AutoMedEval: Doctor 1..k);
* ``hedged``: the verdict hedges between values ("3 (maybe 4)", "yes or no");
* ``several_options``: the reply names several options without choosing one;
* ``refusal``: the reply refuses the task or offers help instead of a verdict;
* ``echoed_prompt``: the answer mostly repeats its prompt (:mod:`clinieval.scoring.echo`).
"""

REASONS: tuple[Reason, ...] = get_args(Reason)


class VerdictParseError(ValueError):
    """The judge's reply could not be read as a verdict; ``reason`` says why (:data:`Reason`).

    Not a UserError: nothing the user typed is wrong. The judges record the repeat as unscored
    with this message, so an unreadable reply is counted, never read as "no" or a score.
    """

    def __init__(self, message: str, reason: Reason = "no_verdict") -> None:
        super().__init__(message)
        self.reason: Reason = reason

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its reason (worker processes)
        return (type(self), (str(self), self.reason))


# --------------------------------------------------------------------------------------------
# The reading policy's three checks every reader makes (docs/judge.md, "Reading policy")


def refusal() -> VerdictParseError:
    """A reply that refuses the task or offers help instead of a verdict ("No, I cannot evaluate
    this ...", "Yes, I can help with that ...": :func:`clinieval.scoring.reading.is_refusal`)."""
    return VerdictParseError("the judge refused or offered help instead of a verdict", "refusal")


def refusal_or(text: str, error: VerdictParseError) -> VerdictParseError:
    """``error`` for a reply with no verdict, or :func:`refusal` when it opens with one."""
    return refusal() if is_refusal(text) else error


def check_revision_stated(
    text: str, earlier: Iterable[tuple[object, int]], value: object, at: int, what: str = "verdicts"
) -> None:
    """The final verdict (``value``, whose text starts at ``at``) against the verdicts before it,
    nearest first, as (value, where its text ends): the nearest that says otherwise must be revised
    in words between the two ("Wait", "On reflection", "..., so"); else ``conflict``. ``earlier``
    may be lazy: it is read only up to that verdict."""
    for before, end in earlier:
        if before != value:
            if not revises(text[end:at]):
                raise VerdictParseError(
                    f"the output gives two different {what}, no revision stated", "conflict"
                )
            return


def check_not_revised_later(after: str, value: str, what: str = "verdict") -> None:
    """``conflict`` when ``after`` (what follows the final verdict) revises it in a form no reader
    can take (a revision cue, then a value matching the pattern ``value``, cut off or in prose)."""
    if revised_later(after, value):
        raise VerdictParseError(
            f"the reply revises its {what} after it, in no form that can be read", "conflict"
        )


# --------------------------------------------------------------------------------------------
# Tolerated variation

MARK = r"[*_`]{0,3}"
"""Markdown emphasis or code around a label or a value (``**Score:**``, ``*Doctor 1*``)."""

COLON = "[:\uff1a]"
"""A colon, ASCII or full-width."""

PLACEHOLDER = re.compile(r"<[^<>\n]*>")
"""A placeholder of the requested format (``<yes or no>``, ``<1-5>``): the format echoed, not a value."""

_NUM = r"[+-]?\d+(?:[.,]\d+)?"
_GAP = r"[ \t]*+(?:[*_`]{1,3}[ \t]*+)?"  # spaces and markup, possessive: no backtracking over long runs
VALUE = re.compile(
    rf"{_GAP}(?P<a>{_NUM})"
    rf"(?:[ \t]*+(?P<sep>[-\u2013\u2014~]|to\b|or\b){_GAP}(?P<b>{_NUM}))?"
    r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<of>\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)
"""A number as a judge writes one, with what makes it not one value: a range (``3-4``, ``2 or 3``)
or a scale (``4/5``, ``4 out of 5``)."""
UNIT = re.compile(rf"{MARK}[ \t]*(?:points?\b|pts?\b)?{MARK}", re.IGNORECASE)
"""``points`` or ``pts`` after a value, in any markup."""


@dataclass(frozen=True, slots=True)
class Number:
    """A value read where a verdict stands: the number and where its text ends."""

    value: float
    end: int


def _to_float(text: str) -> float:
    try:
        return float(text.replace(",", "."))
    except OverflowError:  # pragma: no cover - float() of a digit string returns inf instead
        return math.inf


def check_range(value: float, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """``value`` if it lies in [low, high] (and is whole when ``integral``); never clipped."""
    if not math.isfinite(value):
        raise VerdictParseError(f"{name} is not a finite number", "out_of_range")
    if integral and value != int(value):
        raise VerdictParseError(f"{name} {value:g} is not a whole number", "decimal")
    if not low <= value <= high:
        raise VerdictParseError(f"{name} {value:g} is outside {low:g}-{high:g}", "out_of_range")
    return float(value)


def read_number(
    text: str, start: int, low: float, high: float, name: str, *, integral: bool = True
) -> Number | None:
    """The value written at ``text[start:]`` (after spaces and markup), checked; None when no
    number stands there. ``3-4``/``2 or 3`` (range), ``4/10`` on a 1-5 scale (wrong scale), ``3.5``
    on a whole scale (decimal) and values outside [low, high] raise, each with its reason."""
    m = VALUE.match(text, start)
    if m is None:
        return None
    shown = m.group(0).strip().strip("*_`")
    if m.group("b") is not None:
        raise VerdictParseError(f"{name} {shown!r} is a range, not one value", "range")
    if m.group("of") is not None and float(m.group("of")) != high:
        raise VerdictParseError(f"{name} {shown!r} is not out of {high:g}", "wrong_scale")
    value = check_range(_to_float(m.group("a")), low, high, name, integral=integral)
    return Number(value, m.end())


_LATER_NUMBER = re.compile(r"(?<![\w.])[+-]?\d+(?:[.,]\d+)?(?![\w]|[.,]\d)")
REVISION_GAP = 40
"""Characters a revision may stand between a value and the value that replaces it in one block
("3 points, but on reflection 4 points")."""
HEDGE_GAP = 20
"""Characters a hedge may stand between a value and a second one ("3 (maybe 4)", "4, or possibly 3")."""


def read_committed(
    text: str, start: int, end: int, low: float, high: float, name: str, *, integral: bool = True
) -> Number | None:
    """The value a verdict commits to at ``text[start:end]`` (one block's slot, e.g. a line).

    The reading policy inside a block: a second value after a stated revision ("0, but on
    reflection 1") replaces the first; a second value after a hedge ("3 (maybe 4)", "4, or
    possibly 3") is unparsed ``hedged``; any other later number ("1 (2 of 3 key facts)") is the
    rationale's, not the verdict's.
    """
    number = read_number(text[:end], start, low, high, name, integral=integral)
    if number is None:
        return None
    later = _LATER_NUMBER.search(text, number.end, end)
    if later is None:
        return number
    between = text[number.end : later.start()]
    if len(between) <= REVISION_GAP and revises(between):
        revised = read_committed(text, later.start(), end, low, high, name, integral=integral)
        return revised if revised is not None else number
    if len(between) <= HEDGE_GAP and hedges(between):
        shown = text[start : later.end()].strip()[:40]
        raise VerdictParseError(f"{name} {shown!r} hedges between two values", "hedged")
    return number


# --------------------------------------------------------------------------------------------
# One labelled score: "Score: 4", "score = 3/5"

_FRACTION = re.compile(
    r"(?<![\d.])(-?\d+(?:\.\d+)?)\s*(?:points?\s+)?(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE
)


OWN_LABEL = rf"(?:{REVISED_LABEL}|overall|my)"
"""A score line's label words: a revision's (:data:`clinieval.scoring.reading.REVISED_LABEL`),
and "Overall score:", "My score:", which the score judges write for their one verdict."""


def score_marker(label: str = "score") -> re.Pattern[str]:
    """A verdict line ``LABEL: N`` at the start of a line (markup, any case, a colon of either
    width, ``=`` or ``is``); a stated revision's own label (``Final score:``, ``Corrected score:``)
    is one too, and, being later, replaces the line it revises."""
    return re.compile(
        rf"(?im)^[^\w\n(\"'\u201c]*(?:{OWN_LABEL}[ \t]+)?{re.escape(label)}{MARK}"
        rf"[ \t]*(?:{COLON}|=|is\b){MARK}"
    )


def _inline_marker(label: str) -> re.Pattern[str]:
    return re.compile(rf"(?i)\b{re.escape(label)}{MARK}[ \t]*(?:{COLON}|=){MARK}")


def score_verdict(
    text: str, low: float, high: float, *, label: str = "score", integral: bool = True
) -> float:
    """The value of the reply's last ``Score:`` line; without one, of the last ``score: N`` in a
    line; without either, the reply's fraction (``4/5``, ``4 out of 5``), which must be one.

    A number that merely follows the word ("Score 1 if the answer is correct") is not a verdict;
    an earlier ``Score:`` line (an echoed format, a corrected verdict) is not read. A decimal, a
    range, a fraction of another scale and a value outside [low, high] are unparsed.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output", "empty")
    lines = list(score_marker(label).finditer(text))
    if lines:
        m = lines[-1]
        line_end = text.find("\n", m.end())
        line_end = line_end if line_end >= 0 else len(text)
        number = read_committed(text, m.end(), line_end, low, high, label, integral=integral)
        if number is None:
            value = text[m.end() : line_end].strip()[:40]
            raise VerdictParseError(f"{label} {value!r} is not a number", "not_a_verdict")
        if len(lines) > 1:
            _unexplained_change(text, lines[:-1], m, number.value, (low, high, label, integral))
        return _unrevised(text, line_end, number.value)
    for m in reversed(list(_inline_marker(label).finditer(text))):
        line_end = text.find("\n", m.end())
        line_end = line_end if line_end >= 0 else len(text)
        number = read_committed(text, m.end(), line_end, low, high, label, integral=integral)
        if number is not None:
            return _unrevised(text, line_end, number.value)
    fractions = list(_FRACTION.finditer(text))
    bare = _BARE_SCORE.match(text) or _BARE_SCORE.search(text.rstrip())
    if not fractions and bare is not None:
        at = bare.start("value") if bare.group("value") is not None else bare.start("last")
        number = read_number(text, at, low, high, label, integral=integral)
        if number is not None:
            return number.value
    if not fractions:
        raise refusal_or(text, VerdictParseError(f"no {label} in the output", "no_verdict"))
    values = {(float(f.group(1)), float(f.group(2))) for f in fractions}
    if len(values) > 1:
        shown = ", ".join(repr(f.group(0).strip()) for f in fractions[:3])
        raise VerdictParseError(f"the output gives different {label}s ({shown})", "conflict")
    (shown_value, of), *_ = values
    if of != high:
        raise VerdictParseError(
            f"{label} {fractions[-1].group(0).strip()!r} is not out of {high:g}", "wrong_scale"
        )
    return check_range(shown_value, low, high, label, integral=integral)


_BARE_SCORE = re.compile(
    rf"(?:^[ \t*_`]*(?P<value>[+-]?\d+(?:\.\d+)?)[ \t]*(?:points?)?{MARK}[ \t]*[.]?[ \t]*(?:\n|$)"
    rf"|(?:^|\n)[ \t*_`]*(?P<last>[+-]?\d+(?:\.\d+)?)[ \t]*(?:points?)?{MARK}[ \t]*[.]?[ \t]*$)"
)
"""A reply whose first or last line is only a number ("5", "**4**", "3 points"): a score judge's
bare verdict."""


def _unexplained_change(
    text: str,
    earlier: Sequence[re.Match[str]],
    last: re.Match[str],
    value: float,
    scale: tuple[float, float, str, bool],
) -> None:
    """A score line that changes an earlier one must say so, between them or in its label
    ("Final score:"): :func:`check_revision_stated` ("Score: 4\nThe answer is partly right.\nScore:
    2" is a conflict, not a revision)."""
    low, high, label, integral = scale
    if re.match(rf"(?i)[^\w\n]*{OWN_LABEL}\b", last.group(0)):
        return  # "Final score: 4" states the revision in its label

    def values() -> Iterator[tuple[object, int]]:
        for before in reversed(earlier):
            end = text.find("\n", before.end())
            try:
                number = read_committed(
                    text, before.end(), end if end >= 0 else len(text), low, high, label, integral=integral
                )
            except VerdictParseError:
                continue
            if number is not None:
                yield number.value, number.end

    check_revision_stated(text, values(), value, last.start(), f"{label}s")


def _unrevised(text: str, end: int, value: float) -> float:
    """``value``, unless what follows its line revises it in a form no reader can take."""
    check_not_revised_later(text[end:], r"\d", "score")
    return value


def section(text: str, label: str, *, stop: re.Pattern[str] | None = None) -> str | None:
    """The reply's last ``LABEL:`` section (e.g. ``Reasoning:``), up to a ``stop`` line (the
    verdict marker) or the end: the rationale that goes with the final verdict."""
    found = list(
        re.finditer(rf"(?im)^[\W_]*+{re.escape(label)}{MARK}[ \t]*+{COLON}[ \t]*+{MARK}[ \t]*+", text)
    )
    if not found:
        return None
    start = found[-1].end()
    end = len(text)
    if stop is not None:
        m = stop.search(text, start)
        end = m.start() if m else end
    rest = text[start:end].strip()
    return rest or None


__all__ = [
    "COLON",
    "MARK",
    "PLACEHOLDER",
    "REASONS",
    "Reason",
    "VerdictParseError",
    "check_range",
    "read_number",
    "score_marker",
    "score_verdict",
    "section",
]
