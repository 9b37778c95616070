"""AutoMedEval's estimator: per-run metrics averaged over runs (the paper's), the mean-of-scores
estimator as a named option, win/tie tables on the same items, and correlations whose CIs and
p-values respect clustering by item (issue 25, items 1, 4 and 5).

Every expected number is worked out by hand (or by scipy on vectors written out here), not read
back from the code under test.
"""

from __future__ import annotations

import json
from itertools import permutations
from pathlib import Path

import pytest

from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, JudgeRun, analyze
from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Rating, Response
from clinieval.benchmarks.automedeval.judging import Entry, agreement_of, run_scores

HUMAN = {"A": [5, 3, 1], "B": [2, 2, 4], "C": [1, 3, 5]}
# three runs of one judge; A's reply failed in run 1
RUNS: list[dict[str, list[int] | None]] = [
    {"A": [4, 2, 1], "B": [3, 3, 5], "C": [1, 2, 5]},
    {"A": None, "B": [3, 3, 5], "C": [1, 3, 5]},
    {"A": [4, 2, 1], "B": [5, 3, 3], "C": [1, 2, 4]},
]


def _item(item_id: str, human: list[int] | None) -> JudgeItem:
    responses = []
    for j, model in enumerate(("a", "b", "c")):
        ratings = {} if human is None else {"dr1": Rating(human[j], human[j], human[j])}
        responses.append(Response(model, f"answer {model} " + "x" * (10 * j), ratings))
    return JudgeItem(item_id, "Q?", "R.", tuple(responses))


def _entries(runs: list[dict[str, list[int] | None]]) -> list[Entry]:
    return [
        Entry(item, r, (0, 1, 2), [False] * 3, scores, error=None if scores else "unparsed: no scores")
        for r, run in enumerate(runs)
        for item, scores in run.items()
    ]


ITEMS = [_item(k, v) for k, v in HUMAN.items()]


def test_per_run_estimator_counts_a_failed_run_wrong_in_that_run_and_averages_the_runs() -> None:
    from scipy import stats

    per_run = agreement_of(ITEMS, _entries(RUNS), "per-run")
    # run 0: A 3/3, B 3/3 (its tie kept), C 3/3 -> 9/9 pairs, 3/3 items
    # run 1: A failed (3 pairs wrong, item wrong), B 3/3, C 3/3 -> 6/9, 2/3
    # run 2: A 3/3, B 0/3 (a strict order where the physicians tie b1 = b2 < b3), C 3/3 -> 6/9, 2/3
    assert per_run["estimator"] == "per-run" and per_run["runs"] == 3
    assert per_run["accuracy_2tuple"] == pytest.approx((9 / 9 + 6 / 9 + 6 / 9) / 3)  # 0.778
    assert per_run["accuracy_triple"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)  # 0.778
    spread = per_run["spread"]["accuracy_triple"]
    assert spread["values"] == pytest.approx([1, 2 / 3, 2 / 3])
    assert spread["sd"] == pytest.approx(3**0.5 / 9)  # sample SD of (1, 2/3, 2/3)
    assert (spread["min"], spread["max"]) == pytest.approx((2 / 3, 1))
    assert per_run["judge_missing"] == 1  # one failed reply over the three runs
    # the correlations: each run's own parsed responses, then the mean over runs
    human = {k: v for k, v in HUMAN.items()}
    rhos = []
    for run in RUNS:
        judge = [s for k in "ABC" if run[k] for s in run[k]]  # type: ignore[union-attr]
        ref = [s for k in "ABC" if run[k] for s in human[k]]
        rhos.append(stats.spearmanr(judge, ref).statistic)
    assert per_run["spearman"]["r"] == pytest.approx(sum(rhos) / 3)
    assert per_run["spread"]["spearman"]["values"] == pytest.approx(rhos)

    means = agreement_of(ITEMS, _entries(RUNS), "mean-scores")
    # A: mean of its two parsed runs [4, 2, 1] -> 3/3; B: [11/3, 3, 13/3] breaks the physicians'
    # tie -> 2/3, wrong; C: [1, 7/3, 14/3] -> 3/3
    assert means["estimator"] == "mean-scores"
    assert means["accuracy_2tuple"] == pytest.approx(8 / 9)  # more flattering than 0.778
    assert means["accuracy_triple"] == pytest.approx(2 / 3)  # less than 0.778: the means never tie
    assert means["judge_missing"] == 0


def test_run_scores_are_each_runs_own_verdicts_with_missing_runs_failed() -> None:
    entries = [e for e in _entries(RUNS) if not (e.item == "C" and e.repeat == 2)]  # C never judged in run 2
    runs = run_scores(ITEMS, entries)
    assert [r["A"] for r in runs] == [[4, 2, 1], None, [4, 2, 1]]
    assert runs[2]["C"] is None


def _run(name: str, runs: list[dict[str, list[int] | None]]) -> JudgeRun:
    return JudgeRun(name, _entries(runs), {"order": "fixed"})


def test_analysis_states_the_estimator_and_its_spread_and_tests_on_the_same_runs() -> None:
    settings = AnalysisSettings(resamples=200, rationale=False)
    flat: list[dict[str, list[int] | None]] = [{k: [3, 3, 3] for k in "ABC"} for _ in range(3)]
    result = analyze(ITEMS, [_run("j", RUNS), _run("flat", flat)], settings)
    j = result["judges"][0]["agreement"]
    assert result["estimator"] == "per-run" and j["estimator"] == "per-run"
    assert j["accuracy_2tuple"] == pytest.approx(7 / 9)
    assert j["items"] == 3 and j["runs"] == 3
    low, high = j["accuracy_2tuple_ci"]
    assert low <= 7 / 9 <= high
    # McNemar on the (item, run) triple outcomes, clustered by item: j is right on 7 of 9 units,
    # flat (all 3) on none (no item is all-equal)
    test = result["judges"][1]["vs_best"]
    assert test["mcnemar_triple"]["method"] == "clustered" and test["mcnemar_triple"]["c"] == 7
    other = analyze(ITEMS, [_run("j", RUNS)], AnalysisSettings(resamples=200, rationale=False,
                                                                estimator="mean-scores"))  # fmt: skip
    assert other["estimator"] == "mean-scores"
    assert other["judges"][0]["agreement"]["accuracy_2tuple"] == pytest.approx(8 / 9)


def test_win_tie_compares_judges_and_physicians_on_the_same_items() -> None:
    # D: physicians rated only two of its answers; E: the judge failed on it in every run
    items = [*ITEMS, _item("D", [4, 4, 4]), _item("E", [5, 4, 3])]
    items[3] = JudgeItem("D", "Q?", "R.", (items[3].responses[0], items[3].responses[1],
                                            Response("c", "answer c", {})))  # fmt: skip
    runs = [{**r, "D": [5, 1, 1], "E": None} for r in RUNS]
    result = analyze(items, [_run("j", runs)], AnalysisSettings(resamples=200, rationale=False))
    w = result["judges"][0]["win_tie"]
    # per-run units: the fully rated items A, B, C, E, less the runs whose verdict failed:
    # A in run 1, E in all three -> 3 + 3 + 3 - 1 = 8 (item, run) units over 3 items
    assert (w["items"], w["units"]) == (3, 8)
    a_vs_b_physicians = w["physicians"][0]
    # a vs b: physicians A 5>3 win, B 2=2 tie, C 1<3 loss, E excluded; A counted in its 2 runs
    assert (a_vs_b_physicians["wins"], a_vs_b_physicians["ties"], a_vs_b_physicians["losses"]) == (2, 3, 3)
    a_vs_b_judge = w["judge"][0]
    # judge a vs b: A 4>2 (runs 0, 2) wins; B 3=3, 3=3, 5>3 -> 2 ties, 1 win; C 1<2, 1<3, 1<2 losses
    assert (a_vs_b_judge["wins"], a_vs_b_judge["ties"], a_vs_b_judge["losses"]) == (3, 2, 3)
    assert result["physician_win_tie_items"] == 4  # the physicians' own table: every fully rated item


def test_correlations_are_clustered_by_item_with_the_pooled_figure_secondary() -> None:
    """With 4 items the item-permutation diagnostic is exact (4! = 24 arrangements): its p-value
    is the share of arrangements of the items' judge scores whose Spearman reaches the observed
    one, computed here with scipy directly."""
    from scipy import stats

    human = {"A": [5, 3, 1], "B": [2, 2, 4], "C": [1, 3, 5], "D": [4, 2, 3]}
    judge: dict[str, list[int] | None] = {"A": [5, 2, 1], "B": [3, 2, 4], "C": [2, 3, 4], "D": [4, 1, 2]}
    items = [_item(k, v) for k, v in human.items()]
    result = analyze(items, [_run("j", [judge])], AnalysisSettings(resamples=2000, rationale=False))
    rho = result["judges"][0]["agreement"]["spearman"]
    keys = list(human)
    ref = [s for k in keys for s in human[k]]

    def r_of(order: tuple[str, ...]) -> float:
        return float(stats.spearmanr([s for k in order for s in judge[k] or []], ref).statistic)

    observed = r_of(tuple(keys))
    assert rho["r"] == pytest.approx(observed)
    reached = sum(r_of(p) >= observed - 1e-12 for p in permutations(keys))
    assert rho["item_permutation"]["pvalue"] == pytest.approx(reached / 24)
    assert rho["item_permutation"]["method"].startswith("exact item permutation (24 arrangements)")
    assert rho["items"] == 4 and rho["n"] == 12
    # 4 items are too few for a cluster bootstrap: no CI or p rather than a misleading one
    assert rho["ci"] is None and rho["pvalue"] is None
    assert any(
        "no clustered CI or p with 4 items" in u for u in result["judges"][0]["agreement"]["undefined"]
    )

    pooled = rho["pooled"]
    scores = [s for k in keys for s in judge[k] or []]
    assert pooled["pvalue"] == pytest.approx(float(stats.spearmanr(scores, ref).pvalue))
    assert pooled["n"] == 12 and "independent" in pooled["label"]


def test_the_cluster_bootstrap_resamples_items_and_is_wider_than_the_pooled_ci() -> None:
    """12 items, each the same three answers scored alike by judge and physicians but for one
    noisy answer: the responses of an item move together, so resampling items (not responses)
    gives the honest interval."""
    import random

    rng = random.Random(5)
    human, judge = {}, {}
    for i in range(12):
        level = rng.randint(1, 3)
        human[f"i{i}"] = [level + 2, level + 1, level]
        judge[f"i{i}"] = [level + 2, level + rng.choice([0, 2]), level]
    items = [_item(k, v) for k, v in human.items()]
    runs: list[dict[str, list[int] | None]] = [{k: v for k, v in judge.items()}]
    result = analyze(items, [_run("j", runs)], AnalysisSettings(resamples=2000, rationale=False))
    rho = result["judges"][0]["agreement"]["pearson"]
    low, high = rho["ci"]
    assert low <= rho["r"] <= high and rho["ci_method"].startswith("cluster bootstrap over items")
    assert 1 / 2001 <= rho["pvalue"] < 0.05
    assert rho["items"] == 12 and rho["n"] == 36


def test_a_judge_that_scores_every_item_alike_follows_no_item() -> None:
    """The same scores for every item (the first shown the highest, under a fixed order that
    shows the best model first) correlate with the physicians through the models alone: every
    arrangement of the items reaches the observed figure, p = 1."""
    human = {"A": [5, 3, 1], "B": [4, 2, 3], "C": [5, 4, 2], "D": [3, 3, 1]}
    same: dict[str, list[int] | None] = {k: [5, 3, 1] for k in human}
    items = [_item(k, v) for k, v in human.items()]
    result = analyze(items, [_run("j", [same])], AnalysisSettings(resamples=500, rationale=False))
    rho = result["judges"][0]["agreement"]["spearman"]
    assert rho["r"] > 0.5 and rho["item_permutation"]["pvalue"] == 1.0


def test_the_report_states_the_estimator_n_and_the_clustered_cis(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval import report

    flat: list[dict[str, list[int] | None]] = [{k: [3, 3, 3] for k in "ABC"} for _ in range(3)]
    result = analyze(
        ITEMS, [_run("j", RUNS), _run("flat", flat)], AnalysisSettings(resamples=200, rationale=False)
    )
    report.write(result, tmp_path)
    md = (tmp_path / "automedeval.md").read_text()
    assert "Estimator: per-run" in md and "SD" in md and "min–max" in md
    assert "cluster bootstrap over items" in md and "pooled" in md
    assert "n = 3 items" in md
    back = json.loads((tmp_path / "automedeval.json").read_text())
    assert back["estimator"] == "per-run"
    assert "not measured (runs identical)" in md  # the flat judge's three runs are the same
    assert [b["runs_identical"] for b in back["judges"]] == [False, True]


def test_the_cli_takes_the_estimator_and_the_order(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.synth import synthetic_set
    from tests.conftest import run_cli

    set_path = tmp_path / "set.jsonl"
    write_set(synthetic_set(4, seed=1), set_path)
    done = run_cli("automedeval", "judge", str(set_path), "--judge", "baseline:overlap", "--out",
                   str(tmp_path / "out"), "--repeats", "3", "--order", "balanced", "--estimator",
                   "mean-scores", "--no-progress", "--no-rationale")  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["order"] == "balanced" and summary["agreement"]["estimator"] == "mean-scores"
    verdicts = [json.loads(x) for x in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    for item in {v["item"] for v in verdicts}:
        shown = [v["shown"] for v in verdicts if v["item"] == item]
        assert sorted(s[0] for s in shown) == [0, 1, 2]  # each answer shown first once in 3 repeats
    result = json.loads((tmp_path / "out" / "automedeval.json").read_text())
    assert result["estimator"] == "mean-scores"
    again = run_cli("automedeval", "analyze", str(set_path), str(tmp_path / "out"), "--out",
                    str(tmp_path / "r"), "--resamples", "200", "--no-rationale")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "r" / "automedeval.json").read_text())["estimator"] == "per-run"
    bad = run_cli("automedeval", "judge", str(set_path), "--judge", "baseline:overlap", "--out",
                  str(tmp_path / "x"), "--order", "sideways")  # fmt: skip
    assert bad.returncode == 2
