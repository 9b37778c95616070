"""Rankings, win rates and rank agreement against scipy and hand-computed values."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from clinieval.analysis.rank_agreement import (
    accuracy_2tuple,
    accuracy_triple,
    inter_rater_kendall,
    metric_human_kendall,
    order_agreement,
    rank_instability,
)
from clinieval.analysis.rankings import (
    PairOutcome,
    ScoreTable,
    compare_pair_outcomes,
    head_to_head,
    mean_ranks,
    pair_outcomes,
    rank_scores,
    rank_table,
    win_rate_errors,
    win_rates,
)
from clinieval.analysis.uncertainty import bootstrap_ci
from clinieval.errors import UserError

# Four items, three models, higher is better; C has no score on item 3.
ROWS: list[tuple[str, str, float | None]] = [
    ("i1", "A", 3), ("i1", "B", 2), ("i1", "C", 1),
    ("i2", "A", 2), ("i2", "B", 2), ("i2", "C", 3),
    ("i3", "A", 1), ("i3", "B", 3), ("i3", "C", None),
    ("i4", "A", 5), ("i4", "B", 4), ("i4", "C", 4),
]  # fmt: skip


def table() -> ScoreTable:
    return ScoreTable.from_rows(ROWS)


# --- ScoreTable -----------------------------------------------------------------------------------


def test_table_from_rows_and_columns_agree() -> None:
    t = table()
    assert t.items == ("i1", "i2", "i3", "i4") and t.models == ("A", "B", "C")
    assert t.row("i3") == [1.0, 3.0, None]
    cols = ScoreTable.from_columns(
        {"A": [3, 2, 1, 5], "B": [2, 2, 3, 4], "C": [1, 3, None, 4]}, items=["i1", "i2", "i3", "i4"]
    )
    np.testing.assert_array_equal(cols.values, t.values)
    assert cols.restrict(models=["C", "A"], items=["i4"]).row("i4") == [4.0, 5.0]
    assert ScoreTable.from_columns({"A": [1, 2]}).items == ("0", "1")
    with pytest.raises(ValueError, match="read-only"):
        t.values[0, 0] = 9


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ScoreTable.from_rows([]), "no rows"),
        (lambda: ScoreTable.from_rows([("i", "A", 1), ("i", "A", 2)]), "two values for model 'A'"),
        (lambda: ScoreTable.from_rows([("i", "A", math.nan)]), "NaN; pass None"),
        (lambda: ScoreTable.from_columns({"A": [1, 2], "B": [1]}), "different lengths"),
        (lambda: ScoreTable.from_columns({"A": [1, 2]}, items=["x"]), "one name per row"),
        (lambda: ScoreTable.from_columns({}), "no models"),
        (lambda: ScoreTable(("a",), ("A", "A"), np.zeros((1, 2))), "duplicate model"),
        (lambda: ScoreTable(("a",), ("A",), np.zeros((2, 1))), "shape"),
        (lambda: table().restrict(models=["Z"]), r"model\(s\) \['Z'\] not in the table"),
        (lambda: table().row("nope"), "not in the table"),
    ],
)
def test_table_errors(call: Callable[[], object], message: str) -> None:
    with pytest.raises(UserError, match=message):
        call()


# --- ranks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ties", ["average", "min"])
def test_rank_scores_matches_scipy(ties: str) -> None:
    scores = [0.2, 0.9, 0.5, 0.5, 0.1, 0.9]
    assert rank_scores(scores, ties=ties) == list(rankdata([-s for s in scores], method=ties))  # type: ignore[arg-type]
    assert rank_scores(scores, ties=ties, higher_is_better=False) == list(rankdata(scores, method=ties))  # type: ignore[arg-type]


def test_rank_scores_ties_and_edges() -> None:
    assert rank_scores([4, 7, 7, 1]) == [3.0, 1.5, 1.5, 4.0]
    assert rank_scores([4, 7, 7, 1], ties="min") == [3.0, 1.0, 1.0, 4.0]
    assert rank_scores([5, 5, 5]) == [2.0, 2.0, 2.0]
    assert rank_scores([5, 5, 5], ties="min") == [1.0, 1.0, 1.0]
    assert rank_scores([0.3]) == [1.0]
    for bad, message in (([], "no scores"), ([1, None], "None"), ([1, math.nan], "NaN")):
        with pytest.raises(UserError, match=message):
            rank_scores(bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="ties must be"):
        rank_scores([1, 2], ties="dense")  # type: ignore[arg-type]


def test_rank_table_skips_missing_cells() -> None:
    r = rank_table(table())
    assert not r.higher_is_better
    assert r.row("i2") == [2.5, 2.5, 1.0]
    assert r.row("i3") == [2.0, 1.0, None]
    assert rank_table(table(), ties="min").row("i4") == [1.0, 2.0, 2.0]
    # Ranks in, ranks out: re-ranking a rank table keeps it (lower is better).
    assert rank_table(r).row("i1") == [1.0, 2.0, 3.0]


def test_mean_ranks() -> None:
    assert mean_ranks(table()) == {"A": 1.625, "B": 2.0, "C": pytest.approx(6.5 / 3)}
    assert mean_ranks(table(), ties="min") == {"A": 1.5, "B": 1.75, "C": 2.0}
    dense = ScoreTable.from_columns({"A": [1, 1], "B": [1, 2], "C": [2, 3]}, higher_is_better=False)
    assert mean_ranks(dense, ties="as_given") == {"A": 1.0, "B": 1.5, "C": 2.5}
    assert mean_ranks(dense, ties="min") == {"A": 1.0, "B": 1.5, "C": 3.0}
    assert mean_ranks(ScoreTable.from_columns({"A": [1.0], "B": [None]})) == {"A": 1.0, "B": None}
    with pytest.raises(UserError, match="as_given"):
        mean_ranks(table(), ties="as_given")


# --- battles ---------------------------------------------------------------------------------------


def test_head_to_head_hand_computed() -> None:
    h = head_to_head(table())
    assert h.rates[0][0] is None and h.battles[0][0] == 0
    assert h.rate("A", "B") == 0.5 and h.rate("B", "A") == 0.25  # A: 2 wins, 1 tie, 1 loss
    assert h.rate("A", "C") == pytest.approx(2 / 3) and h.battles[0][2] == 3  # item 3 is no battle
    assert h.rate("B", "C") == pytest.approx(1 / 3) and h.rate("C", "B") == pytest.approx(1 / 3)
    nt = head_to_head(table(), exclude_ties=True)
    assert nt.rate("A", "B") == pytest.approx(2 / 3) and nt.battles[0][1] == 3
    assert nt.rate("B", "C") == 0.5 and nt.rate("C", "B") == 0.5
    assert win_rates(table()) == {
        "A": pytest.approx(7 / 12),
        "B": pytest.approx(7 / 24),
        "C": pytest.approx(1 / 3),
    }
    assert win_rates(table(), exclude_ties=True) == {
        "A": pytest.approx(2 / 3),
        "B": pytest.approx(5 / 12),
        "C": pytest.approx(5 / 12),
    }
    with pytest.raises(UserError, match="not in the matrix"):
        h.rate("A", "Z")


def _brute_force(t: ScoreTable, exclude_ties: bool) -> list[list[float | None]]:
    out: list[list[float | None]] = []
    for i, _ in enumerate(t.models):
        row: list[float | None] = []
        for j, _ in enumerate(t.models):
            wins = den = 0
            for item in t.items:
                a, b = t.row(item)[i], t.row(item)[j]
                if i == j or a is None or b is None or (exclude_ties and a == b):
                    continue
                den += 1
                wins += a > b
            row.append(wins / den if den else None)
        out.append(row)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("exclude_ties", [False, True])
def test_head_to_head_matches_brute_force(seed: int, exclude_ties: bool) -> None:
    rng = random.Random(seed)
    cols = {m: [rng.choice([1, 2, 3, None]) for _ in range(30)] for m in "ABCDE"}
    t = ScoreTable.from_columns(cols)
    got = head_to_head(t, exclude_ties=exclude_ties).rates
    want = _brute_force(t, exclude_ties)
    for g_row, w_row in zip(got, want, strict=True):
        assert list(g_row) == [pytest.approx(w) if w is not None else None for w in w_row]


def test_all_equal_scores() -> None:
    t = ScoreTable.from_columns({"A": [1, 1], "B": [1, 1], "C": [1, 1]})
    assert win_rates(t) == {"A": 0.0, "B": 0.0, "C": 0.0}
    assert win_rates(t, exclude_ties=True) == {"A": None, "B": None, "C": None}
    assert mean_ranks(t) == {"A": 2.0, "B": 2.0, "C": 2.0}
    (ab, *_) = pair_outcomes(t)
    assert (ab.wins, ab.ties, ab.losses, ab.tie_share(), ab.win_share(exclude_ties=True)) == (
        0,
        2,
        0,
        1.0,
        None,
    )


def test_single_model_and_single_item() -> None:
    one = ScoreTable.from_columns({"A": [1, 2]})
    for call in (head_to_head, win_rates, pair_outcomes):
        with pytest.raises(UserError, match="at least two models"):
            call(one)
    single = ScoreTable.from_rows([("q", "A", 0.4), ("q", "B", 0.7)])
    assert win_rates(single) == {"A": 0.0, "B": 1.0}


def test_pair_outcomes_and_side_by_side() -> None:
    out = pair_outcomes(table())
    assert [(o.model, o.opponent) for o in out] == [("A", "B"), ("A", "C"), ("B", "C")]
    ab = out[0]
    assert (ab.wins, ab.ties, ab.losses, ab.battles) == (2, 1, 1, 4)
    assert (ab.win_share(), ab.tie_share(), ab.loss_share()) == (0.5, 0.25, 0.25)
    assert (ab.win_share(exclude_ties=True), ab.loss_share(exclude_ties=True)) == (2 / 3, 1 / 3)
    # The judge failed on item 2 (no scores) and scored an extra item the physicians did not.
    judge = ScoreTable.from_rows([
        ("i1", "B", 4), ("i1", "A", 4), ("i1", "C", 1),
        ("i2", "A", None), ("i2", "B", None), ("i2", "C", None),
        ("i3", "A", 2), ("i3", "B", 5),
        ("i4", "A", 5), ("i4", "B", 3), ("i4", "C", 3),
        ("i9", "A", 1), ("i9", "B", 2),
    ])  # fmt: skip
    side = compare_pair_outcomes(table(), judge)
    assert [(c.model, c.opponent) for c in side] == [("A", "B"), ("A", "C"), ("B", "C")]
    assert side[0].human == ab
    assert side[0].judge == PairOutcome("A", "B", wins=1, ties=1, losses=1)
    assert side[2].judge == PairOutcome("B", "C", wins=1, ties=1, losses=0)
    with pytest.raises(UserError, match="different models"):
        compare_pair_outcomes(table(), table().restrict(models=["A", "B"]))
    with pytest.raises(UserError, match="share no item"):
        compare_pair_outcomes(table(), ScoreTable.from_rows([("x", m, 1) for m in "ABC"]))


def test_win_rate_errors() -> None:
    human = rank_table(table(), ties="min")  # the same preferences expressed as ranks
    assert win_rate_errors(human, table()) == {"A": 0.0, "B": 0.0, "C": 0.0}
    flat = ScoreTable.from_columns({m: [1, 1, 1, 1] for m in "ABC"}, items=list(table().items))
    errors = win_rate_errors(table(), flat)
    assert errors == {"A": pytest.approx(7 / 12), "B": pytest.approx(7 / 24), "C": pytest.approx(1 / 3)}
    assert win_rate_errors(table(), flat, exclude_ties=True) == {"A": None, "B": None, "C": None}


# --- Kendall tau -----------------------------------------------------------------------------------


def test_metric_human_kendall() -> None:
    human = ScoreTable.from_rows(
        [
            ("q1", "A", 1), ("q1", "B", 2), ("q1", "C", 3),  # metric agrees fully
            ("q2", "A", 1), ("q2", "B", 1), ("q2", "C", 3),  # human tie: tau-b
            ("q3", "A", 1), ("q3", "B", 2), ("q3", "C", 3),  # metric constant: undefined
            ("q4", "A", 1), ("q4", "B", 2),  # not scored by the metric
            ("q5", "A", 1), ("q5", "B", None),  # one model on the human side
            ("q6", "A", 3), ("q6", "B", 1), ("q6", "C", 2), ("q6", "D", 4),  # D has no metric score
        ],
        higher_is_better=False,
    )  # fmt: skip
    metric = ScoreTable.from_rows([
        ("q1", "A", 0.9), ("q1", "B", 0.5), ("q1", "C", 0.1),
        ("q2", "A", 0.2), ("q2", "B", 0.5), ("q2", "C", 0.1),
        ("q3", "A", 0.5), ("q3", "B", 0.5), ("q3", "C", 0.5),
        ("q5", "A", 0.5), ("q5", "B", 0.4),
        ("q6", "A", 0.3), ("q6", "B", 0.2), ("q6", "C", 0.1),
        ("q7", "A", 0.3), ("q7", "B", 0.2),  # not ranked by a human
    ])  # fmt: skip
    k = metric_human_kendall(metric, human, seed=3)
    tau_q2 = kendalltau([0.2, 0.5, 0.1], [-1, -1, -3]).statistic
    tau_q6 = kendalltau([0.3, 0.2, 0.1], [-3, -1, -2]).statistic
    assert k.taus == {"q1": pytest.approx(1.0), "q2": pytest.approx(tau_q2), "q6": pytest.approx(tau_q6)}
    # By hand: q2 has 2 concordant pairs, 0 discordant, one pair tied on the human side only.
    assert (tau_q2, tau_q6) == (pytest.approx(2 / math.sqrt(6)), pytest.approx(-1 / 3))
    assert k.mean == pytest.approx((1.0 + tau_q2 + tau_q6) / 3)
    assert k.skipped_constant == ("q3",)
    assert k.skipped_incomplete == ("q4", "q5", "q7")
    assert k.items == 3 and k.pairs == 3
    assert k.ci == bootstrap_ci(list(k.taus.values()), seed=3)
    assert k.ci is not None and k.ci[0] <= k.mean <= k.ci[1]
    assert k.as_json() == {
        "mean_tau_b": k.mean,
        "ci": list(k.ci),
        "items": 3,
        "pairs": 3,
        "skipped_constant": 1,
        "skipped_incomplete": 3,
    }


def test_kendall_nothing_defined() -> None:
    human = ScoreTable.from_columns({"A": [1], "B": [1]}, higher_is_better=False)
    metric = ScoreTable.from_columns({"A": [0.1], "B": [0.2]})
    k = metric_human_kendall(metric, human)
    assert (k.mean, k.ci, k.taus, k.skipped_constant) == (None, None, {}, ("0",))
    assert k.as_json() == {
        "mean_tau_b": None,
        "ci": None,
        "items": 0,
        "pairs": 0,
        "skipped_constant": 1,
        "skipped_incomplete": 0,
    }


def test_inter_rater_kendall() -> None:
    def ranks(rows: list[tuple[str, str, float | None]]) -> ScoreTable:
        return ScoreTable.from_rows(rows, higher_is_better=False)

    raters = {
        "dr1": ranks([
            ("i1", "A", 1), ("i1", "B", 2), ("i1", "C", 3),
            ("i2", "A", 1), ("i2", "B", 2), ("i2", "C", 3),
            ("i3", "A", 1), ("i3", "B", 1), ("i3", "C", 1),
        ]),
        "dr2": ranks([
            ("i1", "A", 1), ("i1", "B", 3), ("i1", "C", 2),
            ("i2", "A", 1), ("i2", "B", 2), ("i2", "C", 3),
            ("i3", "A", 2), ("i3", "B", 1), ("i3", "C", 3),
        ]),
        "dr3": ranks([("i1", "A", 2), ("i1", "B", 1), ("i1", "C", 3)]),
        "dr4": ranks([("i9", "A", 2), ("i9", "B", 1)]),  # reviewed alone: not counted
    }  # fmt: skip
    k = inter_rater_kendall(raters)
    # i1: dr1-dr2 1/3, dr1-dr3 1/3, dr2-dr3 -1/3 -> 1/9; i2: 1; i3: dr1 constant.
    assert k.taus == {"i1": pytest.approx(1 / 9), "i2": pytest.approx(1.0)}
    assert k.mean == pytest.approx(5 / 9)
    assert k.pairs == 4
    assert k.skipped_constant == ("i3",) and k.skipped_incomplete == ()
    with pytest.raises(UserError, match="at least two clinicians"):
        inter_rater_kendall({"dr1": raters["dr1"]})


# --- EHRNoteQA rank instability ---------------------------------------------------------------------

RUNS = ScoreTable.from_columns(
    {
        "A": [80, 75, 80, 80, 70],
        "B": [70, 78, 70, 70, 70],
        "C": [60, 60, 72, 60, 60],
        "D": [50, 50, 50, 65, 50],
    },
    items=["run1", "run2", "run3", "run4", "run5"],
)


def test_rank_instability_hand_computed() -> None:
    # Ranks (min ties): A 1,2,1,1,1  B 2,1,3,2,1  C 3,3,2,4,3  D 4,4,4,3,4.
    # B's ranks are bimodal (1 and 2 twice each): the smaller mode, 1, is its gold rank.
    r = rank_instability(RUNS)
    assert r.gold_ranks == {"A": 1.0, "B": 1.0, "C": 3.0, "D": 4.0}
    assert r.per_model == {"A": 1.0, "B": 4.0, "C": 2.0, "D": 1.0}
    assert r.total == 8.0
    assert r.ranks.row("run5") == [1.0, 1.0, 3.0, 4.0]
    # Average ties: run 5 gives A and B 1.5; B's mode becomes 2.
    avg = rank_instability(RUNS, ties="average")
    assert avg.gold_ranks == {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}
    assert avg.per_model == {"A": 1.5, "B": 2.5, "C": 2.0, "D": 1.0}
    assert avg.total == 7.0


def test_rank_instability_stable_and_errors() -> None:
    stable = ScoreTable.from_columns({"A": [3, 3], "B": [2, 1]})
    assert rank_instability(stable).total == 0.0
    assert rank_instability(ScoreTable.from_columns({"A": [3.0]})).total == 0.0
    with pytest.raises(UserError, match="run '1' has no score for model 'B'"):
        rank_instability(ScoreTable.from_columns({"A": [3, 3], "B": [2, None]}))


# --- AutoMedEval ordering accuracy -----------------------------------------------------------------

# (reference, judge, pairs right out of 3, item right)
ORDER_CASES: list[tuple[list[float] | None, list[float] | None, int, bool]] = [
    ([3, 3, 3], [2, 2, 2], 3, True),  # all equal -> judge all equal
    ([3, 3, 3], [2, 2, 3], 1, False),  # all equal, judge breaks the tie
    ([2, 2, 4], [1, 1, 5], 3, True),  # a = b < c reproduced
    ([4, 4, 2], [3, 3, 1], 3, True),  # a = b > c reproduced
    ([4, 2, 4], [5, 1, 5], 3, True),  # a = c > b reproduced
    ([2, 2, 4], [3, 3, 1], 1, False),  # the tie kept, third on the wrong side
    ([2, 2, 4], [1, 3, 3], 1, False),  # a different pair tied
    ([2, 2, 4], [1, 2, 4], 2, False),  # the reference tie broken
    ([1, 2, 3], [2, 3, 4], 3, True),  # strict order reproduced
    ([1, 2, 3], [2, 2, 4], 2, False),  # strict reference, judge tie: wrong
    ([1, 2, 3], [3, 2, 1], 0, False),  # reversed
    ([3, 1, 2], [3, 3, 3], 0, False),  # strict reference, judge all equal
    ([4.5, 3.25, 3.25], None, 0, False),  # judge output missing: all pairs wrong
]


@pytest.mark.parametrize(("ref", "judge", "pairs", "right"), ORDER_CASES)
def test_order_agreement_single_cases(
    ref: list[float], judge: list[float] | None, pairs: int, right: bool
) -> None:
    a = order_agreement([ref], [judge])
    assert (a.pairs_correct, a.pairs, a.items_correct, a.items) == (pairs, 3, int(right), 1)
    assert a.judge_missing == int(judge is None)


def test_order_agreement_table_totals() -> None:
    refs = [c[0] for c in ORDER_CASES] + [None]
    judges = [c[1] for c in ORDER_CASES] + [[1, 2, 3]]  # the last item has no reference: skipped
    a = order_agreement(refs, judges)
    n = len(ORDER_CASES)
    assert a.items == n and a.pairs == 3 * n and a.skipped_no_reference == 1 and a.judge_missing == 1
    assert a.accuracy_2tuple == pytest.approx(sum(c[2] for c in ORDER_CASES) / (3 * n))
    assert a.accuracy_triple == pytest.approx(sum(c[3] for c in ORDER_CASES) / n)
    assert accuracy_2tuple(refs, judges) == a.accuracy_2tuple
    assert accuracy_triple(refs, judges) == a.accuracy_triple


def _spec_triple(ref: list[int], jud: list[int]) -> bool:
    """The paper's rule, written out case by case as an independent check."""
    if len(set(ref)) == 1:
        return len(set(jud)) == 1
    if len(set(ref)) == 2:
        odd = next(k for k in range(3) if ref.count(ref[k]) == 1)
        a, b = (k for k in range(3) if k != odd)
        if jud[a] != jud[b]:
            return False
        return (ref[odd] > ref[a]) == (jud[odd] > jud[a]) and jud[odd] != jud[a]
    if len(set(jud)) < 3:
        return False
    return sorted(range(3), key=ref.__getitem__) == sorted(range(3), key=jud.__getitem__)


def test_triple_matches_the_spec_rule_on_random_items() -> None:
    rng = random.Random(11)
    refs = [[rng.randint(1, 5) for _ in range(3)] for _ in range(400)]
    judges = [[rng.randint(1, 5) for _ in range(3)] for _ in range(400)]
    want = sum(_spec_triple(r, j) for r, j in zip(refs, judges, strict=True)) / 400
    assert accuracy_triple(refs, judges) == pytest.approx(want)  # type: ignore[arg-type]


def test_order_agreement_other_k() -> None:
    assert order_agreement([[1, 2]], [[0, 5]]).accuracy_triple == 1.0
    four = order_agreement([[1, 2, 3, 3]], [[1, 2, 3, 4]])
    assert (four.pairs, four.pairs_correct, four.items_correct) == (6, 5, 0)


@pytest.mark.parametrize(
    ("refs", "judges", "message"),
    [
        ([[1, 2, 3]], [], "reference has 1 items but judge has 0"),
        ([None], [[1, 2, 3]], "no item has reference scores"),
        ([], [], "no item has reference scores"),
        ([[1, 2, 3]], [[1, 2]], "judge scored 2 responses but the reference 3"),
        ([[1]], [[1]], "ordering needs at least 2"),
        ([[1, None, 3]], [[1, 2, 3]], "missing score"),
        ([[1, 2, 3]], [[1, math.nan, 3]], "NaN"),
    ],
)
def test_order_agreement_errors(
    refs: list[list[float] | None], judges: list[list[float] | None], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        order_agreement(refs, judges)


@pytest.mark.parametrize("seed", range(3))
def test_per_item_tau_matches_scipy_on_random_tables(seed: int) -> None:
    rng = random.Random(seed)
    models = [f"m{j}" for j in range(rng.randint(2, 7))]
    items = [f"q{i}" for i in range(60)]
    metric = ScoreTable.from_rows([(i, m, rng.choice([0.1, 0.2, 0.3, None])) for i in items for m in models])
    human = ScoreTable.from_rows(
        [(i, m, rng.randint(1, 3)) for i in items for m in models], higher_is_better=False
    )
    k = metric_human_kendall(metric, human, seed=seed)
    assert len(k.taus) + len(k.skipped_constant) + len(k.skipped_incomplete) == len(items)
    for item, tau in k.taus.items():
        x, y = metric.row(item), human.row(item)
        keep = [j for j, v in enumerate(x) if v is not None]
        want = kendalltau([x[j] for j in keep], [-(y[j] or 0) for j in keep]).statistic
        assert tau == pytest.approx(want, abs=1e-12)
    for item in k.skipped_constant:
        x, y = metric.row(item), human.row(item)
        keep = [j for j, v in enumerate(x) if v is not None]
        assert len({x[j] for j in keep}) == 1 or len({y[j] for j in keep}) == 1


def test_rank_instability_gold_rule_when_modes_tie() -> None:
    # B's ranks 2,1,3,2,1 have two modes: 2 (met first, in run 1) and 1. EHRNoteQA's code keeps
    # the mode met first; "smallest" keeps 1; "median" the middle of the tied modes, 1.5.
    first = rank_instability(RUNS, gold_rule="first")
    assert first.gold_ranks == {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}
    assert first.per_model == {"A": 1.0, "B": 3.0, "C": 2.0, "D": 1.0}  # B: 0+1+1+0+1
    assert first.total == 7.0 and first.tied_modes == ("B",) and first.gold_rule == "first"
    median = rank_instability(RUNS, gold_rule="median")
    assert median.gold_ranks["B"] == 1.5 and median.per_model["B"] == 3.5  # .5+.5+1.5+.5+.5
    assert rank_instability(RUNS).tied_modes == ("B",)
    with pytest.raises(UserError, match="gold rank rule 'mode' is unknown"):
        rank_instability(RUNS, gold_rule="mode")  # type: ignore[arg-type]
