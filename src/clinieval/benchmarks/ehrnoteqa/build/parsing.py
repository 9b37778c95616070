"""Reading the generator's replies, tolerantly, and naming why one could not be read.

Models vary the prompts' output format (case, bold labels, one line or several, ``A.`` or ``(A)``
options); :func:`parse_question_reply` and :func:`parse_choices_reply` accept those variations and
nothing they would have to guess. A reply that cannot be read raises :class:`ReplyParseError`
with a short ``code`` (``no_question``, ``no_options``, ...): the pipeline keeps the item with that
reason (``generated.jsonl``, ``build_summary.json``), never drops it silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "ChoicesReply",
    "QuestionReply",
    "ReplyParseError",
    "normalize_option",
    "parse_choices_reply",
    "parse_question_reply",
]


_Reply = TypeVar("_Reply", "QuestionReply", "ChoicesReply")


class ReplyParseError(ValueError):
    """A generator reply that could not be read; ``code`` is the short reason counted in the summary.

    Not a UserError: nothing the user typed is wrong. The item is kept with the reason.
    """

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class QuestionReply:
    """What step 1 wrote: a free-text question, its answer and the rationale ('' when absent)."""

    question: str
    answer: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ChoicesReply:
    """What step 2 wrote. ``choices`` holds every lettered option found, in letter order (a reply
    with four or six options parses; the ``five_options`` check then fails). ``answer`` is the
    letter read from ``answer_raw``, or None when no letter could be read from it."""

    question: str
    choices: dict[str, str]
    answer: str | None
    answer_raw: str
    reason: str = ""


def _label(words: str) -> re.Pattern[str]:
    """A ``Label :`` marker: not inside a word, any case, spaces or leftover ``*``/``_`` before the colon."""
    return re.compile(rf"(?<![\w'])(?:{words})[ \t]*[*_]*[ \t]*:", re.IGNORECASE)


_QUESTION = _label(r"question")
_ANSWER = _label(r"answer")
_REASON = _label(r"reason(?:ing)?|rationale|explanation")
_CHOICES = _label(r"(?:answer[ \t]+)?(?:choices|options)")
_CORRECT = _label(r"(?:correct[ \t]+)?(?:answer|choice|option)")
_BOLD = re.compile(r"\*\*|__")
_HEADING = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]*")
_TRAILING = re.compile(r"[\s*_\-–—•]+$")  # the dashes models put between items
_LEADING = re.compile(r"^[\s*_:]+")
_PLACEHOLDER = re.compile(
    r"^\[?\s*(?:your question|your answer|the doctor's question|explanation for your answer|"
    r"(?:first|second|third|fourth|fifth) option|the letter of the correct choice)\s*\]?$",
    re.IGNORECASE,
)


def _markup_free(text: str) -> str:
    """The reply without bold/underline markers and heading marks, with Unix line ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _HEADING.sub("", _BOLD.sub("", text))


def _value(text: str, *, one_line: bool = True) -> str:
    """A field's value: separators and stray markup trimmed, a ``[...]`` wrapper removed, and
    (``one_line``) inner whitespace collapsed to single spaces."""
    text = _LEADING.sub("", _TRAILING.sub("", text))
    if text.startswith("[") and text.endswith("]") and text.count("[") == 1 and text.count("]") == 1:
        text = text[1:-1].strip()
    return re.sub(r"\s+", " ", text) if one_line else text.strip()


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value))


def _first_item(
    text: str,
    end_label: re.Pattern[str],
    missing: tuple[tuple[str, str], tuple[str, str]],
    read: Callable[[str, re.Match[str], re.Match[str]], _Reply],
) -> _Reply:
    """The first item of a reply that ``read`` accepts, or the reason none was.

    An item runs from a ``Question`` label to the first ``end_label`` after it; a later
    ``Question`` label before that is the item's own (``Here is a question: - Question : …``).
    ``read(t, question_label, end_label)`` raises :class:`ReplyParseError` for an item it rejects,
    and the next item is tried. ``missing`` is the (code, detail) of a reply with no ``Question``
    label, then of a question with no ``end_label`` after it (which ends the search).
    """
    if not text.strip():
        raise ReplyParseError("empty", "the reply is empty")
    t = _markup_free(text)
    no_question, no_end = missing
    code, detail = no_question
    for q in _QUESTION.finditer(t):
        end = end_label.search(t, q.end())
        if end is None:
            raise ReplyParseError(*no_end)
        if _QUESTION.search(t, q.end(), end.start()):
            continue
        try:
            return read(t, q, end)
        except ReplyParseError as e:
            code, detail = e.code, e.detail
    raise ReplyParseError(code, detail)


def parse_question_reply(text: str) -> QuestionReply:
    """Read step 1's ``- Question : … - Answer : … - Reason : …``.

    Tolerates any case, spacing around the colon, ``**bold**`` labels, the items on one line or
    several, and missing dashes. The question is the first non-empty one that is not the
    prompt's own ``[Your Question]`` echoed; the answer runs to the ``Reason`` label (optional:
    a missing reason is ''), the reason to the end. Raises :class:`ReplyParseError` otherwise.
    """
    missing = (
        ("no_question", "no 'Question :' label in the reply"),
        ("no_answer", "no 'Answer :' label after the question"),
    )
    return _first_item(text, _ANSWER, missing, _question_item)


def _question_item(t: str, q: re.Match[str], a: re.Match[str]) -> QuestionReply:
    question = _value(t[q.end() : a.start()])
    if not question or _is_placeholder(question):
        raise ReplyParseError("empty_question", "the 'Question :' label has no question after it")
    r = _REASON.search(t, a.end())
    answer = _value(t[a.end() : r.start() if r else len(t)])
    if not answer or _is_placeholder(answer):
        raise ReplyParseError("empty_answer", "the 'Answer :' label has no answer after it")
    reason = _value(t[r.end() :], one_line=False) if r else ""
    return QuestionReply(question, answer, reason)


_OPTION_STYLES: dict[str, str] = {
    "colon": r"(?<![\w(\[]){L}[ \t]*:",
    "dot": r"(?<![\w(\[.]){L}\.(?=\s)",
    "paren": r"(?<![\w(\[]){L}\)",
    "wrapped": r"\({L}\)[ \t]*[:.]?",
    "bracket": r"\[{L}\][ \t]*[:.]?",
}
_LINE_START = r"(?:^|(?<=\n))[ \t]*(?:[-*•][ \t]*)?"


def _option_pattern(style: str, letter: str, anchored: bool) -> re.Pattern[str]:
    body = _OPTION_STYLES[style].replace("{L}", letter)
    return re.compile((_LINE_START if anchored else "") + body)


def _option_labels(block: str, style: str, anchored: bool) -> list[tuple[str, int, int]]:
    """``(letter, start, end)`` of the option labels A, B, C, … found one after another."""
    found: list[tuple[str, int, int]] = []
    pos = 0
    for letter in "ABCDEFGHIJ":
        m = _option_pattern(style, letter, anchored).search(block, pos)
        if m is None:
            break
        found.append((letter, m.start(), m.end()))
        pos = m.end()
    return found


def _find_options(block: str) -> tuple[dict[str, str], int]:
    """The lettered options of a choices block and where the first label starts (-1 if none).

    The label style (``A:``, ``A.``, ``A)``, ``(A)``, ``[A]``) is the one of the first ``A`` label
    and every later label must use it, so ``A: Hepatitis B. B: …`` splits right. Labels at line
    starts are preferred when they find at least as many options, so an option whose text holds
    ``B.`` mid-line is not cut there.
    """
    starts = {s: m.start() for s in _OPTION_STYLES if (m := _option_pattern(s, "A", False).search(block))}
    if not starts:
        return {}, -1
    style = min(starts, key=lambda s: starts[s])
    inline = _option_labels(block, style, anchored=False)
    lined = _option_labels(block, style, anchored=True)
    labels = lined if len(lined) >= max(2, len(inline)) else inline
    options: dict[str, str] = {}
    for i, (letter, _, end) in enumerate(labels):
        stop = labels[i + 1][1] if i + 1 < len(labels) else len(block)
        options[letter] = _value(block[end:stop])
    return options, labels[0][1]


_LETTER_TOKEN = re.compile(r"^[^\w(]*(?:(?i:option|choice|answer)[ \t]+)?\(?([A-Z])\)?(?=$|[\s.:,;)\]-])")
_LOWER_LETTER = re.compile(r"^[^\w(]*\(?([a-e])(?:\)|[.:]|\s*$)")


def normalize_option(text: str) -> str:
    """An option compared for sameness: lower case, punctuation as spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def _answer_letter(raw: str, choices: Mapping[str, str]) -> str | None:
    """The letter a ``Correct Answer`` value names: ``C``, ``C. text``, ``(C)``, ``Option C``, ``c)``,
    or the exact text of exactly one option. None when it names none of these (never a guess)."""
    m = _LETTER_TOKEN.match(raw) or _LOWER_LETTER.match(raw)
    if m:
        return m.group(1).upper()
    wanted = normalize_option(raw)
    same = [k for k, v in choices.items() if wanted and normalize_option(v) == wanted]
    return same[0] if len(same) == 1 else None


def parse_choices_reply(text: str) -> ChoicesReply:
    """Read step 2's ``- Question: … - Answer Choices: A: … E: … - Correct Answer: X - Reason: …``.

    Tolerates what :func:`parse_question_reply` does, plus option labels ``A:``, ``A.``, ``A)``,
    ``(A)`` on one line or on separate lines, a missing ``Answer Choices:`` label (the options
    then start at the first ``A`` label), and correct answers such as ``C``, ``C. text`` or
    ``(C)``. A ``Correct Answer`` whose letter cannot be read still parses (``answer`` None: the
    ``valid_answer`` check fails and reviewers see the raw value); no question, no options or no
    ``Correct Answer`` label raise :class:`ReplyParseError`.
    """
    missing = (
        ("no_question", "no 'Question:' label in the reply"),
        ("no_correct_answer", "no 'Correct Answer:' label after the question"),
    )
    return _first_item(text, _CORRECT, missing, _choices_item)


def _choices_item(t: str, q: re.Match[str], ca: re.Match[str]) -> ChoicesReply:
    c = _CHOICES.search(t, q.end(), ca.start())
    start = c.end() if c else q.end()
    choices, first = _find_options(t[start : ca.start()])
    if not choices:
        raise ReplyParseError("no_options", "no lettered options (A: … E: …) before 'Correct Answer:'")
    question = _value(t[q.end() : c.start() if c else start + first])
    if not question or _is_placeholder(question):
        raise ReplyParseError("empty_question", "the 'Question:' label has no question after it")
    r = _REASON.search(t, ca.end())
    segment = t[ca.end() : r.start() if r else len(t)].strip()
    first_line, _, rest = segment.partition("\n")
    answer_raw = _value(first_line)
    reason = _value(t[r.end() :], one_line=False) if r else rest.strip()
    return ChoicesReply(question, choices, _answer_letter(answer_raw, choices), answer_raw, reason)
