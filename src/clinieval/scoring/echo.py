"""Which parts of a model's text are copied from what it was sent.

Why a module of its own: every reader that turns model text into a number or a choice follows one
rule (docs/judge.md, "Reading policy"): text that occurs in what the model was sent is never read
as its answer or verdict. A base model behind a chat template echoes its prompt ("[INST]Read the
abstract and answer ... with yes, no or maybe"), a judge repeats the answers it grades, and an
answer under judgement can carry a forged verdict line ("Score: Doctor 1: 5 points ..."); a reader
that reads the copy reads the prompt's words, not the model's.

A copy is a run of at least :data:`MIN_WORDS` consecutive words (letters and digits) that also
stand consecutively in a sent text. Words are compared without case, and punctuation, markdown and
whitespace between them do not count, so a copy that bolds a label, changes case or rewraps lines
is still a copy.
Shorter coincidences ("Verdict: yes", "Score: 1", "B. Warfarin") are never a copy: a reply may
legitimately write the same few words as its prompt.

The functions here work on plain strings and know no benchmark: a reader masks the copies out
(:func:`mask_copies`) before it looks for a verdict, and a run counts answers that are mostly a
copy (:func:`echoes_prompt`) to warn about a base model behind a chat template.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

MIN_WORDS = 6
"""Consecutive words a run must share with a sent text to count as copied from it."""

ECHO_SHARE = 0.5
"""Share of an answer's words in copied runs above which the answer mostly repeats its prompt."""

_WORD = re.compile(r"[^\W_]+")

Span = tuple[int, int]


_FORMAT_WORDS = frozenset(
    {
        *("score", "scores", "scored", "point", "points", "pts", "doctor", "verdict", "answer", "final"),
        *("label", "reasoning", "reason", "rationale", "yes", "no", "true", "false", "correct"),
        *("incorrect", "c1", "c2", "c3", "out", "of", "the", "is", "a", "an"),
    }
)
"""Words a verdict line is made of: two verdicts share them ("Score: Doctor 1: 5 points. Doctor
2: ..."), so a run of only these and digits is a coincidence of format, not a copy of content."""

WHOLE_LINE_WORDS = 3
"""A whole line of a sent text (or a whole sent text) of at least this many words, reproduced, is
a copy however few content words it has: a verdict line planted in an answer under judgement."""


def _key(word: str) -> str:
    return word.lower()


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


def _keys(text: str) -> list[str]:
    return [_key(m.group(0)) for m in _WORD.finditer(text)]


def _shingles(texts: Iterable[str], size: int) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for text in texts:
        keys = _keys(text)
        found.update(tuple(keys[i : i + size]) for i in range(len(keys) - size + 1))
    return found


def _whole_lines(texts: Iterable[str]) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
    """Every line (and every whole text) of at least :data:`WHOLE_LINE_WORDS` words, by its first
    words."""
    found: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for text in texts:
        for piece in [*text.splitlines(), text]:
            keys = tuple(_keys(piece))
            if len(keys) >= WHOLE_LINE_WORDS:
                found.setdefault(keys[:WHOLE_LINE_WORDS], set()).add(keys)
    return found


@functools.lru_cache(maxsize=8)
def _index(
    sent: tuple[str, ...], whole: tuple[str, ...] | None, min_words: int
) -> tuple[set[tuple[str, ...]], dict[tuple[str, ...], set[tuple[str, ...]]]]:
    """The runs of ``sent`` and the whole lines of ``whole`` (default ``sent``), built once for the
    replies that share them (a judge's repeats of one item): indexing a long record's notes costs
    far more than reading a reply against them, and it ran in the judge's event loop."""
    return _shingles(sent, min_words), _whole_lines(sent if whole is None else whole)


def _inside(run: Sequence[str], phrases: Sequence[Sequence[str]]) -> bool:
    n = len(run)
    return any(
        any(list(p[i : i + n]) == list(run) for i in range(len(p) - n + 1)) for p in phrases if len(p) >= n
    )


def _runs(covered: Sequence[bool]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i, on in enumerate(covered):
        if on and out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        elif on:
            out.append((i, i + 1))
    return out


def copied_spans(
    text: str,
    sent: Sequence[str],
    *,
    keep: Sequence[str] = (),
    whole: Sequence[str] | None = None,
    min_words: int = MIN_WORDS,
) -> list[Span]:
    """Character spans of ``text`` copied from one of ``sent``, in order: runs of at least
    ``min_words`` words with at least two words of content (not only a verdict's format words and
    digits), and any whole line or whole text of ``whole`` (default: ``sent``) reproduced. A run
    that lies within one of ``keep`` (an option the answer may name, "B. Torsemide 20 mg by mouth
    daily") is not a copy.

    A judge passes its whole prompt as ``sent`` and only the material quoted from the data as
    ``whole``: a verdict line planted in an answer is masked even when it is all the judge wrote,
    while a verdict that happens to equal the template's worked example is the judge's own unless
    it comes with the example's words.
    """
    words = _words(text)
    if not words or not any(s.strip() for s in sent):
        return []
    keys = [_key(m.group(0)) for m in words]
    covered = [False] * len(words)
    known, lines = _index(tuple(sent), None if whole is None else tuple(whole), min_words)
    for i in range(len(words) - min_words + 1):
        if tuple(keys[i : i + min_words]) in known:
            covered[i : i + min_words] = [True] * min_words
    runs = [
        r
        for r in _runs(covered)
        if sum(not k.isdigit() and k not in _FORMAT_WORDS for k in keys[r[0] : r[1]]) >= 2
    ]
    for i in range(len(keys)):
        for line in lines.get(tuple(keys[i : i + WHOLE_LINE_WORDS]), ()):
            if tuple(keys[i : i + len(line)]) == line:
                runs.append((i, i + len(line)))
    marked = [False] * len(words)
    phrases = [_keys(k) for k in keep]
    for a, b in runs:
        if not _inside(keys[a:b], phrases):
            marked[a:b] = [True] * (b - a)
    return [(words[a].start(), words[b - 1].end()) for a, b in _runs(marked)]


def mask_copies(
    text: str,
    sent: Sequence[str],
    *,
    keep: Sequence[str] = (),
    whole: Sequence[str] | None = None,
    min_words: int = MIN_WORDS,
) -> str:
    """``text`` with every copied run (:func:`copied_spans`) blanked: each character becomes a
    space, line breaks stay, so positions, lines and paragraphs are where they were and whatever
    the model wrote itself around a copy is read as written."""
    return masked(text, copied_spans(text, sent, keep=keep, whole=whole, min_words=min_words))


def masked(text: str, spans: Sequence[Span]) -> str:
    """``text`` with ``spans`` (:func:`copied_spans` of it) blanked, line breaks kept: for a
    caller that also needs the spans' share (:func:`echo_share`) and finds them once."""
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(re.sub(r"[^\n]", " ", text[start:end]))
        last = end
    out.append(text[last:])
    return "".join(out)


def copied_share(
    text: str, sent: Sequence[str], *, keep: Sequence[str] = (), min_words: int = MIN_WORDS
) -> float:
    """The share of ``text``'s words that lie in copied runs (0.0 for an empty text)."""
    return echo_share(text, copied_spans(text, sent, keep=keep, min_words=min_words))


def echo_share(text: str, spans: Sequence[Span]) -> float:
    """The share of ``text``'s words inside ``spans`` (:func:`copied_spans` of it; 0.0 for an
    empty text)."""
    words = _words(text)
    if not words:
        return 0.0
    inside = sum(any(s <= w.start() and w.end() <= e for s, e in spans) for w in words)
    return inside / len(words)


def echoes_prompt(
    text: str, sent: Sequence[str], *, keep: Sequence[str] = (), share: float = ECHO_SHARE
) -> bool:
    """Whether an answer mostly repeats what it was sent: more than ``share`` of its words copied
    (an option of ``keep`` named as the answer is not a copy)."""
    return copied_share(text, sent, keep=keep) > share


__all__ = [
    "ECHO_SHARE",
    "MIN_WORDS",
    "copied_share",
    "copied_spans",
    "echo_share",
    "echoes_prompt",
    "mask_copies",
    "masked",
]
