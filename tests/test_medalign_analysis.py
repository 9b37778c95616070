"""MedAlign analysis and report on a hand-built table whose every number is worked out below.

Four instructions x three arms. Arm C is named ``<b>&x`` so the HTML test can check escaping.
Instruction i4 has a content-filter error for C (correct empty, bertscore missing): the "all"
view counts it as incorrect, the "without_errors" view drops i4 for every arm.

    item  ranks (A,B,C)  correct (A,B,C)  rougeL (A,B,C)   bertscore (A,B,C)  ehr_tokens
    i1    1, 2, 3        1, 1, 0          .5, .4, .3       .9, .9, .9         100
    i2    1, 2, 2 (tie)  1, 0, 0          .6, .2, .1       .8, .7, .6         200
    i3    2, 1, 3        1, 1, 1          .3, .3, .9       .85, .8, .7        300
    i4    1, 2, 3        0, 0, (error)    .4, .2, .0       .5, .6, (none)     400
"""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from clinieval.analysis.table import LongTable, Row
from clinieval.analysis.uncertainty import bootstrap_ci, cluster_bootstrap_ci
from clinieval.benchmarks.medalign.analysis.columns import MedAlignColumns
from clinieval.benchmarks.medalign.analysis.compute import medalign_analysis
from clinieval.benchmarks.medalign.report import render_html, render_markdown, write_report
from clinieval.errors import UserError

A, B, C = "A", "B", "<b>&x"
MODELS = (A, B, C)
RESAMPLES = 200
COLUMNS = MedAlignColumns(metrics=("rougeL", "bertscore"))

# item: ranks, correct, rougeL, bertscore, responses, error of C
DATA: dict[str, tuple[Any, ...]] = {
    "i1": ((1, 2, 3), (1, 1, 0), (0.5, 0.4, 0.3), (0.9, 0.9, 0.9), ("w w w w", "w w", "w"), None),
    "i2": ((1, 2, 2), (1, 0, 0), (0.6, 0.2, 0.1), (0.8, 0.7, 0.6), ("w w w w w w", "w w w.", ""), None),
    "i3": (
        (2, 1, 3),
        (1, 1, 1),
        (0.3, 0.3, 0.9),
        (0.85, 0.8, 0.7),
        ("w w", "w w w w w w w w", "w w w"),
        None,
    ),
    "i4": ((1, 2, 3), (0, 0, None), (0.4, 0.2, 0.0), (0.5, 0.6, None), ("w", "w w w", ""), "content_filter"),
}
# item: category, subcategory, ehr_tokens, gender, gold response
ITEMS = {
    "i1": ("Retrieve & Summarize", "Summarize", 100, "F", "g g g g g"),
    "i2": ("Retrieve & Summarize", "Retrieve", 200, "M", "g g g"),
    "i3": ("Care Planning", "Plan", 300, "F", "g"),
    "i4": ("Calculation & Scoring", "Score", 400, "M", "g g g g g g g"),
}


def _cells(item: str, k: int) -> dict[str, object]:
    ranks, correct, rouge, bert, responses, error = DATA[item]
    category, subcategory, tokens, gender, gold = ITEMS[item]
    return {
        "instruction_id": item,
        "model": MODELS[k],
        "response": responses[k],
        "error_kind": error if error and MODELS[k] == C else "",
        "correct": "" if correct[k] is None else correct[k],
        "rank": ranks[k],
        "rougeL": rouge[k],
        "bertscore": "" if bert[k] is None else bert[k],
        "category": category,
        "subcategory": subcategory,
        "ehr_tokens": tokens,
        "gender": gender,
        "gold_response": gold,
    }


def hand_table(models: tuple[str, ...] = MODELS) -> LongTable:
    cells = [_cells(item, k) for item in DATA for k in range(3) if MODELS[k] in models]
    rows = [Row(f"hand.csv:{n + 2}", c) for n, c in enumerate(cells)]
    return LongTable(Path("hand.csv"), tuple(rows[0].cells), tuple(rows))


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return medalign_analysis(hand_table(), COLUMNS, resamples=RESAMPLES)


def view(result: dict[str, Any], name: str) -> dict[str, Any]:
    v: dict[str, Any] = result["views"][name]
    return v


def test_win_rates_and_mean_ranks(result: dict[str, Any]) -> None:
    # All items. A vs B: A better on i1, i2, i4, worse on i3 -> 3/4. A vs C: better on all 4 -> 1.
    # B vs C: better on i1, i3, i4, tied on i2 -> 3/4 of all battles, 3/3 of non-tied ones.
    human = view(result, "all")["analyze"]["human"]
    assert human["head_to_head"]["rates"] == [[None, 0.75, 1.0], [0.25, None, 0.75], [0.0, 0.0, None]]
    assert human["head_to_head_non_tied"]["rates"][1][2] == 1.0
    assert human["head_to_head_non_tied"]["battles"][1][2] == 3
    # WR = mean of a row's cells: A (3/4 + 1)/2, B (1/4 + 3/4)/2, C 0; non-tied B (1/4 + 1)/2
    assert human["win_rate"] == pytest.approx({A: 0.875, B: 0.5, C: 0.0})
    assert human["win_rate_non_tied"] == pytest.approx({A: 0.875, B: 0.625, C: 0.0})
    # Mean rank as the clinician gave it: A (1+1+2+1)/4, B (2+2+1+2)/4, C (3+2+3+3)/4.
    per_model = view(result, "all")["per_model"]
    assert {m: per_model[m]["mean_rank"] for m in MODELS} == pytest.approx({A: 1.25, B: 1.75, C: 2.75})
    # analyze re-ranks each item with average ties: i2's tie 2, 2 becomes 2.5, 2.5.
    assert human["mean_rank_ties_averaged"] == pytest.approx({A: 1.25, B: 1.875, C: 2.875})
    assert human["mean_rank"] == pytest.approx({A: 1.25, B: 1.75, C: 2.75})  # as given, like ours
    # Without i4: A vs B 2/3, A vs C 1, B vs C 2/3 (2/2 non-tied) -> WR A 5/6, B 1/2 (2/3 non-tied).
    clean = view(result, "without_errors")["analyze"]["human"]
    assert clean["win_rate"] == pytest.approx({A: 5 / 6, B: 0.5, C: 0.0})
    assert clean["win_rate_non_tied"] == pytest.approx({A: 5 / 6, B: 2 / 3, C: 0.0})


def _scipy_taus(metric: int) -> dict[str, float]:
    """Per item, scipy's tau-b between a metric and the negated rank, where it is defined."""
    out = {}
    for item, row in DATA.items():
        pairs = [(row[metric][k], -row[0][k]) for k in range(3) if row[metric][k] is not None]
        tau = stats.kendalltau([p[0] for p in pairs], [p[1] for p in pairs]).statistic
        if not math.isnan(tau):
            out[item] = float(tau)
    return out


def test_kendall_per_instruction_and_mean(result: dict[str, Any]) -> None:
    # rougeL: i1 and i4 same order as the ranks -> 1. i2: A>B>C against A>B=C: pairs AB, AC
    # concordant, BC tied in the ranks -> 2 / sqrt(3 * 2). i3: metric ties A=B, C last; ranks
    # B>A>C: AC and BC discordant -> -2 / sqrt(2 * 3). Mean (1 + .8165 - .8165 + 1) / 4 = 0.5.
    r6 = 2 / math.sqrt(6)
    taus = view(result, "all")["kendall_per_instruction"]
    assert taus["rougeL"]["taus"] == pytest.approx({"i1": 1.0, "i2": r6, "i3": -r6, "i4": 1.0})
    agreement = view(result, "all")["analyze"]["human"]["metric_agreement"]
    assert agreement["rougeL"]["mean_tau_b"] == pytest.approx(0.5)
    # bertscore: i1 constant -> skipped. i2 2/sqrt6 as above; i3 A>B>C vs B>A>C: 1 discordant of
    # 3 -> 1/3; i4 only A and B (C has no score): B>A vs A>B -> -1. Mean (.8165 + .3333 - 1) / 3.
    assert taus["bertscore"]["taus"] == pytest.approx({"i2": r6, "i3": 1 / 3, "i4": -1.0})
    assert taus["bertscore"]["skipped_constant"] == ["i1"]
    assert agreement["bertscore"]["mean_tau_b"] == pytest.approx((r6 + 1 / 3 - 1) / 3)
    assert agreement["bertscore"]["skipped_constant"] == 1
    # scipy agrees item by item
    assert taus["rougeL"]["taus"] == pytest.approx(_scipy_taus(2))
    assert taus["bertscore"]["taus"] == pytest.approx(_scipy_taus(3))
    # without i4: rougeL (1 + r6 - r6) / 3
    clean = view(result, "without_errors")["analyze"]["human"]["metric_agreement"]
    assert clean["rougeL"]["mean_tau_b"] == pytest.approx(1 / 3)


def test_point_biserial_correct_vs_rank(result: dict[str, Any]) -> None:
    # 12 responses (C's error on i4 counts as incorrect). Correct ranks 1,2,1,2,1,3 (mean 10/6);
    # incorrect 3,2,2,1,2,3 (mean 13/6); population SD of all ranks sqrt(51/12 - (23/12)^2);
    # p = q = 1/2 -> r = (10/6 - 13/6) / SD * 1/2 = -0.3293.
    sd = math.sqrt(51 / 12 - (23 / 12) ** 2)
    pb = view(result, "all")["analyze"]["human"]["point_biserial_correct_vs_rank"]
    assert pb["r"] == pytest.approx((10 / 6 - 13 / 6) / sd * 0.5)
    assert pb["n"] == 12
    correct = [c if c is not None else 0 for row in DATA.values() for c in row[1]]
    ranks = [r for row in DATA.values() for r in row[0]]
    assert pb["r"] == pytest.approx(stats.pointbiserialr(correct, ranks).statistic)
    assert pb["pvalue"] == pytest.approx(stats.pointbiserialr(correct, ranks).pvalue)


def test_correct_percent_and_the_error_rule(result: dict[str, Any]) -> None:
    # all: A 3/4, B 2/4, C 1/4 (its i4 error counts as incorrect); without i4: 3/3, 2/3, 1/3
    everything = view(result, "all")
    assert everything["imputed_incorrect"] == 1
    assert "counts as incorrect" in everything["description"]
    percent = {m: p["correct_percent"] for m, p in everything["per_model"].items()}
    assert percent == pytest.approx({A: 75.0, B: 50.0, C: 25.0})
    clean = view(result, "without_errors")["per_model"]
    assert {m: p["correct_percent"] for m, p in clean.items()} == pytest.approx(
        {A: 100, B: 200 / 3, C: 100 / 3}
    )
    # the CI is analyze's bootstrap of the same 0/1 values, as a percentage
    ci = everything["analyze"]["scores"]["correct"]["per_model"][A]["ci"]
    assert everything["per_model"][A]["ci"] == pytest.approx([100 * ci[0], 100 * ci[1]])
    assert everything["per_model"][A]["ci"][0] <= 75.0 <= everything["per_model"][A]["ci"][1]


def test_easy_and_hard_items(result: dict[str, Any]) -> None:
    # i3: every arm correct (easy). i4: A 0, B 0, C error -> 0 (hard); gone without errors.
    eh = view(result, "all")["easy_hard"]
    assert eh["easy"] == {"count": 1, "percent": 25.0, "ids": ["i3"]}
    assert eh["hard"] == {"count": 1, "percent": 25.0, "ids": ["i4"]}
    clean = view(result, "without_errors")["easy_hard"]
    assert clean["easy"]["ids"] == ["i3"] and clean["hard"]["count"] == 0


def test_ehr_length_quartiles(result: dict[str, Any]) -> None:
    # tokens 100..400: linear quartiles 175, 250, 325 -> one instruction per quartile
    q = view(result, "all")["breakdowns"]["ehr_length_quartile"]
    assert q["edges"] == [100.0, 175.0, 250.0, 325.0, 400.0]
    assert [g["items"] for g in q["groups"]] == [1, 1, 1, 1]
    q1, q2 = q["groups"][0], q["groups"][1]  # i1 and i2
    assert q1["per_model"][C]["correct_percent"] == 0.0 and q1["per_model"][C]["mean_rank"] == 3.0
    assert q2["pooled"]["correct_percent"] == pytest.approx(100 / 3)
    assert q2["per_model"][B]["mean_rank"] == 2.0
    # three instructions are left without errors: too few for quartiles, listed as undefined
    assert view(result, "without_errors")["breakdowns"]["ehr_length_quartile"] is None
    assert any("EHR-length quartile" in u for u in view(result, "without_errors")["undefined"])
    # category: Retrieve & Summarize = i1 + i2 -> C correct 0/2, mean rank (3 + 2) / 2
    groups = {g["group"]: g for g in view(result, "all")["breakdowns"]["category"]["groups"]}
    assert groups["Retrieve & Summarize"]["per_model"][C] == {
        "reviewed": 2,
        "correct_percent": 0.0,
        "ranked": 2,
        "mean_rank": 2.5,
    }
    assert view(result, "all")["breakdowns"]["specialty"] is None  # no such column


def test_error_items_are_dropped_for_every_arm(result: dict[str, Any]) -> None:
    assert result["error_items"] == [{"instruction": "i4", "arms": {C: "content_filter"}}]
    everything, clean = view(result, "all"), view(result, "without_errors")
    assert everything["errors"]["per_model"] == {A: {}, B: {}, C: {"content_filter": 1}}
    assert everything["errors"]["items"] == 1
    assert clean["dropped_items"] == ["i4"]
    assert (clean["rows"], clean["items"]) == (9, 3)
    assert clean["errors"]["responses"] == 0
    for m in MODELS:
        assert clean["per_model"][m]["responses"] == 3
        assert clean["analyze"]["scores"]["rougeL"]["per_model"][m]["n"] == 3


def test_response_length_percentiles(result: dict[str, Any]) -> None:
    lengths = view(result, "all")["response_length"]
    assert "word_tokens" in lengths["counter"]
    # A: 4, 6, 2, 1 words -> sorted 1, 2, 4, 6; linear percentiles at positions p * 3
    a = lengths["per_model"][A]
    assert a["count"] == 4 and a["mean"] == 3.25
    assert [a[k] for k in ("p10", "p25", "p50", "p75", "p90")] == pytest.approx([1.3, 1.75, 3.0, 4.5, 5.4])
    # B: "w w w." is 4 tokens (the full stop counts) -> 2, 3, 4, 8
    assert lengths["per_model"][B]["p50"] == 3.5 and lengths["per_model"][B]["mean"] == 4.25
    # C: 1, 0 (empty answer, no error), and i4's error left out -> 0, 1, 3
    c = lengths["per_model"][C]
    assert (c["count"], c["empty"], c["errors_left_out"]) == (3, 1, 1)
    assert [c["p25"], c["p50"], c["p75"]] == pytest.approx([0.5, 1.0, 2.0])
    # gold: 5, 3, 1, 7 -> 1, 3, 5, 7
    gold = lengths["gold"]
    assert [gold["mean"], gold["p25"], gold["p50"], gold["p90"]] == pytest.approx([4.0, 2.5, 4.0, 6.4])
    assert view(result, "without_errors")["response_length"]["gold"]["p50"] == 3.0
    # another counter, named in the output
    chars = medalign_analysis(hand_table(), COLUMNS, resamples=10, length_counter=len)
    assert chars["views"]["all"]["response_length"]["per_model"][A]["mean"] == (7 + 11 + 3 + 1) / 4
    assert chars["options"]["length_counter"] == "builtins.len"


def test_minimum_detectable_difference(result: dict[str, Any]) -> None:
    # rougeL A - B per item: .1, .4, 0, .2 -> sigma_d = sqrt(.0875 / 3); MDD = 2.8016 sigma_d / 2
    mdd = view(result, "all")["minimum_detectable_difference"]
    ab = mdd["rougeL"][0]
    assert (ab["model"], ab["opponent"], ab["n"]) == (A, B, 4)
    assert ab["sigma_d"] == pytest.approx(math.sqrt(0.0875 / 3))
    assert ab["mdd"] == pytest.approx((1.959964 + 0.841621) * ab["sigma_d"] / 2, rel=1e-5)
    pairs = view(result, "all")["analyze"]["scores"]["rougeL"]["pairs"]
    assert [p["minimum_detectable_difference"] for p in pairs] == pytest.approx(
        [p["mdd"] for p in mdd["rougeL"]]
    )
    # bertscore A vs C: C has no score on i4 -> 3 items
    assert mdd["bertscore"][1]["n"] == 3
    assert {"rougeL", "bertscore", "correct", "rank"} == set(mdd)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_self_contained_escaped_with_heatmaps(result: dict[str, Any]) -> None:
    page = render_html(result)
    parser = _Collector()
    parser.feed(page)
    parser.close()
    tags = [t for t, _ in parser.tags]
    heatmaps = [a for t, a in parser.tags if t == "svg" and a.get("class") == "heatmap"]
    # per view: the reference ranking + 3 score columns (rougeL, bertscore, correct), 2 variants each
    assert len(heatmaps) == 2 * (1 + 3) * 2
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert "b" not in tags  # the arm "<b>&x" never becomes markup
    assert "&lt;b&gt;&amp;x" in page and "<b>&x" not in page
    assert C in "".join(parser.text)  # and reads back as its name
    assert "0.75" in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    md = render_markdown(result)
    assert md.startswith("# MedAlign analysis") and "## Clinician ranking" in md
    assert "\\<b\\>&x" in md


def test_write_report_and_computed_reference(tmp_path: Path) -> None:
    cols = MedAlignColumns(metrics=("rougeL",), reference_label="computed reference")
    res = medalign_analysis(hand_table(), cols, resamples=10)
    paths = write_report(res, tmp_path / "report")
    assert [p.name for p in paths] == ["medalign.json", "medalign.md", "medalign.html"]
    data = json.loads(paths[0].read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data["reference_label"] == "computed reference"
    md = paths[1].read_text()
    assert "not clinicians' judgement" in md
    assert "## Computed reference ranking" in md and "## Clinician ranking" not in md  # analyze's own heading
    assert "not clinicians&#x27; judgement" in paths[2].read_text()
    assert not list((tmp_path / "report").glob(".*.tmp"))


def test_one_arm_gives_undefined_not_an_exception() -> None:
    res = medalign_analysis(hand_table(models=(A,)), COLUMNS, resamples=10)
    everything = res["views"]["all"]
    assert everything["analyze"] is None and everything["easy_hard"] is None
    assert everything["minimum_detectable_difference"] is None
    assert any("generic statistics (analyze): need 2+ arms" in u for u in res["undefined"])
    assert any("easy and hard items: need 2+ arms" in u for u in res["undefined"])
    assert everything["per_model"][A]["correct_percent"] == 75.0  # what one arm allows is still there
    assert render_html(res) and render_markdown(res)
    json.dumps(res, allow_nan=False)


def test_small_and_empty_tables_do_not_raise() -> None:
    t = hand_table()
    for keep in ({"i1"}, {"i4"}, {"i1", "i4"}, set()):
        rows = tuple(r for r in t.rows if r.cells["instruction_id"] in keep)
        res = medalign_analysis(LongTable(t.path, t.columns, rows), COLUMNS, resamples=10)
        json.dumps(res, allow_nan=False)
        assert render_html(res)
    # only i4: every instruction has an error, so the second view is empty and says why
    rows = tuple(r for r in t.rows if r.cells["instruction_id"] == "i4")
    res = medalign_analysis(LongTable(t.path, t.columns, rows), COLUMNS, resamples=10)
    assert any("every instruction had a provider error" in u for u in res["undefined"])


def test_primary_rater_feeds_the_medalign_sections() -> None:
    rows = [
        Row(
            "r",
            {"instruction_id": "q1", "model": m, "rater": rater, "rank": ranks[k], "correct": int(k == 0)},
        )
        for rater, ranks in (("dr1", (1, 2, 3)), ("dr2", (1, 3, 2)))
        for k, m in enumerate("abc")
    ]
    rows += [
        Row("s", {"instruction_id": "q2", "model": m, "rater": "dr1", "rank": k + 1})
        for k, m in enumerate("abc")
    ]
    table = LongTable(Path("r.csv"), ("instruction_id", "model", "rater", "rank", "correct"), tuple(rows))
    res = medalign_analysis(table, MedAlignColumns(), resamples=10)
    everything = res["views"]["all"]
    # dr1 is q1's primary rater: b ranked 2 there, 2 on q2
    assert everything["per_model"]["b"]["mean_rank"] == 2.0
    # dr1 (1,2,3) vs dr2 (1,3,2) on q1: one discordant pair of three -> tau 1/3
    raters = everything["analyze"]["human"]["raters"]
    assert raters["inter_rater_kendall"]["mean_tau_b"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"correct": 2}, "correctness must be 1 or 0"),
        ({"rougeL": "high"}, "is 'high', not a number"),
        ({"model": A, "instruction_id": "i1"}, "already appear at"),
    ],
)
def test_input_errors_are_raised(change: dict[str, Any], message: str) -> None:
    t = hand_table()
    rows = list(t.rows)
    rows[1] = Row(rows[1].where, {**rows[1].cells, **change})
    with pytest.raises(UserError, match=message):
        medalign_analysis(LongTable(t.path, t.columns, tuple(rows)), COLUMNS, resamples=10)
    with pytest.raises(UserError, match="no column 'comet'"):
        medalign_analysis(t, MedAlignColumns(metrics=("comet",)))


def _with_patients(patients: dict[str, str]) -> LongTable:
    t = hand_table()
    rows = tuple(
        Row(r.where, {**r.cells, "patient_id": patients[str(r.cells["instruction_id"])]}) for r in t.rows
    )
    return LongTable(t.path, (*t.columns, "patient_id"), rows)


def test_intervals_resample_a_patients_instructions_together() -> None:
    """Issue 13, item 14: per-arm CIs and paired tests ignored patients; now clustered by default."""
    patients = {"i1": "P1", "i2": "P1", "i3": "P2", "i4": "P2"}
    res = medalign_analysis(_with_patients(patients), COLUMNS, resamples=RESAMPLES)
    everything = view(res, "all")
    assert everything["clustering"] == {"by": "patient_id", "patients": 2, "items": 4}
    # A: correct 1, 1, 1, 0 over i1..i4
    low, high = cluster_bootstrap_ci([1, 1, 1, 0], ["P1", "P1", "P2", "P2"], resamples=RESAMPLES)
    assert everything["per_model"][A]["ci"] == [100 * low, 100 * high]
    assert everything["analyze"]["options"]["cluster"] == "patient_id"
    pair = everything["analyze"]["scores"]["rougeL"]["pairs"][0]
    assert pair["clusters"] == 2
    assert "resample patients (2 patients, 4 instructions)" in render_markdown(res)

    off = medalign_analysis(
        _with_patients(patients), MedAlignColumns(metrics=COLUMNS.metrics, patient=None), resamples=RESAMPLES
    )
    plain = bootstrap_ci([1, 1, 1, 0], resamples=RESAMPLES)
    assert view(off, "all")["per_model"][A]["ci"] == [100 * plain[0], 100 * plain[1]]
    assert view(off, "all")["clustering"]["by"] is None

    one = medalign_analysis(_with_patients(dict.fromkeys(patients, "P1")), COLUMNS, resamples=RESAMPLES)
    assert view(one, "all")["clustering"] == {"by": None, "why": "every instruction is about one patient"}
    assert view(one, "all")["per_model"][A]["ci"] == [100 * plain[0], 100 * plain[1]]
