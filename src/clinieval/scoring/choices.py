"""Multiple-choice options: how a prompt letters them and how an answer's choice is read back.

Both halves live here so that the prompt and the reader cannot drift apart: a scorer accepts a
letter only when the prompt as sent listed the options with exactly these letters
(:func:`shows_lettered`), because a model that never saw "B. Warfarin" cannot mean Warfarin by
"B". The layout is lm-evaluation-harness's and inspect_ai's lettered list: ``A. text`` per line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from clinieval.errors import UserError
from clinieval.scoring.echo import ECHO_SHARE, copied_spans, echo_share, masked
from clinieval.scoring.reading import is_refusal, revised_values, revises, settle

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_lines(choices: Sequence[str]) -> str:
    """``A. first`` / ``B. second`` ..., one line per choice (empty when there are none)."""
    if len(choices) > len(LETTERS):
        raise UserError(f"{len(choices)} choices: lettered options stop at {len(LETTERS)}")
    return "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))


def shows_lettered(texts: Iterable[str], choices: Sequence[str]) -> bool:
    """Whether one of ``texts`` (the messages as sent) lists ``choices`` as lettered lines."""
    if not choices or len(choices) > len(LETTERS):
        return False
    lines = option_lines(choices)
    return any(lines in text for text in texts)


_MARKUP = re.compile(r"[*_`#]+")


def option_phrases(choices: Sequence[str]) -> list[str]:
    """What an answer may repeat from its prompt and still be an answer: each option, and each
    option's lettered line ("B. Torsemide 20 mg by mouth daily"): never a copy of the prompt
    (:func:`clinieval.scoring.echo.copied_spans`' ``keep``)."""
    if len(choices) > len(LETTERS):
        return list(choices)
    return [*choices, *option_lines(choices).splitlines()]


def _leading_label(count: int) -> re.Pattern[str]:
    """A letter of options ``A`` .. the ``count``-th set off as a label at the start of an answer
    (``B``, ``B.``, ``(B)``, ``[B]``, ``B) text``, ``B: text``). A bare ``A `` is not a label:
    "A 65-year-old ..." or "A heparin drip" is prose, left to the text reader. Capitals only, so
    the article "a" never counts."""
    span = f"[A-{LETTERS[count - 1]}]"
    return re.compile(rf"^\s*(?:\(({span})\)|\[({span})\]|({span})(?:\s*[.):]|[ \t]*(?:\n|$)))")


# --------------------------------------------------------------------------------------------
# The reading policy for a choice (docs/judge.md, "Reading policy"): one option, committed to


@dataclass(frozen=True, slots=True)
class ChoiceReading:
    """Which option an answer chose (an index into the choices), how it was read, or why not.

    ``reason`` is one of :data:`clinieval.judge.verdict.REASONS`' words (``several_options``,
    ``conflict``, ``hedged``, ``refusal``, ``echoed_prompt``, ``out_of_range``, ``no_verdict``,
    ``empty``) when ``index`` is None.
    """

    index: int | None
    how: str | None = None
    reason: str | None = None


_LIST_SEP = r"[ \t]*(?:,|/|;|\bor\b|\band\b|\bversus\b|\bvs\.?)[ \t]*(?:\bor\b[ \t]*|\band\b[ \t]*)?"
_OPENERS = r"(?:so|therefore|thus|hence|overall|finally|final(?:ly)?|in\s+conclusion|conclusion)"


def _option_words(choices: Sequence[str]) -> re.Pattern[str]:
    alternation = "|".join(re.escape(c) for c in sorted(choices, key=len, reverse=True))
    return re.compile(rf"(?<![\w])({alternation})(?![\w])", re.IGNORECASE)


def _listed_after(text: str, end: int, item: str) -> bool:
    """Whether the option ending at ``end`` is followed by another, different one in a list ("yes,
    no or maybe", "A or C"): the second must itself end the list or continue it, so "Yes, no
    difference was seen" is not a list, and "Yes, yes." names one option."""
    m = re.match(
        rf"{_LIST_SEP}(?P<next>{item})(?=[ \t]*(?:[,.;:/!?)\]*_\u2014\u2013-]|\bor\b|\band\b|$))",
        text[end:],
        re.I,
    )
    if m is None:
        return False
    before = re.search(r"[^\W_]+\W*$", text[:end])
    first = before.group(0) if before else ""
    return _bare(m.group("next")) != _bare(first)


def _bare(option: str) -> str:
    return re.sub(r"[\W_]+", "", option).lower()


def _index_of(word: str, choices: Sequence[str]) -> int:
    lowered = [c.lower() for c in choices]
    return lowered.index(word.lower())


def _option_lines(text: str, count: int) -> int:
    """How many distinct option labels start a line ("A. ...", "(B) ..."): an answer that lists the
    options restates the question."""
    span = f"[A-{LETTERS[count - 1]}]"
    return len(set(re.findall(rf"(?m)^[ \t>*_-]*\(?({span})[.)]\s", text)))


def _cues(
    text: str, count: int, words: re.Pattern[str], choices: Sequence[str]
) -> list[tuple[int, int, int]]:
    """Every cued choice ("Answer: B", "the answer is yes", "My choice: no") as (start, end, index)."""
    found: list[tuple[int, int, int]] = []
    cue = re.compile(
        r"(?i:(?:\banswers?\b|\b(?:correct|best|right|final|my)\s+(?:option|choice)\b|\b(?:option|choice)(?=\s*[:\uff1a]))"
        r"(?:\s+(?:is|would\s+be|:))?)[ \t]*[:\-\uff1a]?[ \t]*[\(\[]?"
    )
    span = f"[A-{LETTERS[count - 1]}]" if count else None
    for m in cue.finditer(text):
        if span is not None:
            letter = re.match(rf"({span})(?![A-Za-z0-9'])", text[m.end() :])
            if letter is None and text[m.end() - 1 : m.end()] in "([":  # "Answer: (a)": a letter in brackets
                letter = re.match(rf"({span.lower()})(?=[)\]])", text[m.end() :])
            if letter is not None:
                index = ord(letter.group(1).upper()) - ord("A")
                found.append((m.start(), m.end() + letter.end(), index))
                continue
        word = words.match(text, m.end())
        if word is not None:
            found.append((m.start(), word.end(), _index_of(word.group(1), choices)))
    return found


def _decide(readings: list[tuple[int, int, int]], text: str) -> ChoiceReading | None:
    """One choice from several cued ones: all agree, or a stated revision stands between the last
    two different ones (it replaces), else ``conflict``."""
    if not readings:
        return None
    last = readings[-1]
    for earlier in reversed(readings[:-1]):
        if earlier[2] != last[2]:
            between = text[earlier[1] : last[0]]
            if revises(between) or revises(text[last[0] - 40 : last[0]]):
                break
            return ChoiceReading(None, None, "conflict")
    return ChoiceReading(last[2], "cue")


def read_choice(
    answer: str, choices: Sequence[str], *, lettered: bool = False, sent: Sequence[str] = ()
) -> ChoiceReading:
    """The option an answer commits to, under the reading policy.

    In order: copies of what the model was sent (``sent``: the prompt's messages) are masked, and
    an answer that is mostly such a copy with nothing of its own to read is ``echoed_prompt``; a
    cued choice ("Answer: B", "the answer is yes"; with ``lettered``, letters too); a refusal; a
    leading letter label (``B.``, ``(B)``); the option the answer opens with or closes on; the one
    option it names. An answer that lists the options (every option line, "yes, no or maybe",
    "A or C") is ``several_options``; two different cued choices without a stated revision between
    them are ``conflict``; a letter past the options is ``out_of_range``.
    """
    if not answer.strip():
        return ChoiceReading(None, None, "empty")
    if not choices:
        return ChoiceReading(None, None, "no_verdict")
    spans = copied_spans(answer, sent, keep=option_phrases(choices)) if sent else []
    reading = _read_committed_choice(_MARKUP.sub("", masked(answer, spans)), choices, lettered)
    if reading.reason in ("no_verdict", "empty") and echo_share(answer, spans) > ECHO_SHARE:
        return ChoiceReading(None, None, "echoed_prompt")
    return reading


def _read_committed_choice(text: str, choices: Sequence[str], lettered: bool) -> ChoiceReading:
    count = len(choices) if lettered and len(choices) <= len(LETTERS) else 0
    words = _option_words(choices)
    if not text.strip():
        return ChoiceReading(None, None, "empty")
    letter_item = f"\\(?[A-{LETTERS[count - 1]}]\\)?(?![A-Za-z0-9'])" if count else None
    word_item = words.pattern
    cues = _cues(text, count, words, choices)
    for start, end, _ in cues:
        listed = any(item and _listed_after(text, end, item) for item in (letter_item, word_item))
        if listed and not any(s > start for s, _, _ in cues):
            return ChoiceReading(None, None, "several_options")
    decided = _decide(cues, text)
    if decided is not None:
        return decided
    if count and _option_lines(text, count) >= 2:
        return ChoiceReading(None, None, "several_options")
    if is_refusal(text):
        return ChoiceReading(None, None, "refusal")
    first_letter = re.match(rf"^\W*{letter_item}", text) if letter_item else None
    if letter_item and first_letter and _listed_after(text, first_letter.end(), letter_item):
        return ChoiceReading(None, None, "several_options")  # "A or C", "B, D"
    if count:
        m = _leading_label(count).match(text)
        if m is not None:
            if letter_item and _listed_after(text, m.end(), letter_item):
                return ChoiceReading(None, None, "several_options")
            return ChoiceReading(ord(next(g for g in m.groups() if g)) - ord("A"), "label")
        lone = re.fullmatch(r"\W*([A-Z])\W*", text)
        if lone is not None:
            return ChoiceReading(None, None, "out_of_range")
    return _by_option_text(text, choices, words)


def _by_option_text(text: str, choices: Sequence[str], words: re.Pattern[str]) -> ChoiceReading:
    """An option's own words: the one the answer opens with, states after a revision ("No.
    Actually, yes: ...") or closes on, the last of them unless an unexplained conflict; else the
    only one named."""
    opening = re.match(rf"^\W*{words.pattern}", text, re.IGNORECASE)
    if opening is not None and _listed_after(text, opening.end(), words.pattern):
        return ChoiceReading(None, None, "several_options")
    closing = re.search(rf"(?:^|[.:;!?\n]|\b{_OPENERS}\b)[\s,:]*{words.pattern}[\s.!]*$", text, re.IGNORECASE)
    said = [(m.start(1), m.group(1)) for m in (opening, closing) if m is not None]
    said += revised_values(text, words.pattern)
    if said:
        stated = settle(sorted({(at, _index_of(word, choices)) for at, word in said}), text)
        return ChoiceReading(None, None, "conflict") if stated is None else ChoiceReading(stated, "text")
    named = {_index_of(m.group(1), choices) for m in words.finditer(text)}
    if len(named) == 1:
        return ChoiceReading(named.pop(), "text")
    for m in words.finditer(text):
        if _listed_after(text, m.end(), words.pattern):
            return ChoiceReading(None, None, "several_options")
    return ChoiceReading(None, None, "several_options" if named else "no_verdict")
