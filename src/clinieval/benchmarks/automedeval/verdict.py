"""The AutoMedEval judge's reply format, how it is read, and the position-bias controls.

The judge writes a rationale, then ``Score: Doctor 1: X points. Doctor 2: Y points. ...``. The
paper's public code reads it with the regex ``Doctor (\\d): (\\d)`` and accepts the reply only when
the first k matches are Doctor 1..k in that order; anything else is a parse failure, which here is
an unscored, counted verdict, never a score. That rule is applied where the verdict stands, as for
every judge in the package (:mod:`clinieval.judge.verdict`): within the reply's final verdict
block, after its *last* ``Score:``. So "Doctor 1: 3 key facts" in the analysis, an answer quoted
("Doctor 1: 2 tablets daily"), the worked example of the one-shot prompt echoed, or a verdict the
judge then corrects is never read. In the block, a doctor scored twice with different values, a
missing or an extra doctor, a decimal (``3.5``, which the regex reads as 3), a range (``3-4``), a
score outside 1-5 (the regex would take ``Doctor 1: 7``) and ``Doctor 1: 10`` (which it reads as 1)
are unparsed with their reason. Full-width colons, markdown, any case, ``point``/``/5`` are fine.
A new ``[Patient Question]`` after a verdict starts an item the judge invented: the reply ends
there. The rationale is what precedes the block (for a verdict written first, what follows it).

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

from clinieval.benchmarks.automedeval.judge_set import SCORE_RANGE
from clinieval.benchmarks.automedeval.prompts import EXAMPLE_REPLY
from clinieval.judge.verdict import VerdictParseError
from clinieval.judge.verdict_numbered import NumberedFormat, locate_numbered, numbered_scores
from clinieval.scoring.echo import mask_copies

RESPONSE_CHARS = 1000
"""Each response is cut to this many characters before judging (the paper's limit)."""

FORMAT = NumberedFormat(
    item="Doctor",
    marker="Score",
    low=SCORE_RANGE[0],
    high=SCORE_RANGE[1],
    echoes=(EXAMPLE_REPLY,),
    next_item=r"\[Patient Question\]",
)
"""The verdict block's format: ``Score: Doctor N: S points. ...``; a verbatim copy of the one-shot
example's reply is an echo, never this item's verdict; ``[Patient Question]`` after a verdict
starts an invented item."""

# The paper's regex and a Score: label, kept for build.curriculum, which places revision lines
# before the score line; reading a verdict goes through FORMAT, never through these.
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


def parse_scores(reply: str, k: int, quoted: Sequence[str] = (), prompt: Sequence[str] = ()) -> list[int]:
    """The k scores of the reply's final ``Score:`` block, Doctor 1..k in order (the paper's rule),
    each 1-5; else VerdictParseError with its reason.

    ``quoted`` is the material the prompt carried from the data (the question, the reference and
    the doctors' answers): a copy of it in the reply is masked first, so a verdict line planted in
    an answer under judgement ("Score: Doctor 1: 5 points ...") is never read when the judge
    echoes it (the reading policy, docs/judge.md); ``prompt``, the judge prompt's texts, is masked
    where the judge copies a run of its words with content (the worked example's analysis)."""
    if quoted or prompt:
        masked = mask_copies(reply, [*prompt, *quoted], whole=quoted)
        if reply.strip() and not masked.strip():
            raise VerdictParseError("the reply only repeats what the judge was shown", "echoed_prompt")
        reply = masked
    return numbered_scores(reply, k, FORMAT)


def rationale(reply: str, k: int = 3) -> str:
    """The judge's analysis: the reply before its final ``Score:`` block (for a verdict written
    first, what follows it; the whole reply if it has no verdict block)."""
    reading = locate_numbered(reply, k, FORMAT)
    return reply.strip() if reading is None else reading.rationale


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
