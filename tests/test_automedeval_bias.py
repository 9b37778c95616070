"""AutoMedEval's position bias done properly (issue 25, item 3): the order designs (fixed, the
paper's; shuffled; balanced, a Latin square of rotations), a same-order control for swap
consistency, the chance rate of "first shown wins" from the judge's own scores with ties, and a
CI and a plain verdict on every bias figure. Expected numbers are worked out by hand.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clinieval.benchmarks.automedeval.bias import (
    Judged,
    bias_report,
    first_shown_chance,
    same_order_consistency,
    swap_consistency,
)
from clinieval.benchmarks.automedeval.judging import JudgePlan, judge_set, shown_order
from clinieval.benchmarks.automedeval.verdict import permutation


def test_the_three_order_designs() -> None:
    assert all(shown_order("fixed", 0, "q1", r, 3) == (0, 1, 2) for r in range(5))
    assert all(shown_order("shuffled", 4, "q1", r, 3) == permutation(4, "q1", r, 3) for r in range(5))
    for item in ("q1", "q2", "q3"):
        square = [shown_order("balanced", 0, item, r, 3) for r in range(3)]
        for position in range(3):  # a Latin square: each answer in each position once
            assert sorted(row[position] for row in square) == [0, 1, 2]
        assert all(sorted(row) == [0, 1, 2] for row in square)
        # rows are rotations of one another, and repeats past k start the square again
        assert square[1] == square[0][1:] + square[0][:1]
        assert shown_order("balanced", 0, item, 3, 3) == square[0]
    # the base sequence is seeded per item, so items do not all start from the same order
    assert len({shown_order("balanced", 0, f"q{i}", 0, 3) for i in range(20)}) > 1
    with pytest.raises(ValueError, match="sideways"):
        shown_order("sideways", 0, "q1", 0, 3)


def test_first_shown_chance_counts_ties_by_hand() -> None:
    """An order-blind judge's first-shown answer is a random one of the k (the design draws the
    order), so it wins strictly with probability 1/k when one answer is strictly highest and 0
    when the top is tied: (5, 2, 2) 1/3, (4, 4, 1) 0, (3, 3, 3) 0, (5, 4, 1) 1/3 -> 2/3 expected
    wins in 4 parsed repeats, a chance rate of 1/6 (not 1/k = 1/3)."""
    repeats = [
        Judged((0, 1, 2), (5.0, 2.0, 2.0)),
        Judged((1, 2, 0), (4.0, 4.0, 1.0)),
        Judged((2, 0, 1), (3.0, 3.0, 3.0)),
        Judged((0, 1, 2), (5.0, 4.0, 1.0)),
        Judged((1, 2, 0), None),
    ]
    assert first_shown_chance(repeats) == pytest.approx(2 / 3)
    report = bias_report([(repeats, [10, 20, 30])], order="shuffled", resamples=200)
    first = report["first_shown_wins"]
    # wins: response 0 shown first and strictly highest in repeats 1 and 4 -> 2 of 4
    assert (first["rate"], first["repeats"]) == (2 / 4, 4)
    assert first["chance"] == pytest.approx(1 / 6)
    assert first["excess"] == pytest.approx(2 / 4 - 1 / 6)


def test_same_order_control_beside_swap_consistency_by_hand() -> None:
    repeats = [
        Judged((0, 1, 2), (5.0, 3.0, 1.0)),
        Judged((0, 1, 2), (5.0, 3.0, 3.0)),  # same order as the first: its 3 pairs are the control
        Judged((2, 1, 0), (5.0, 3.0, 1.0)),  # every pair reversed against both others
    ]
    # control (repeats 1 and 2): (0,1) kept, (0,2) kept, (1,2) > against = -> 2 of 3
    assert same_order_consistency(repeats) == (2, 3)
    # swaps: repeat 3 against 1: 3 of 3; against 2: (1,2) > against = -> 2 of 3
    assert swap_consistency(repeats) == (5, 6)


def _first_bonus_items(n: int) -> list[tuple[list[Judged], list[int]]]:
    """A judge that adds a point to whichever answer it is shown first, answers of quality
    4, 3, 2, in the balanced design with 6 repeats (the Latin square twice: every order has a
    same-order twin, the control)."""
    out = []
    for i in range(n):
        repeats = []
        for r in range(6):
            shown = shown_order("balanced", 0, f"q{i}", r, 3)
            scores = [4.0, 3.0, 2.0]
            scores[shown[0]] += 1
            repeats.append(Judged(shown, tuple(scores)))
        out.append((repeats, [30, 20, 10]))
    return out


def test_a_judge_that_favours_the_first_position_is_named_so() -> None:
    report = bias_report(_first_bonus_items(20), order="balanced", resamples=500)
    first = report["first_shown_wins"]
    # rotations give (5, 3, 2), (4, 4, 2), (4, 3, 3): wins 1 of 3 (only answer 0 first wins);
    # chance 1/3 + 0 + 1/3 over 3 = 2/9 (1/k would be 1/3 and the bias would vanish)
    assert first["rate"] == pytest.approx(1 / 3) and first["chance"] == pytest.approx(2 / 9)
    assert first["verdict"] == "favours first position, +11.1 points"
    assert first["ci"] == pytest.approx([1 / 9, 1 / 9])
    swap = report["swap_consistency"]
    # the control: the 3 same-order twins of each item, 9 pairs, all kept (the judge is
    # deterministic); a swapped pair flips whenever the bonus creates or breaks a tie
    assert swap["control"]["rate"] == 1.0 and swap["control"]["comparisons"] == 20 * 9
    assert swap["comparisons"] == 20 * 24  # 12 repeat pairs in different orders x 2 reversed pairs
    assert swap["rate"] < 1 and swap["difference"]["ci"][1] < 0
    assert swap["verdict"].startswith("order changes verdicts: ")
    assert "points less consistent when a pair is swapped" in swap["verdict"]


def test_an_order_blind_judge_shows_no_evidence_of_bias() -> None:
    import random

    rng = random.Random(3)
    items = []
    for i in range(30):
        quality = [float(rng.randint(1, 5)) for _ in range(3)]
        repeats = [Judged(shown_order("balanced", 0, f"q{i}", r, 3), tuple(quality)) for r in range(3)]
        items.append((repeats, [rng.randint(5, 50) for _ in range(3)]))
    report = bias_report(items, order="balanced", resamples=500)
    first = report["first_shown_wins"]
    # 1/k would call this judge averse to the first position whenever its top scores tie
    assert first["rate"] < 1 / 3 and first["excess"] == pytest.approx(0.0)
    assert first["verdict"] == "no evidence of bias"
    assert report["swap_consistency"]["verdict"] == "no evidence of bias"


def test_fixed_order_makes_position_bias_not_measurable() -> None:
    items = [([Judged((0, 1, 2), (5.0, 3.0, 1.0)), Judged((0, 1, 2), (5.0, 3.0, 2.0))], [30, 20, 10])] * 4
    report = bias_report(items, order="fixed", resamples=200)
    assert report["first_shown_wins"]["verdict"] == "not measurable under fixed order"
    assert report["swap_consistency"]["verdict"] == "not measurable under fixed order"
    assert report["swap_consistency"]["control"]["rate"] == 1.0  # the same-order repeats still agree
    assert report["first_shown_wins"]["ci"] is None


def test_length_preference_is_judged_against_the_physicians_on_the_same_pairs() -> None:
    longer_wins = [Judged((0, 1, 2), (3.0, 2.0, 1.0))]
    lengths = [30, 20, 10]
    same = bias_report([(longer_wins, lengths, [5.0, 4.0, 3.0])] * 5, order="balanced", resamples=200)
    assert same["length_preference"]["rate"] == 1.0
    assert same["length_preference"]["physicians"]["rate"] == 1.0
    assert same["length_preference"]["verdict"] == "no evidence of bias"
    against = bias_report([(longer_wins, lengths, [1.0, 2.0, 3.0])] * 5, order="balanced", resamples=200)
    # the physicians preferred the shorter answer in all 3 pairs: the judge's lean is +100 points
    assert against["length_preference"]["difference"]["value"] == pytest.approx(1.0)
    assert (
        against["length_preference"]["verdict"] == "favours longer answers, +100.0 points over the physicians"
    )
    unrated = bias_report([(longer_wins, lengths)] * 5, order="balanced", resamples=200)
    assert unrated["length_preference"]["verdict"].startswith("favours longer answers, +50.0 points over 0.5")
    shorter = bias_report(
        [([Judged((0, 1, 2), (1.0, 2.0, 3.0))], lengths, [3.0, 2.0, 1.0])] * 5, order="fixed"
    )
    # under fixed order the answers' positions never change: length and position go together
    assert shorter["length_preference"]["verdict"] == (
        "favours shorter answers, 100.0 points below the physicians; under fixed order, not separable "
        "from position"
    )


def test_judging_records_the_order_design(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.overlap_judge import OverlapJudge
    from clinieval.benchmarks.automedeval.synth import synthetic_set

    items = synthetic_set(3, seed=2)
    for order in ("fixed", "balanced"):
        entries = asyncio.run(
            judge_set(
                items, OverlapJudge(), tmp_path / order, JudgePlan(repeats=3, order=order, progress=False)
            )
        )
        shown = {(e.item, e.repeat): e.shown for e in entries}
        assert all(shown[(x.id, r)] == shown_order(order, 0, x.id, r, 3) for x in items for r in range(3))
    assert JudgePlan().order == "fixed"  # the paper's protocol is the default
