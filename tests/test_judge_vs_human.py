"""The one implementation of judge-vs-human agreement (clinieval.analysis.judge_vs_human).

``clinieval analyze --human-score`` and AutoMedEval's own analysis both read it; these tests pin
its pairing rules by hand and check that the two callers report the same figures on the same
scores.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from scipy import stats

from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.judge_vs_human import ScoredResponses, complete
from clinieval.analysis.table import read_table
from clinieval.benchmarks.automedeval.agreement import judge_agreement
from clinieval.benchmarks.automedeval.synth import synthetic_set
from clinieval.errors import UserError


def test_complete_needs_every_score() -> None:
    assert complete([3, 4.0]) == [3.0, 4.0]
    assert complete([3, None]) is None
    assert complete(None) is None


def test_pairs_keep_every_response_both_scored() -> None:
    scored = ScoredResponses(
        reference=[[1, 2, 3], [4, None, 5], None, [2, 2, 2]],
        judge=[[3, 2, 1], [1, 2, None], [5, 5, 5], None],
    )
    # item 2: only the first response is scored on both sides; item 3: no reference; item 4: no judge
    assert scored.pairs() == ([1.0, 2.0, 3.0, 4.0], [3.0, 2.0, 1.0, 1.0])


def test_order_skips_an_item_without_reference_and_fails_one_without_judge() -> None:
    scored = ScoredResponses(
        reference=[[1, 2, 3], [2, 2, 1], [1, None, 3], [3, 2, 1]],
        judge=[[1, 2, 3], [4, 4, 5], [1, 2, 3], [3, None, 1]],
    )
    oa = scored.order()
    # item 1 all 3 pairs right; item 2: (a=b) right, (a>c),(b>c) both wrong; item 3 skipped;
    # item 4 has a missing judge score: the item counts as a missing judge output (3 pairs wrong)
    assert (oa.pairs_correct, oa.pairs, oa.items_correct, oa.items) == (4, 9, 1, 3)
    assert (oa.judge_missing, oa.skipped_no_reference) == (1, 1)
    assert oa.accuracy_2tuple == pytest.approx(4 / 9)
    assert oa.accuracy_triple == pytest.approx(1 / 3)


def test_correlations_are_the_pooled_scipy_figures() -> None:
    ref = [[1, 2, 3], [2, 5, 4], [1, 1, 3]]
    jud = [[2, 2, 4], [1, 5, 5], [2, 1, 3]]
    scored = ScoredResponses(ref, jud)
    flat_r = [v for r in ref for v in r]
    flat_j = [v for j in jud for v in j]
    rho = scored.correlation("spearman")
    assert rho.statistic == pytest.approx(stats.spearmanr(flat_j, flat_r).statistic)
    assert rho.pvalue == pytest.approx(stats.spearmanr(flat_j, flat_r).pvalue)
    assert scored.correlation("pearson").statistic == pytest.approx(stats.pearsonr(flat_j, flat_r).statistic)
    with pytest.raises(UserError):
        ScoredResponses([[1, 2]], [[2, 1]]).correlation("spearman")  # 2 responses: too few


def test_analyze_and_automedeval_report_the_same_agreement(tmp_path: Path) -> None:
    items = synthetic_set(12, seed=4)
    judged = {
        item.id: (None if n % 5 == 0 else [float(1 + (n + k) % 5) for k in range(len(item.responses))])
        for n, item in enumerate(items)
    }
    path = tmp_path / "long.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item", "model", "judge", "doctor"])
        for item in items:
            scores = judged[item.id]
            for k, (model, human) in enumerate(zip(item.models, item.human_scores(), strict=True)):
                writer.writerow([item.id, model, "" if scores is None else scores[k], human])
    long = analyze(read_table(path), AnalyzeOptions(scores=("judge",), human_score="doctor", resamples=50))
    ours = long["judge_vs_human"]["judge"]
    theirs = judge_agreement(items, judged)
    assert ours["accuracy_2tuple"] == pytest.approx(theirs["accuracy_2tuple"])
    assert ours["accuracy_triple"] == pytest.approx(theirs["accuracy_triple"])
    assert (ours["order_items"], ours["judge_missing"]) == (theirs["items"], theirs["judge_missing"])
    assert ours["responses"] == theirs["responses"]
    for name in ("spearman", "pearson"):
        assert ours[name]["r"] == pytest.approx(theirs[name]["r"])
        assert ours[name]["pvalue"] == pytest.approx(theirs[name]["pvalue"])
