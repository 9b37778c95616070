"""The leaderboard calibrated by clinician ratings (issue 39): its numbers, pairs, ranks and page.

A judge biased on one model only (it says yes to a third of that model's wrong answers) makes the
judge-only board put that model first with tight intervals; the calibrated board, from every judge
score and 150 clinician ratings per model, puts it last, as the clinicians' truth does. The numbers
are checked against :mod:`clinieval.analysis.ppi` called directly, the page in Chromium against
leaderboard.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from clinieval.analysis import ppi
from clinieval.analysis.leaderboard import BenchmarkScores, build_leaderboard
from clinieval.analysis.uncertainty import holm
from clinieval.errors import UserError
from clinieval.suite.leaderboard import write_leaderboard

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytest_plugins = ["tests.browser"]

TRUTH = {"steady": 0.62, "sharp": 0.68, "flattered": 0.52}
BIAS = {"steady": 0.0, "sharp": 0.0, "flattered": 0.6}
"""The judge's extra yes rate on each model's wrong answers: only ``flattered`` is favoured."""
ITEMS, RATED = 2000, 150


def study(seed: int = 39) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, str]]:
    """Judge verdicts on every item, clinician verdicts on a random sample of patients' items."""
    rng = np.random.default_rng(seed)
    items = [f"i{k:04d}" for k in range(ITEMS)]
    clusters = {i: f"p{k // 2}" for k, i in enumerate(items)}
    patients = rng.permutation(ITEMS // 2)[: RATED // 2]
    rated = [items[2 * p + j] for p in sorted(patients) for j in (0, 1)]
    judge, clinicians = {}, {}
    for model, p in TRUTH.items():
        truth = (rng.random(ITEMS) < p).astype(float)
        verdict = np.where(rng.random(ITEMS) < 0.08, 1.0 - truth, truth)
        verdict = np.where((truth == 0.0) & (rng.random(ITEMS) < BIAS[model]), 1.0, verdict)
        judge[model] = dict(zip(items, verdict.tolist(), strict=True))
        clinicians[model] = {i: float(truth[items.index(i)]) for i in rated}
    return judge, clinicians, clusters


def _board(calibrated: bool, **extra: Any) -> Any:
    judge, clinicians, clusters = study()
    scores = BenchmarkScores(
        "ehrnoteqa",
        "correct (judge)",
        judge,
        clusters=clusters,
        scale=(0.0, 1.0),
        clinicians=clinicians if calibrated else None,
        clinician_kind="correctness",
        **extra,
    )
    return build_leaderboard([scores], resamples=1000, seed=0).benchmarks[0]


def test_a_judge_biased_on_one_model_misranks_it_and_calibration_corrects_it() -> None:
    judged, calibrated = _board(False), _board(True)
    assert judged.models[0] == "flattered"  # the judge's favourite leads the judge-only board
    assert judged.verdict.startswith("Every pair differs: flattered ahead of")
    assert calibrated.models == ("sharp", "steady", "flattered")  # the clinicians' order
    assert judged.rank("flattered").interval == (1.0, 1.0)  # wrong, and sure of it
    # calibrated: sharp first for sure; flattered last, though 150 ratings per model cannot
    # separate it from steady (Holm p about 0.05), so its interval says 2 to 3
    assert calibrated.verdict.startswith("sharp is ahead of every other model")
    assert calibrated.rank("sharp").interval == (1.0, 1.0)
    assert calibrated.rank("flattered").rank == 3.0 and calibrated.rank("flattered").interval == (2.0, 3.0)
    bias = calibrated.calibration.model("flattered").bias
    assert bias.low > 0.1  # the judge's bias on that model is found, with its interval
    assert (
        calibrated.calibration.model("steady").bias.low < 0 < calibrated.calibration.model("steady").bias.high
    )


def test_the_numbers_are_the_ppi_estimates() -> None:
    judge, clinicians, clusters = study()
    board = _board(True)
    for s in board.scores:
        want = ppi.ppi_mean(judge[s.model], clinicians[s.model], clusters, 0.05)
        assert (s.mean, *s.ci) == pytest.approx((want.value, want.low, want.high))
        assert s.estimator == "PPI++" and s.rated == RATED and s.n == ITEMS and s.clusters == ITEMS // 2
        cal = board.calibration.model(s.model)
        assert cal.judge.value == pytest.approx(np.mean(list(judge[s.model].values())))
        assert cal.clinicians.value == pytest.approx(np.mean(list(clinicians[s.model].values())))
    raw = []
    for p in board.pairs:
        diff, pvalue = ppi.ppi_difference(
            judge[p.a], judge[p.b], clinicians[p.a], clinicians[p.b], clusters, 0.05
        )
        got = (p.mean_difference, *p.ci, p.pvalue)
        assert got == pytest.approx((diff.value, diff.low, diff.high, pvalue))
        assert p.test.startswith("PPI++")
        raw.append(pvalue)
    assert [p.pvalue_holm for p in board.pairs] == pytest.approx(holm(raw))
    data = board.as_json()
    assert data["calibration"]["rated"] == 3 * RATED and data["ci_method"].startswith("PPI++")
    assert data["pair_test"].startswith("PPI++") and data["calibration"]["agreement"]["answers"] == 3 * RATED
    assert 0.8 < data["calibration"]["agreement"]["agreement"] < 1.0


def test_a_fixed_judge_weight_is_plain_ppi_throughout() -> None:
    """``lam`` fixed (``suite report --lam``): every number is PPI with that weight, named so on the
    board, its pairs and its JSON; the ranks use the same weight."""
    judge, clinicians, clusters = study()
    board = _board(True, lam=1.0)
    for s in board.scores:
        want = ppi.ppi_mean(judge[s.model], clinicians[s.model], clusters, 0.05, lam=1.0)
        assert (s.mean, *s.ci) == pytest.approx((want.value, want.low, want.high))
        assert s.estimator == "PPI" and board.calibration.model(s.model).calibrated.lam == 1.0
    for p in board.pairs:
        diff, pvalue = ppi.ppi_difference(
            judge[p.a], judge[p.b], clinicians[p.a], clinicians[p.b], clusters, 0.05, lam=1.0
        )
        assert (p.mean_difference, *p.ci, p.pvalue) == pytest.approx(
            (diff.value, diff.low, diff.high, pvalue)
        )
        assert p.test.startswith("PPI (the judge's weight 1)")
    data = board.as_json()
    assert data["calibration"]["estimator"] == "PPI" and data["calibration"]["lam"] == 1.0
    assert data["ci_method"].startswith("PPI: ") and "fixed at 1" in data["ci_method"]
    assert data["pair_test"].startswith("PPI (the judge's weight 1)")
    # the tuned board differs: its weights are fitted per model, below 1 for an imperfect judge
    tuned = _board(True)
    assert all(0.0 <= tuned.calibration.model(m).calibrated.lam < 1.0 for m in TRUTH)
    assert (
        tuned.as_json()["calibration"]["estimator"] == "PPI++"
        and tuned.as_json()["calibration"]["lam"] is None
    )


def test_ranked_and_scored_judgements_calibrate_too() -> None:
    """Clinicians who rank every model's answer give each a win share in [0, 1] (the fraction of
    the other answers it beat, ties half); scored judgements keep their scale."""
    judge, clinicians, clusters = study()
    rated = list(clinicians["steady"])
    wins = {
        m: {
            i: sum(
                1.0
                if clinicians[m][i] > clinicians[o][i]
                else 0.5
                if clinicians[m][i] == clinicians[o][i]
                else 0.0
                for o in TRUTH
                if o != m
            )
            / 2
            for i in rated
        }
        for m in TRUTH
    }
    board = build_leaderboard(
        [
            BenchmarkScores(
                "medalign", "correct", judge, clusters=clusters, clinicians=wins, clinician_kind="ranking"
            )
        ],
        resamples=500,
    ).benchmarks[0]
    assert board.calibration.kind == "ranking" and "pearson_r" in board.calibration.agreement
    assert all(0.0 <= s.mean <= 1.0 for s in board.scores)
    assert board.models[-1] == "flattered"


def test_too_few_ratings_warn_and_none_are_refused() -> None:
    judge, clinicians, clusters = study()
    few = {m: dict(list(v.items())[:12]) for m, v in clinicians.items()}
    board = build_leaderboard(
        [BenchmarkScores("b", "c", judge, clusters=clusters, clinicians=few, clinician_kind="correctness")],
        resamples=200,
    ).benchmarks[0]
    assert any("6 rated patients (fewer than 10 patients)" in w for w in board.warnings)
    none = {m: v for m, v in clinicians.items() if m != "sharp"}
    with pytest.raises(UserError):
        build_leaderboard(
            [
                BenchmarkScores(
                    "b", "c", judge, clusters=clusters, clinicians=none, clinician_kind="correctness"
                )
            ]
        )


def test_the_calibrated_page_in_chromium(page: Page, tmp_path: Path) -> None:
    judge, clinicians, clusters = study()
    board = build_leaderboard(
        [
            BenchmarkScores(
                "ehrnoteqa",
                "correct",
                judge,
                clusters=clusters,
                scale=(0.0, 1.0),
                clinicians=clinicians,
                clinician_kind="correctness",
            )
        ],
        resamples=500,
    )
    write_leaderboard(board, {}, tmp_path, title="calibrated")
    data = json.loads((tmp_path / "leaderboard.json").read_text(encoding="utf-8"))
    page.goto((tmp_path / "leaderboard.html").as_uri())
    cal = data["benchmarks"][0]["calibration"]
    rows = page.eval_on_selector_all(
        "section:has(> h3:text-is('Calibrated by clinicians')) table tbody tr",
        "rows => rows.map(r => Array.from(r.cells, c => c.textContent))",
    )
    assert [r[0] for r in rows] == [m["model"] for m in cal["models"]]
    for row, m in zip(rows, cal["models"], strict=True):
        for cell, key in zip(
            row[1:5], ("judge_only", "clinicians_only", "calibrated", "judge_bias"), strict=True
        ):
            value = float(cell.split(" ")[0].replace("−", "-").replace("+", ""))
            assert value == pytest.approx(m[key]["value"], abs=5e-4)
    headers = page.eval_on_selector_all(
        "section[id^=bench-] table thead tr", "rs => rs.map(r => r.textContent)"
    )
    assert any("Calibrated (PPI++)" in h for h in headers)
    text = page.inner_text("body")
    assert f"{cal['rated']} clinician ratings (correctness)" in text
    forests = page.eval_on_selector_all("svg.forest", "els => els.map(e => e.textContent)")
    assert len(forests) == 2
    assert "flattered · judge only" in forests[1] and "flattered · calibrated" in forests[1]


def test_a_small_calibrated_board_claims_no_floor_for_its_normal_test() -> None:
    """The few-patients warning names the smallest p-value an exact test could reach; PPI++'s
    normal test has none, so a calibrated board must not say "could reach here is 0"."""
    judge, _, clusters = study()
    keep = [f"i{k:04d}" for k in range(12)]  # 6 patients, 4 of them rated below
    small_judge = {m: {i: v[i] for i in keep} for m, v in judge.items()}
    rated = {m: {i: float(k % 3 != 0) for k, i in enumerate(keep[:8])} for m in judge}
    board = build_leaderboard(
        [
            BenchmarkScores(
                "b", "c", small_judge, clusters=clusters, clinicians=rated, clinician_kind="correctness"
            )
        ],
        resamples=200,
    ).benchmarks[0]
    few = [w for w in board.warnings if w.startswith("Only 6 patients")]
    assert len(few) == 1 and "smallest p-value" not in few[0]


def test_a_benchmark_whose_every_item_was_rated_is_the_clinicians_own() -> None:
    """Nothing unrated: PPI++ is the clinicians' mean, and the rank bootstrap redraws the rated
    items alone (an empty unrated table once failed to reshape)."""
    judge, _, clusters = study()
    keep = [f"i{k:04d}" for k in range(40)]
    small = {m: {i: v[i] for i in keep} for m, v in judge.items()}
    everyone = {m: {i: float(k % 3 != 0) for k, i in enumerate(keep)} for m in judge}
    board = build_leaderboard(
        [
            BenchmarkScores(
                "b", "c", small, clusters=clusters, clinicians=everyone, clinician_kind="correctness"
            )
        ],
        resamples=200,
    ).benchmarks[0]
    for s in board.scores:
        assert s.mean == pytest.approx(np.mean(list(everyone[s.model].values())))
