"""The AutoMedEval judge's reply format, how it is read, and the position-bias controls.

The judge writes a rationale, then ``Score: Doctor 1: X points. Doctor 2: Y points. ...``. The
paper's public code reads it with the regex ``Doctor (\\d): (\\d)`` and accepts the reply only when
the first k matches are Doctor 1..k in that order; anything else is a parse failure, which here is
an unscored, counted verdict, never a score. Two additions, both making a misread impossible: a
score outside 1-5 (the regex would take ``Doctor 1: 7``) is a parse failure, and a score digit
followed by another digit does not match (the regex would read ``Doctor 1: 10`` as 1).

Each response is cut to 1,000 characters before judging, as in the paper, and the cut is recorded.
The paper does not control position bias; here each repeat may show the responses in a seeded
permutation, and the scores read from the reply (which numbers the responses as shown) are mapped
back to the original order.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from clinieval.benchmarks.automedeval.records import SCORE_RANGE
from clinieval.judge.rubric import VerdictParseError

RESPONSE_CHARS = 1000
"""Each response is cut to this many characters before judging (the paper's limit)."""

_DOCTOR = re.compile(r"Doctor (\d): (\d)(?!\d)")
_SCORE_LINE = re.compile(r"\bScore\s*:", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Cut:
    """A response as shown to the judge, and whether (and how much) it was cut."""

    text: str
    original_chars: int

    @property
    def cut(self) -> bool:
        return self.original_chars > len(self.text)


def cut_response(text: str, limit: int = RESPONSE_CHARS) -> Cut:
    return Cut(text[:limit], len(text))


def parse_scores(reply: str, k: int) -> list[int]:
    """The k scores, Doctor 1..k in order (the paper's rule), each 1-5; else VerdictParseError."""
    found = _DOCTOR.findall(reply)
    if len(found) < k:
        raise VerdictParseError(f"{len(found)} 'Doctor N: S' scores found; {k} expected")
    scores = []
    for position, (doctor, value) in enumerate(found[:k], 1):
        if int(doctor) != position:
            raise VerdictParseError(f"score {position} is for Doctor {doctor}, not Doctor {position}")
        low, high = SCORE_RANGE
        if not low <= int(value) <= high:
            raise VerdictParseError(f"Doctor {doctor}: {value} is outside {low}-{high}")
        scores.append(int(value))
    return scores


def rationale(reply: str) -> str:
    """The judge's analysis: the reply up to its ``Score:`` line (the whole reply if it has none)."""
    m = _SCORE_LINE.search(reply)
    return (reply[: m.start()] if m else reply).strip()


def permutation(seed: int, item_id: str, repeat: int, k: int) -> tuple[int, ...]:
    """The order the judge sees the responses in for one repeat: ``shown[i]`` is the original index
    of the response shown as Doctor i+1. Seeded by (seed, item, repeat), so reruns show the same."""
    order = list(range(k))
    random.Random(f"automedeval-order:{seed}:{item_id}:{repeat}").shuffle(order)
    return tuple(order)


def to_original(scores: Sequence[int], shown: Sequence[int]) -> list[int]:
    """Scores read in shown order, put back in the original order of the responses."""
    if sorted(shown) != list(range(len(scores))):
        raise ValueError(f"{shown!r} is not a permutation of {len(scores)} positions")
    out = [0] * len(scores)
    for position, original in enumerate(shown):
        out[original] = scores[position]
    return out
