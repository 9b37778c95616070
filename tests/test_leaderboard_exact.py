"""The leaderboard claims an order only where an exact test supports it, at every n (issue 38).

Before: a shifted-null bootstrap p-value decided "ahead of". On 15 PubMedQA items with 4 vs 0
discordant pairs it gave 0.033 ("smol is ahead of gemma"), where exact McNemar gives 0.125; on 4
patients it gave 0.0025, where no test exchanging patients can go below 0.125. These tests compare
with statsmodels' and scipy's exact tests and with hand-counted cases.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

from clinieval.analysis.exact_pairs import EXHAUSTIVE_UNITS, exact_pair_test, smallest_pvalue
from clinieval.analysis.leaderboard import MIN_CLUSTERS, MIN_ITEMS, BenchmarkScores, build_leaderboard


def _board(table: dict[str, list[float]], clusters: list[str] | None = None, resamples: int = 2000):  # type: ignore[no-untyped-def]
    items = [f"i{k}" for k in range(len(next(iter(table.values()))))]
    scores = {m: dict(zip(items, v, strict=True)) for m, v in table.items()}
    cl = None if clusters is None else dict(zip(items, clusters, strict=True))
    boards = build_leaderboard([BenchmarkScores("b", "accuracy", scores, clusters=cl)], resamples=resamples)
    return boards.benchmarks[0]


def test_fifteen_items_four_discordant_pairs_are_not_an_order() -> None:
    # smol right on 4 items gemma missed, no item the other way, 11 concordant
    smol = [1.0] * 4 + [1.0] * 5 + [0.0] * 6
    gemma = [0.0] * 4 + [1.0] * 5 + [0.0] * 6
    board = _board({"smol": smol, "gemma": gemma})
    (pair,) = board.pairs
    assert pair.pvalue == pytest.approx(0.125)  # 2 * 0.5**4, by hand
    assert "McNemar" in pair.test and pair.exhaustive and pair.mc_error is None
    assert not pair.significant
    assert "ahead of" not in board.verdict and "indistinguishable" in board.verdict
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    reference = sm_mcnemar(np.array([[5, 4], [0, 6]]), exact=True).pvalue
    assert pair.pvalue == pytest.approx(reference)


def test_four_patients_cannot_give_a_p_below_one_eighth() -> None:
    clusters = ["p1"] * 3 + ["p2"] * 3 + ["p3"] * 3 + ["p4"] * 3
    a = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    b = [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    board = _board({"a": a, "b": b}, clusters)
    (pair,) = board.pairs
    assert pair.pvalue >= 0.125 and pair.smallest_p == 0.125
    # by hand: patient sums of a - b are 2, 2, 1, 2; of the 16 sign patterns only all-plus and
    # all-minus reach |sum| >= 7
    assert pair.pvalue == pytest.approx(2 / 16)
    assert not pair.significant and "ahead of" not in board.verdict
    assert any(f"fewer than the {MIN_CLUSTERS} patients" in w and "0.125" in w for w in board.warnings)


@pytest.mark.parametrize("seed", range(6))
def test_graded_scores_match_scipys_exact_sign_flip(seed: int) -> None:
    from scipy import stats

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 13))
    x, y = rng.random(n).round(2), rng.random(n).round(2)
    ours = exact_pair_test(list(x), list(y))
    ref = stats.permutation_test(
        (x, y), lambda u, v: np.mean(u - v), permutation_type="samples", n_resamples=np.inf
    )
    assert ours.exhaustive and "sign-flip" in ours.method
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


def test_clustered_sign_flip_equals_an_enumeration_by_hand() -> None:
    rng = np.random.default_rng(3)
    clusters = [f"p{k % 6}" for k in range(20)]
    x, y = list(rng.random(20)), list(rng.random(20))
    sums: dict[str, float] = {}
    for c, u, v in zip(clusters, x, y, strict=True):
        sums[c] = sums.get(c, 0.0) + u - v
    observed = abs(sum(sums.values()))
    hits = sum(
        abs(sum(s * v for s, v in zip(signs, sums.values(), strict=True))) >= observed - 1e-12
        for signs in itertools.product((-1, 1), repeat=6)
    )
    assert exact_pair_test(x, y, clusters=clusters).pvalue == pytest.approx(hits / 64)


def test_beyond_the_exhaustive_limit_the_monte_carlo_error_is_stated() -> None:
    rng = np.random.default_rng(0)
    n = EXHAUSTIVE_UNITS + 10
    x, y = list(rng.random(n)), list(rng.random(n) * 0.9)
    test = exact_pair_test(x, y)
    assert not test.exhaustive and test.mc_error is not None
    assert test.mc_error == pytest.approx(np.sqrt(test.pvalue * (1 - test.pvalue) / 20_000))
    from scipy import stats

    ref = stats.permutation_test(
        (np.array(x), np.array(y)), lambda u, v: np.mean(u - v), permutation_type="samples",
        n_resamples=200_000, random_state=1,
    )  # fmt: skip
    assert abs(test.pvalue - ref.pvalue) < 5 * test.mc_error + 0.002


def test_binary_mcnemar_matches_statsmodels_at_many_sizes() -> None:
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(2, 200))
        x, y = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)
        b, c = int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))
        ref = sm_mcnemar(np.array([[0, b], [c, 0]]), exact=True).pvalue
        assert exact_pair_test(list(x), list(y)).pvalue == pytest.approx(min(1.0, ref))


def test_a_clear_win_on_enough_items_is_still_claimed() -> None:
    a = [1.0] * 30 + [0.0] * 10
    b = [0.0] * 30 + [0.0] * 10
    board = _board({"a": a, "b": b})
    (pair,) = board.pairs
    assert pair.significant and pair.pvalue == pytest.approx(2 * 0.5**30)
    assert board.verdict.startswith("a is ahead of b")
    assert board.rank("a").interval == (1.0, 1.0) and not board.rank("a").widened
    assert not any("fewer than" in w for w in board.warnings)


def test_rank_intervals_are_never_narrower_than_the_tests_allow() -> None:
    # every item favours "best", but with 6 items no pair test can reach p < 0.05 after Holm
    table = {"best": [1.0, 0.9, 0.8, 1.0, 0.9, 0.95], "mid": [0.5, 0.6, 0.5, 0.7, 0.6, 0.5],
             "low": [0.1, 0.2, 0.3, 0.1, 0.2, 0.3]}  # fmt: skip
    board = _board(table)
    for model in table:
        r = board.rank(model)
        ahead = sum(p.significant and ((p.b == model) == (p.mean_difference > 0)) for p in board.pairs
                    if model in (p.a, p.b))  # fmt: skip
        assert r.interval[0] <= 1 + ahead
    assert board.rank("best").interval[1] >= 2.0


def test_few_items_warn_with_the_smallest_p_and_a_detectable_difference() -> None:
    board = _board({"a": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], "b": [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]})
    (line,) = [w for w in board.warnings if "fewer than" in w]
    assert f"Only 7 items (fewer than the {MIN_ITEMS} items" in line
    assert "smallest p-value any pair test could reach here is" in line
    assert "smallest difference this cell could detect" in line


def test_a_zero_width_interval_is_flagged() -> None:
    board = _board({"a": [1.0] * 7, "b": [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]})
    flagged = [w for w in board.warnings if "zero width" in w]
    assert len(flagged) == 1 and flagged[0].startswith("a's interval [1, 1]")
    assert board.as_json()["warnings"] == list(board.warnings)


def test_smallest_pvalue() -> None:
    assert smallest_pvalue(0) == 1.0 and smallest_pvalue(1) == 1.0
    assert smallest_pvalue(4) == 0.125 and smallest_pvalue(20) == pytest.approx(2 / 2**20)
    # a large benchmark: 2 / 2^k overflowed a float beyond k = 1023 discordant items
    assert smallest_pvalue(1024) == pytest.approx(2.0**-1023) and smallest_pvalue(5000) == 0.0


def test_a_large_benchmark_with_many_discordant_items_gets_a_board() -> None:
    """A 3,000-item right/wrong benchmark where about 1,500 items differ between the two models
    (the suite report crashed with OverflowError on it)."""
    rng = random.Random(7)
    items = [f"i{k}" for k in range(3000)]
    scores = {m: {i: float(rng.random() < 0.5) for i in items} for m in ("a", "b")}
    board = build_leaderboard([BenchmarkScores("big", "accuracy", scores)], resamples=200)
    (pair,) = board.benchmarks[0].pairs
    assert pair.smallest_p == 0.0 and 0.0 <= pair.pvalue <= 1.0


def test_the_page_shows_the_warnings_and_the_test(tmp_path: Path) -> None:
    from clinieval.suite.leaderboard import write_leaderboard

    smol = [1.0] * 4 + [1.0] * 5 + [0.0] * 6
    gemma = [0.0] * 4 + [1.0] * 5 + [0.0] * 6
    items = [f"i{k}" for k in range(15)]
    scores = {"smol": dict(zip(items, smol, strict=True)), "gemma": dict(zip(items, gemma, strict=True))}
    board = build_leaderboard([BenchmarkScores("pubmedqa", "accuracy", scores)])
    write_leaderboard(board, {}, tmp_path, title="t")
    html = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    for text in (html, md):
        assert "Only 15 items (fewer than the 30 items" in text
        assert "exact McNemar" in text and "indistinguishable on this data" in text
        assert "smol is ahead of" not in text


# --- the clinical margin (two one-sided tests) --------------------------------------------------


def _margin_board(table: dict[str, list[float]], margin: float):  # type: ignore[no-untyped-def]
    items = [f"i{k}" for k in range(len(next(iter(table.values()))))]
    scores = {m: dict(zip(items, v, strict=True)) for m, v in table.items()}
    board = build_leaderboard([BenchmarkScores("b", "score", scores, margin=margin)], resamples=2000)
    return board.benchmarks[0]


def test_a_margin_calls_equivalent_better_and_cannot_say() -> None:
    rng = np.random.default_rng(11)
    base = rng.random(300)
    board = _margin_board(
        {"a": list(base + 0.3), "b": list(base + 0.301 + rng.normal(0, 0.01, 300)), "c": list(base)}, 0.05
    )
    calls = {(p.a, p.b): p.margin_call for p in board.pairs}
    assert calls[("b", "a")] == "equivalent"
    assert calls[("b", "c")] == "a better" and calls[("a", "c")] == "a better"
    assert "practically equivalent (within ±0.050): b and a" in board.verdict
    assert "better by at least 0.050: b over c; a over c" in board.verdict
    few = _margin_board({"x": [0.9, 0.8, 0.7, 0.95], "y": [0.5, 0.6, 0.75, 0.6]}, 0.05)
    assert few.pairs[0].margin_call == "neither" and "neither equivalent nor 0.050 apart" in few.verdict


def test_the_margin_agrees_with_statsmodels_tost_where_the_answer_is_clear() -> None:
    from statsmodels.stats.weightstats import ttost_paired

    rng = np.random.default_rng(2)
    for shift, margin in ((0.0, 0.1), (0.02, 0.1), (0.3, 0.1), (0.09, 0.1)):
        x = rng.normal(0.5, 0.2, 400)
        y = x - shift + rng.normal(0, 0.1, 400)
        board = _margin_board({"x": list(x), "y": list(y)}, margin)
        p_tost = ttost_paired(x, y, -margin, margin)[0]
        ours = board.pairs[0].margin_call
        if p_tost < 0.01:
            assert ours == "equivalent", (shift, p_tost)
        elif p_tost > 0.1:
            assert ours != "equivalent", (shift, p_tost)


def test_a_margin_must_be_above_zero() -> None:
    from clinieval.errors import UserError

    with pytest.raises(UserError, match="margin must be a number above 0"):
        _margin_board({"x": [1.0, 0.0], "y": [0.0, 1.0]}, 0.0)
