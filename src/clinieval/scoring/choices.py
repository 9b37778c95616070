"""Multiple-choice options: how a prompt letters them and how an answer's letter is read back.

Both halves live here so that the prompt and the reader cannot drift apart: a scorer accepts a
letter only when the prompt as sent listed the options with exactly these letters
(:func:`shows_lettered`), because a model that never saw "B. Warfarin" cannot mean Warfarin by
"B". The layout is lm-evaluation-harness's and inspect_ai's lettered list: ``A. text`` per line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from clinieval.errors import UserError

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


def _letter_patterns(count: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The two readers for options ``A`` .. the ``count``-th letter.

    * leading label: the whole answer is a letter, or starts with one set off as a label
      (``B``, ``B.``, ``(B)``, ``[B]``, ``B) text``, ``B: text``). A bare ``A `` is not a label:
      "A 65-year-old ..." or "A heparin drip" is prose, left to the text reader.
    * cue: a letter right after "answer", "option" or "choice" (``The answer is B``,
      ``Answer: (C)``, ``the correct option is E because ...``).

    Letters are capitals only, so the article "a" never counts.
    """
    span = f"[A-{LETTERS[count - 1]}]"
    leading = re.compile(rf"^\s*(?:\(({span})\)|\[({span})\]|({span})(?:\s*[.):]|\s*$))")
    cue = re.compile(
        r"(?i:\b(?:answer|option|choice)\b(?:\s+(?:is|would\s+be|:))?)\s*[:\-]?\s*[\(\[]?"
        rf"({span})(?![A-Za-z0-9'])"
    )
    return leading, cue


def read_letter(answer: str, count: int) -> tuple[str | None, str | None]:
    """(letter, how it was read: ``label`` or ``cue``) from a generated answer to ``count``
    lettered options; (None, None) when the answer gives no letter (it may still name an option's
    text, which the caller reads its own way)."""
    if not 0 < count <= len(LETTERS):
        return None, None
    text = _MARKUP.sub("", answer)
    leading, cue = _letter_patterns(count)
    m = leading.match(text)
    if m:
        return next(g for g in m.groups() if g), "label"
    m = cue.search(text)
    if m:
        return m.group(1), "cue"
    return None, None
