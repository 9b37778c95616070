"""The leaderboard's statistics (clinieval.analysis.leaderboard), checked against computations made
another way: rank intervals against a plain-Python loop over the same random stream and against
exact enumeration of every resample of a tiny table, Holm against statsmodels, headline CIs and
paired tests against the uncertainty functions on hand-picked items, and hand-computed cases (a
model better on every item always ranks first; identical models split their ranks)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from clinieval.analysis.leaderboard import BenchmarkScores, build_leaderboard, rank_seed
from clinieval.analysis.leaderboard_ranks import bootstrap_ranks, rank_distribution, rank_rows
from clinieval.analysis.leaderboard_words import format_number, format_percent, verdict
from clinieval.analysis.uncertainty import (
    bonferroni,
    cluster_bootstrap_ci,
    holm,
    paired_bootstrap,
    paired_permutation_test,
)
from clinieval.errors import UserError

# a hand-made table: 8 items from 4 patients, three models, scores exact in binary
ITEMS = [f"i{k}" for k in range(8)]
PATIENTS = {f"i{k}": f"p{k // 2}" for k in range(8)}
TABLE = {
    "alpha": [1, 1, 0.5, 1, 0, 1, 1, 0.25],
    "beta": [1, 0, 0.5, 1, 0.75, 0, 1, 0.25],
    "gamma": [0, 1, 0, 0.5, 0, 0, 1, 0.25],
}


def scores(table: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    return {m: dict(zip(ITEMS, map(float, v), strict=False)) for m, v in table.items()}


# --- an independent computation of the rank bootstrap -------------------------------------------


def loop_ranks(
    table: Mapping[str, Sequence[float]], clusters: Sequence[str] | None, resamples: int, seed: object
) -> tuple[list[str], list[list[float]], list[list[float]]]:
    """Plain Python: draw the units one scalar at a time from the same generator, pool the drawn
    units' items, rank by counting better and equal means; split ties by hand."""
    models = list(table)
    n = len(next(iter(table.values())))
    labels = clusters if clusters is not None else [str(i) for i in range(n)]
    units: dict[str, list[int]] = {}
    for i, c in enumerate(labels):
        units.setdefault(c, []).append(i)
    groups = list(units.values())
    rng = np.random.default_rng(seed)  # type: ignore[arg-type]
    k = len(models)
    mass = [[0.0] * k for _ in models]
    ranks: list[list[float]] = [[] for _ in models]
    for _ in range(resamples):
        drawn = [groups[int(rng.integers(0, len(groups)))] for _ in groups]
        rows = [i for unit in drawn for i in unit]
        means = [round(sum(table[m][i] for i in rows) / len(rows), 12) for m in models]
        for j in range(k):
            better = sum(1 for v in means if v > means[j])
            equal = sum(1 for v in means if v == means[j])
            ranks[j].append(better + (equal + 1) / 2)
            for r in range(better + 1, better + equal + 1):
                mass[j][r - 1] += 1 / equal
    return models, [[v / resamples for v in row] for row in mass], ranks


def inverted_cdf(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(q * len(ordered)) - 1]


@pytest.mark.parametrize("clustered", [False, True], ids=["items", "patients"])
def test_rank_intervals_equal_a_plain_python_loop_over_the_same_stream(clustered: bool) -> None:
    labels = [PATIENTS[i] for i in ITEMS] if clustered else None
    reps = 999  # q * reps is never a whole number, so the quantile's index is unambiguous
    models, mass, ranks = loop_ranks(TABLE, labels, reps, [7, 3])
    values = np.array([TABLE[m] for m in models], dtype=np.float64).T
    got = bootstrap_ranks(values, labels, resamples=reps, seed=[7, 3])
    assert got.tolist() == [[ranks[j][r] for j in range(3)] for r in range(reps)]
    observed = rank_rows(values.mean(axis=0)[None, :])[0]
    dist = rank_distribution(models, list(observed), got, level=0.95)
    for j, d in enumerate(dist):
        assert d.probabilities == pytest.approx(mass[j], abs=1e-12)
        assert sum(d.probabilities) == pytest.approx(1.0)
        assert d.median == statistics.median(ranks[j])
        assert d.interval == (inverted_cdf(ranks[j], 0.025), inverted_cdf(ranks[j], 0.975))
    # every rank is held by exactly one model's worth of probability
    assert np.sum([d.probabilities for d in dist], axis=0) == pytest.approx([1.0, 1.0, 1.0])


def test_rank_probabilities_converge_to_exact_enumeration_of_every_resample() -> None:
    tiny = {"a": [1.0, 0.0, 1.0, 0.5], "b": [0.0, 1.0, 1.0, 0.5], "c": [0.0, 0.0, 1.0, 1.0]}
    n, models = 4, list(tiny)
    exact = np.zeros((3, 3))
    for draw in itertools.product(range(n), repeat=n):  # all 256 equally likely resamples
        means = [sum(tiny[m][i] for i in draw) / n for m in models]
        for j in range(3):
            better = sum(v > means[j] for v in means)
            equal = sum(v == means[j] for v in means)
            for r in range(better, better + equal):
                exact[j, r] += 1 / equal / n**n
    values = np.array([tiny[m] for m in models]).T
    reps = bootstrap_ranks(values, resamples=40_000, seed=1)
    dist = rank_distribution(models, [1, 2, 3], reps)
    got = np.array([d.probabilities for d in dist])
    assert np.abs(got - exact).max() < 0.01  # 4 standard errors at 40 000 replicates
    assert exact.sum(axis=1) == pytest.approx([1, 1, 1])


def test_a_model_better_on_every_item_ranks_first_in_every_replicate() -> None:
    table = {"best": [1.0, 0.8, 0.6, 1.0], "mid": [0.5, 0.7, 0.5, 0.9], "low": [0.4, 0.1, 0.55, 0.0]}
    board = build_leaderboard(
        [BenchmarkScores("b", "score", {m: dict(zip(ITEMS, v, strict=False)) for m, v in table.items()})],
        resamples=500,
    ).benchmarks[0]
    best = board.rank("best")
    assert board.models[0] == "best"
    assert best.probabilities == (1.0, 0.0, 0.0)
    assert best.median == 1.0
    # every replicate ranks it first, yet on 4 items no test can tell it apart from the others
    # (the exact sign-flip's smallest p is 2/2^4 = 0.125): the interval says so (issue 38)
    assert best.interval == (1.0, 3.0) and best.widened


def test_identical_models_split_their_ranks() -> None:
    same = [1.0, 0.0, 1.0, 1.0, 0.0]
    board = build_leaderboard(
        [
            BenchmarkScores(
                "b",
                "acc",
                {"x": dict(zip(ITEMS, same, strict=False)), "y": dict(zip(ITEMS, same, strict=False))},
            )
        ],
        resamples=300,
    ).benchmarks[0]
    for model in ("x", "y"):
        r = board.rank(model)
        # tied in every replicate, but no test can tell which is better: either rank is possible
        assert r.rank == 1.5 and r.median == 1.5 and r.interval == (1.0, 2.0)
        assert r.probabilities == (0.5, 0.5)
    (pair,) = board.pairs
    assert pair.mean_difference == 0.0 and pair.pvalue == 1.0 and not pair.significant
    assert (
        board.verdict
        == "x and y are indistinguishable on this data (difference 0.000, 95% CI 0.000 to 0.000)."
    )


# --- Holm ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ps",
    [
        [0.01, 0.04, 0.03, 0.005],
        [0.2, 0.2, 0.01, 0.01, 0.5, 1.0],
        [0.049, 0.051],
        [0.5],
        list(np.random.default_rng(4).random(12)),
    ],
)
def test_holm_equals_statsmodels(ps: list[float]) -> None:
    from statsmodels.stats.multitest import multipletests

    reject, expected, _, _ = multipletests(ps, alpha=0.05, method="holm")
    assert holm(ps) == pytest.approx(list(expected), abs=1e-15)
    assert [p <= 0.05 for p in holm(ps)] == list(reject)
    # Holm never adjusts more than Bonferroni does
    assert all(h <= b + 1e-15 for h, b in zip(holm(ps), bonferroni(ps), strict=True))


def test_holm_edges() -> None:
    assert holm([]) == []
    with pytest.raises(UserError, match=r"\[0, 1\]"):
        holm([0.1, 1.5])


# --- headline, pairs, judge runs, overall --------------------------------------------------------


def clustered_board(resamples: int = 400) -> BenchmarkScores:
    s = scores(TABLE)
    del s["gamma"]["i7"]  # gamma's call failed on i7: left out, counted
    return BenchmarkScores("medalign", "accuracy", s, clusters=PATIENTS, failed={"gamma": 1})


def test_headline_ci_is_the_patient_bootstrap_and_failed_items_are_not_scores() -> None:
    board = build_leaderboard([clustered_board()], resamples=400, seed=5).benchmarks[0]
    g = board.score("gamma")
    kept = ITEMS[:7]
    assert g.n == 7 and g.failed == 1 and g.clusters == 4
    assert g.mean == pytest.approx(sum(TABLE["gamma"][:7]) / 7)  # not (… + 0) / 8
    assert g.ci == cluster_bootstrap_ci(
        TABLE["gamma"][:7], [PATIENTS[i] for i in kept], resamples=400, seed=5
    )
    # ranks are computed on the items every model answered: 7 items, 4 patients
    assert board.rank_items == 7 and board.rank_clusters == 4


def test_pairs_are_paired_on_shared_items_with_holm_over_the_benchmark() -> None:
    from statsmodels.stats.multitest import multipletests

    board = build_leaderboard([clustered_board()], resamples=400, seed=5).benchmarks[0]
    ps = []
    for p in board.pairs:
        common = [i for i in ITEMS if not (i == "i7" and "gamma" in (p.a, p.b))]
        x = [TABLE[p.a][ITEMS.index(i)] for i in common]
        y = [TABLE[p.b][ITEMS.index(i)] for i in common]
        labels = [PATIENTS[i] for i in common]
        want = paired_bootstrap(x, y, resamples=400, seed=5, clusters=labels)
        assert p.n == len(common)
        assert p.mean_difference == pytest.approx(np.mean(x) - np.mean(y))
        # the CI is the paired bootstrap's; the p-value the exact sign-flip over patients' (issue 38)
        assert p.ci == (want.ci_low, want.ci_high)
        exact = paired_permutation_test(x, y, exact=True, clusters=labels)
        assert p.pvalue == exact.pvalue and p.exhaustive
        ps.append(p.pvalue)
    assert [p.pvalue_holm for p in board.pairs] == pytest.approx(list(multipletests(ps, method="holm")[1]))
    assert len(board.pairs) == 3


def test_judge_instability_counts_each_rank_per_repeat() -> None:
    # three repeats; item means per repeat: a 1, .5, 1 | b .5, 1, .5 | c 0, 0, .5 (ties take the min rank)
    runs = {
        "a": [{"i0": 1, "i1": 1}, {"i0": 1, "i1": 0}, {"i0": 1, "i1": 1}],
        "b": [{"i0": 1, "i1": 0}, {"i0": 1, "i1": 1}, {"i0": 0, "i1": 1}],
        "c": [{"i0": 0, "i1": 0}, {"i0": 0, "i1": 0}, {"i0": 1, "i1": 0}],
    }
    s = {m: {"i0": 1.0, "i1": 0.5} for m in runs}
    j = build_leaderboard([BenchmarkScores("e", "acc", s, judge_runs=runs)], resamples=50).benchmarks[0].judge
    assert j is not None and j.repeats == 3
    by = dict(zip(j.models, zip(*j.ranks, strict=True), strict=True))
    assert by == {"a": (1.0, 2.0, 1.0), "b": (2.0, 1.0, 2.0), "c": (3.0, 3.0, 2.0)}
    assert j.rank_counts == {"a": (2, 1, 0), "b": (1, 2, 0), "c": (0, 1, 2)}
    assert j.gold_ranks == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert j.instability == 1 + 1 + 1  # a's 2, b's 1, c's 2 are one off their gold ranks


def test_overall_mean_rank_joint_intervals_and_win_rates() -> None:
    b1 = BenchmarkScores("one", "acc", scores(TABLE))
    b2 = BenchmarkScores("two", "acc", scores({"beta": [1, 1, 1, 1], "alpha": [0, 0, 1, 0]}))
    board = build_leaderboard([b1, b2], resamples=999, seed=3)
    one = {r.model: r.rank for r in board.benchmarks[0].ranks}
    assert one == {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}
    overall = {o.model: o for o in board.overall}
    assert overall["alpha"].mean_rank == 1.5 and overall["beta"].mean_rank == 1.5
    assert overall["gamma"].mean_rank == 3.0 and overall["gamma"].ranks == {
        "one": 3.0
    }  # on one benchmark only
    # the joint bootstrap, recomputed: each benchmark's own stream, mean rank per replicate, ranked
    _, _, r1 = loop_ranks(TABLE, None, 999, rank_seed(3, "one"))
    _, _, r2 = loop_ranks({"beta": [1, 1, 1, 1], "alpha": [0, 0, 1, 0]}, None, 999, rank_seed(3, "two"))
    mean = {"alpha": [(a + b) / 2 for a, b in zip(r1[0], r2[1], strict=True)],
            "beta": [(a + b) / 2 for a, b in zip(r1[1], r2[0], strict=True)], "gamma": r1[2]}  # fmt: skip
    mass = {m: [0.0, 0.0, 0.0] for m in mean}
    for r in range(999):
        row = {m: v[r] for m, v in mean.items()}
        for m, v in row.items():
            better = sum(w < v for w in row.values())
            equal = sum(w == v for w in row.values())
            for k in range(better, better + equal):
                mass[m][k] += 1 / equal / 999
    for m, o in overall.items():
        assert o.position.probabilities == pytest.approx(mass[m], abs=1e-12)
    # win rates: alpha beats beta on "one" (mean .71875 vs .5625) and loses on "two": one half
    models = list(board.models)
    a, b, g = models.index("alpha"), models.index("beta"), models.index("gamma")
    assert board.win_rates[a][b] == 0.5 and board.win_counts[a][b] == 2
    assert board.win_rates[a][g] == 1.0 and board.win_counts[a][g] == 1 and board.win_rates[g][a] == 0.0
    assert board.win_rates[a][a] is None


def test_the_board_is_deterministic_for_a_seed() -> None:
    one = build_leaderboard([clustered_board()], resamples=300, seed=1).to_json()
    assert build_leaderboard([clustered_board()], resamples=300, seed=1).to_json() == one
    assert build_leaderboard([clustered_board()], resamples=300, seed=2).to_json() != one


# --- plain words ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class P:
    a: str
    b: str
    mean_difference: float
    significant: bool
    ci: tuple[float, float] = (0.0, 0.0)


def words(models: str, *pairs: P) -> str:
    return verdict(models.split(), pairs, 0.95, 2)


def test_plain_words_never_claim_an_order_the_tests_do_not_support() -> None:
    ns = P("A", "B", 0.03, False, (-0.05, 0.11))
    assert (
        words("A B", ns)
        == "A and B are indistinguishable on this data (difference 0.03, 95% CI −0.05 to 0.11)."
    )
    assert words("A B C", ns, P("A", "C", 0.1, False), P("B", "C", 0.05, False)).startswith(
        "All 3 models are indistinguishable"
    )
    # the brief's example: two indistinguishable, the third behind both
    assert (
        words(
            "smol gemma pool",
            P("smol", "gemma", 0.03, False, (-0.05, 0.11)),
            P("smol", "pool", 0.4, True),
            P("gemma", "pool", 0.37, True),
        )
        == "smol and gemma are indistinguishable on this data (difference 0.03, 95% CI −0.05 to 0.11);"
        " pool is behind both."
    )
    # a clear leader, the rest indistinguishable
    assert (
        words("A B C", P("A", "B", 0.3, True), P("A", "C", 0.4, True), P("B", "C", 0.1, False, (-0.02, 0.2)))
        == "A is ahead of every other model; B and C are indistinguishable on this data"
        " (difference 0.10, 95% CI −0.02 to 0.20)."
    )
    assert words("A B C", P("A", "B", 0.3, True), P("A", "C", 0.4, True), P("B", "C", 0.1, True)) == (
        "Every pair differs: A ahead of B ahead of C."
    )
    # a chain of overlaps: A ~ B, B ~ C, but A ahead of C — C is behind A only
    assert words("A B C", P("A", "B", 0.1, False), P("A", "C", 0.2, True), P("B", "C", 0.1, False)) == (
        "A and B are indistinguishable on this data (difference 0.10, 95% CI 0.00 to 0.00);"
        " C is behind A, and is indistinguishable from B (difference −0.10, 95% CI 0.00 to 0.00)."
    )
    # a significant pair with a negative difference is not "ahead"
    assert words("A B", P("A", "B", -0.2, True, (-0.3, -0.1))) == (
        "B is ahead of A (difference 0.20, 95% CI 0.10 to 0.30)."
    )
    assert (
        verdict(["solo"], [], 0.95) == "Only solo was scored on this benchmark: there is nothing to compare."
    )
    assert format_number(-0.0001, 2) == "0.00" and format_number(-0.5, 1) == "−0.5"
    # a share is shown as 0% or 100% only when it is exactly that
    assert [format_percent(p) for p in (0.0, 0.0004, 0.0005, 0.5, 0.9996, 1.0)] == [
        "0.0%", "<0.1%", "0.1%", "50.0%", ">99.9%", "100.0%"
    ]  # fmt: skip
    assert [format_percent(p, 0) for p in (0.004, 0.996, 0.42)] == ["<1%", ">99%", "42%"]


# --- edges: one model, and one clear error each ----------------------------------------------------


def test_one_model_is_a_board_without_pairs() -> None:
    board = build_leaderboard([BenchmarkScores("b", "acc", {"only": {"i0": 1.0, "i1": 0.0}})], resamples=100)
    (b,) = board.benchmarks
    assert b.pairs == () and b.rank("only").probabilities == (1.0,)
    assert board.overall[0].model == "only" and board.win_rates == ((None,),)
    assert board.to_json()["benchmarks"][0]["verdict"].startswith("Only only was scored")


def mk(s: Mapping[str, Mapping[str, float]], **kw: object) -> BenchmarkScores:
    return BenchmarkScores("b", "acc", s, **kw)  # type: ignore[arg-type]


ONE = {"i0": 1.0}
TWO = {"i0": 1.0, "i1": 0.0}


@pytest.mark.parametrize(
    ("bench", "message"),
    [
        (mk({"x": ONE, "y": {}}, failed={"y": 4}), r"'y' has no scored item \(4 failed\)"),
        (mk({"x": ONE}, failed={"y": 2}), r"'y' has no scored item \(2 failed\)"),
        (mk({"x": ONE}, failed={"x": -1}), "whole number >= 0"),
        (mk({"x": TWO}, clusters={"i0": "p", "i1": "p"}), "from 1 patient"),
        (mk({"x": TWO}, clusters={"i0": "p"}), "'i1' has no patient"),
        (
            mk({"x": TWO, "y": {"i0": 1.0, "i2": 0.0}}, clusters={"i0": "p", "i1": "q", "i2": "r"}),
            "items every model answered come from 1 patient",
        ),
        (mk({"x": {"i0": math.nan}}), "not a finite number"),
        (mk({}), "no model has scores"),
        (mk({"x": ONE, "y": {"i1": 1.0}}), "no item was answered by every model"),
        (mk({"x": ONE}, judge_runs={"x": [ONE], "z": [ONE]}), r"judge repeats for \['z'\]"),
        (mk({"x": TWO, "y": TWO}, judge_runs={"x": [ONE], "y": [ONE, ONE]}), "different numbers of judge"),
    ],
)
def test_bad_boards_fail_with_one_clear_error(bench: BenchmarkScores, message: str) -> None:
    with pytest.raises(UserError, match=message):
        build_leaderboard([bench], resamples=50)


def test_bad_board_settings() -> None:
    good = BenchmarkScores("b", "acc", {"x": {"i0": 1.0}})
    with pytest.raises(UserError, match="at least one benchmark"):
        build_leaderboard([])
    with pytest.raises(UserError, match=r"\['b'\] given twice"):
        build_leaderboard([good, good])
    with pytest.raises(UserError, match="level"):
        build_leaderboard([good], level=1.5)
