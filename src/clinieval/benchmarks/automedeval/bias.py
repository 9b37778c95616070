"""Position and length bias of a judge that scores several responses at once.

The paper shows the responses in a fixed order and does not measure order effects; LLM judges are
known to have them (MT-Bench, JudgeLM, AlpacaEval report the checks below). Each repeat here
shows the responses in a seeded permutation (:func:`clinieval.benchmarks.automedeval.verdict.permutation`),
so the repeats of an item can be compared:

* **swap consistency**: for every pair of responses and every two repeats that showed the pair in
  opposite orders, does the judge's relation (<, =, >) stay the same? The share of such
  comparisons that do (1.0: order never changed a verdict).
* **first-shown wins**: the share of parsed repeats in which the response shown first got the
  strictly highest score, beside the rate a judge blind to order would give, 1/k.
* **length preference**: over pairs of responses the judge scored differently and whose lengths
  differ, the share where the longer one scored higher (0.5: no preference).

An unparsed repeat takes part in none of these (it is counted by the judge run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Judged:
    """One repeat of one item: the order shown (``shown[i]`` = original index shown as Doctor
    i+1) and the scores in the original order (None: the reply was unparsed)."""

    shown: tuple[int, ...]
    scores: tuple[float, ...] | None


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _position(shown: Sequence[int], original: int) -> int:
    return list(shown).index(original)


def swap_consistency(repeats: Sequence[Judged]) -> tuple[int, int]:
    """(consistent, compared) over the pairs of one item shown in opposite orders by two repeats."""
    parsed = [r for r in repeats if r.scores is not None]
    consistent = compared = 0
    if not parsed:
        return 0, 0
    k = len(parsed[0].shown)
    for a, b in combinations(parsed, 2):
        assert a.scores is not None and b.scores is not None
        for i, j in combinations(range(k), 2):
            first_a = _position(a.shown, i) < _position(a.shown, j)
            first_b = _position(b.shown, i) < _position(b.shown, j)
            if first_a == first_b:
                continue
            compared += 1
            consistent += _sign(a.scores[i] - a.scores[j]) == _sign(b.scores[i] - b.scores[j])
    return consistent, compared


def first_shown_wins(repeats: Sequence[Judged]) -> tuple[int, int]:
    """(wins, parsed repeats): how often the response shown first scored strictly highest."""
    wins = parsed = 0
    for r in repeats:
        if r.scores is None:
            continue
        parsed += 1
        first = r.shown[0]
        wins += all(r.scores[first] > s for j, s in enumerate(r.scores) if j != first)
    return wins, parsed


def length_preference(repeats: Sequence[Judged], lengths: Sequence[int]) -> tuple[int, int]:
    """(longer preferred, pairs): pairs scored differently whose responses differ in length."""
    longer = pairs = 0
    for r in repeats:
        if r.scores is None:
            continue
        for i, j in combinations(range(len(lengths)), 2):
            if r.scores[i] == r.scores[j] or lengths[i] == lengths[j]:
                continue
            pairs += 1
            longer += (r.scores[i] > r.scores[j]) == (lengths[i] > lengths[j])
    return longer, pairs


def bias_report(items: Sequence[tuple[Sequence[Judged], Sequence[int]]]) -> JSON:
    """The three rates over items (each: its repeats and its responses' lengths), with counts;
    a rate with nothing to count is None."""
    totals = {"swap": [0, 0], "first": [0, 0], "length": [0, 0]}
    k = 0
    for repeats, lengths in items:
        k = k or len(lengths)
        for key, (hit, n) in (
            ("swap", swap_consistency(repeats)),
            ("first", first_shown_wins(repeats)),
            ("length", length_preference(repeats, lengths)),
        ):
            totals[key][0] += hit
            totals[key][1] += n

    def rate(key: str) -> float | None:
        hit, n = totals[key]
        return hit / n if n else None

    return {
        "swap_consistency": {"rate": rate("swap"), "comparisons": totals["swap"][1]},
        "first_shown_wins": {
            "rate": rate("first"),
            "repeats": totals["first"][1],
            "chance": 1 / k if k else None,
        },
        "length_preference": {"rate": rate("length"), "pairs": totals["length"][1]},
    }
