"""AutoMedEval's judge-evaluation sets and the judge's reply format (issue 15, first part)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinieval.benchmarks.automedeval.data import load_set
from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Rating, Response
from clinieval.benchmarks.automedeval.verdict import (
    cut_response,
    parse_scores,
    permutation,
    rationale,
    to_original,
)
from clinieval.errors import UserError
from clinieval.judge.rubric import VerdictParseError

ITEM = {
    "id": "q1",
    "question": "What lowers blood pressure quickly in a hypertensive emergency?",
    "reference": "Intravenous agents such as labetalol or nicardipine, titrated.",
    "rationale": "Both IV agents are first line.",
    "responses": [
        {
            "model": "a",
            "text": "IV labetalol.",
            "ratings": {"dr1": {"relevancy": 5, "fluency": 4, "correctness": 5}},
        },
        {
            "model": "b",
            "text": "Oral amlodipine.",
            "ratings": {"dr1": {"relevancy": 3, "fluency": 4, "correctness": 2}},
        },
        {"model": "c", "text": "Nicardipine drip."},
    ],
}


def write_jsonl(path: Path, *items: object) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


def test_jsonl_set_with_ratings_and_human_scores(tmp_path: Path) -> None:
    [item] = load_set(write_jsonl(tmp_path / "set.jsonl", ITEM))
    assert item.models == ("a", "b", "c") and item.rationale == "Both IV agents are first line."
    assert item.responses[0].ratings["dr1"] == Rating(5, 4, 5)
    assert item.human_scores() == [pytest.approx(14 / 3), pytest.approx(3.0), None]


CSV = (
    "id,question,reference,model,response,physician,relevancy,fluency,correctness\n"
    "q1,Q?,Ref.,a,Answer A,dr1,5,5,4\n"
    "q1,Q?,Ref.,a,Answer A,dr2,4,4,4\n"
    "q1,Q?,Ref.,b,Answer B,dr1,2,3,1\n"
    "q1,Q?,Ref.,c,Answer C,,,,\n"
)


def test_csv_set_groups_rows_into_items_and_averages_physicians(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_text(CSV, encoding="utf-8")
    [item] = load_set(path)
    assert item.models == ("a", "b", "c")
    # a: dr1 mean 14/3, dr2 mean 4 -> (14/3 + 4) / 2
    assert item.human_scores() == [pytest.approx((14 / 3 + 4) / 2), pytest.approx(2.0), None]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"responses": ITEM["responses"][:1]}, ":1: 1 response(s); a judge compares at least 2"),
        ({"question": "  "}, ":1: field 'question' is empty"),
        ({"responses": [*ITEM["responses"][:2], {"model": "a", "text": "x"}]}, "model 'a' answers twice"),
        (
            {
                "responses": [
                    {
                        "model": "a",
                        "text": "x",
                        "ratings": {"d": {"relevancy": 6, "fluency": 1, "correctness": 1}},
                    },
                    {"model": "b", "text": "y"},
                ]
            },
            ":1: response 1: rating by 'd': field 'relevancy' is 6; expected a whole number 1-5",
        ),
        ({"reference": 3}, "reference"),
    ],
)
def test_bad_jsonl_items_are_one_error_naming_line_and_field(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = write_jsonl(tmp_path / "set.jsonl", {**ITEM, **change})
    with pytest.raises(UserError, match=r"set\.jsonl") as e:
        load_set(path)
    assert message in str(e.value)


def test_bad_csv_rows_and_files(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_text(CSV.replace("q1,Q?,Ref.,b,Answer B", "q1,Other?,Ref.,b,Answer B"), encoding="utf-8")
    with pytest.raises(UserError, match=r"set\.csv:4: field 'question' differs from item 'q1'"):
        load_set(path)
    path.write_text(CSV.replace("dr2,4,4,4", "dr1,4,4,4"), encoding="utf-8")
    with pytest.raises(UserError, match=r"set\.csv:3: physician 'dr1' rates model 'a' twice"):
        load_set(path)
    path.write_text(CSV.replace(",dr2,4,4,4", ",dr2,4,four,4"), encoding="utf-8")
    with pytest.raises(UserError, match=r"set\.csv:3: field 'fluency' is 'four'"):
        load_set(path)
    twice = write_jsonl(tmp_path / "twice.jsonl", ITEM, ITEM)
    with pytest.raises(UserError, match=r"twice\.jsonl:2: item id 'q1' repeats .*twice\.jsonl:1"):
        load_set(twice)
    with pytest.raises(UserError, match=r"expected a \.jsonl, \.csv or \.tsv file"):
        load_set(write_jsonl(tmp_path / "set.json", ITEM))


@pytest.mark.parametrize(
    ("reply", "scores"),
    [
        (
            "Analyze: Step 1: ...\nScore: Doctor 1: 4 points. Doctor 2: 2 points. Doctor 3: 5 points.",
            [4, 2, 5],
        ),
        ("Doctor 1: 3 Doctor 2: 3 Doctor 3: 1", [3, 3, 1]),  # a reply that is only the verdict
        # only the final Score: block is read: not the analysis, not a verdict corrected later
        ("Analyze: Doctor 1: 2 tablets.\nScore: Doctor 1: 3 Doctor 2: 3 Doctor 3: 1", [3, 3, 1]),
        (
            "Score: Doctor 1: 5 Doctor 2: 3 Doctor 3: 1. No: Score: Doctor 1: 4 Doctor 2: 3 Doctor 3: 1",
            [4, 3, 1],
        ),
    ],
)
def test_the_papers_score_format_is_read(reply: str, scores: list[int]) -> None:
    assert parse_scores(reply, 3) == scores


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Score: Doctor 1: 4 points. Doctor 3: 2 points. Doctor 2: 5 points.", "score 2 is for Doctor 3"),
        ("Score: Doctor 1: 4 points. Doctor 2: 2 points.", "2 'Doctor N: S' scores found; 3 expected"),
        ("Doctor 1: 4, Doctor 2: 0, Doctor 3: 5", "Doctor 2: 0 is outside 1-5"),
        ("I would rate them 4, 2 and 5.", "no 'Score: Doctor 1: S ...' verdict"),
        # the paper's regex would read "10" as 1
        ("Doctor 1: 10 points. Doctor 2: 3. Doctor 3: 4.", "Doctor 1: 10 is outside 1-5"),
        # the paper's rule read the first k anywhere: here no Score: line means no verdict, and a
        # doctor scored twice with different values in the final block is unparsed
        ("Doctor 1: 3 Doctor 2: 3 Doctor 3: 1 and later Doctor 3: 5", "no 'Score: Doctor 1: S ...' verdict"),
        ("Score: Doctor 1: 3 Doctor 2: 3 Doctor 3: 1 and later Doctor 3: 5", "Doctor 3 is given 1 and 5"),
    ],
)
def test_anything_else_is_unparsed_never_a_score(reply: str, why: str) -> None:
    with pytest.raises(VerdictParseError, match=why):
        parse_scores(reply, 3)


def test_rationale_cut_and_permutations() -> None:
    assert rationale("Analyze: Step 1: A is right.\nScore: Doctor 1: 5") == "Analyze: Step 1: A is right."
    assert rationale("no score line") == "no score line"
    long = cut_response("x" * 1500)
    assert len(long.text) == 1000 and long.cut and long.original_chars == 1500
    assert not cut_response("short").cut
    shown = permutation(0, "q1", 2, 3)
    assert sorted(shown) == [0, 1, 2] and permutation(0, "q1", 2, 3) == shown
    assert len({permutation(0, "q1", r, 3) for r in range(12)}) > 1  # repeats see different orders
    # shown (2, 0, 1): Doctor 1 is response 2, Doctor 2 is response 0, Doctor 3 is response 1
    assert to_original([5, 3, 1], (2, 0, 1)) == [3, 1, 5]
    with pytest.raises(ValueError):
        to_original([1, 2], (0, 0))


def _item(item_id: str, human: list[int] | None, extra: dict[str, list[int]] | None = None) -> JudgeItem:
    """An item whose physician dr1 rates response j with human[j] on every criterion (mean = human[j])."""
    responses = []
    for j, model in enumerate(("a", "b", "c")):
        ratings = {} if human is None else {"dr1": Rating(human[j], human[j], human[j])}
        for doctor, values in (extra or {}).items():
            ratings[doctor] = Rating(values[j], values[j], values[j])
        responses.append(Response(model, f"answer {model}", ratings))
    return JudgeItem(item_id, "Q?", "R.", tuple(responses), source=f"set.jsonl:{item_id}")


def test_judge_agreement_by_hand() -> None:
    from scipy import stats

    from clinieval.benchmarks.automedeval.agreement import judge_agreement

    items = [_item("A", [5, 3, 1]), _item("B", [2, 2, 4]), _item("C", [1, 3, 5]), _item("D", [4, 4, 4]),
             _item("E", None)]  # fmt: skip
    judged = {"A": [4, 2, 1], "B": [3, 3, 5], "C": [2, 2, 5], "D": None, "E": [1, 2, 3]}
    out = judge_agreement(items, judged)
    # A all 3 pairs, B all 3 (the tie kept), C 2 of 3 (a judge tie where the reference is strict),
    # D unparsed: 3 wrong; E has no physician ratings: skipped
    assert out["accuracy_2tuple"] == pytest.approx(8 / 12)
    assert out["accuracy_triple"] == pytest.approx(2 / 4)
    assert (out["items"], out["judge_missing"], out["skipped_no_reference"]) == (4, 1, 1)
    human = [5, 3, 1, 2, 2, 4, 1, 3, 5]
    judge = [4, 2, 1, 3, 3, 5, 2, 2, 5]
    assert out["responses"] == 9
    assert out["spearman"]["r"] == pytest.approx(stats.spearmanr(judge, human).statistic)
    assert out["pearson"]["r"] == pytest.approx(stats.pearsonr(judge, human).statistic)
    with pytest.raises(UserError, match="2 judge scores for 3 responses"):
        judge_agreement(items[:1], {"A": [1, 2]})


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin's own use of pandas
def test_physician_reliability_matches_the_reference_libraries() -> None:
    import krippendorff
    import pingouin

    from clinieval.benchmarks.automedeval.agreement import physician_reliability

    dr2 = {"A": [4, 3, 2], "B": [2, 3, 4], "C": [1, 2, 5]}
    items = [_item(k, h, {"dr2": dr2[k]}) for k, h in (("A", [5, 3, 1]), ("B", [2, 2, 4]), ("C", [1, 3, 5]))]
    out = physician_reliability(items)
    table = [[5, 3, 1, 2, 2, 4, 1, 3, 5], [4, 3, 2, 2, 3, 4, 1, 2, 5]]
    assert out["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=table, level_of_measurement="interval")
    )
    import pandas as pd

    long = pd.DataFrame([{"unit": u, "rater": r, "score": table[r][u]} for r in range(2) for u in range(9)])
    ref = pingouin.intraclass_corr(long, targets="unit", raters="rater", ratings="score").set_index("Type")
    # pingouin names them by McGraw & Wong: ICC2 = ICC(A,1), ICC2k = ICC(A,k)
    assert out["icc"]["ICC2"]["icc"] == pytest.approx(ref.loc["ICC(A,1)", "ICC"])
    assert out["icc"]["ICC2k"]["icc"] == pytest.approx(ref.loc["ICC(A,k)", "ICC"])
    alone = physician_reliability([_item("A", [5, 3, 1])])
    assert alone["alpha"] is None and "needs 2 or more physicians" in alone["undefined"][0]


def test_position_and_length_bias_by_hand() -> None:
    from clinieval.benchmarks.automedeval.bias import (
        Judged,
        bias_report,
        first_shown_wins,
        length_preference,
        swap_consistency,
    )

    # a judge that always gives the first-shown response 5 and the rest 2, over two orders
    biased = [Judged((0, 1, 2), (5.0, 2.0, 2.0)), Judged((1, 0, 2), (2.0, 5.0, 2.0))]
    # pairs shown in opposite orders by the two repeats: only (0, 1); its relation flips -> 0 of 1
    assert swap_consistency(biased) == (0, 1)
    assert first_shown_wins(biased) == (2, 2)
    # a judge blind to order: the same scores however shown
    fair = [Judged((0, 1, 2), (4.0, 3.0, 1.0)), Judged((2, 1, 0), (4.0, 3.0, 1.0)), Judged((0, 1, 2), None)]
    assert swap_consistency(fair) == (3, 3)  # every pair reversed, every relation kept
    assert first_shown_wins(fair) == (1, 2)  # response 0 shown first once and it is the best
    # lengths 30, 20, 10: the longer always scored higher in the fair judge's 2 parsed repeats
    assert length_preference(fair, [30, 20, 10]) == (6, 6)
    assert length_preference(fair, [10, 20, 30]) == (0, 6)
    report = bias_report([(biased, [5, 5, 5]), (fair, [30, 20, 10])])
    # each figure now also carries its CI and verdict (issue 25): the counts are unchanged
    assert (report["swap_consistency"]["rate"], report["swap_consistency"]["comparisons"]) == (3 / 4, 4)
    assert report["first_shown_wins"]["rate"] == 3 / 4 and report["first_shown_wins"]["chance"] == 1 / 3
    assert (report["length_preference"]["rate"], report["length_preference"]["pairs"]) == (1.0, 6)


def test_chunks_are_at_most_1000_characters_cut_at_whitespace() -> None:
    from clinieval.benchmarks.automedeval.knowledge import chunks

    text = " ".join(f"word{i}" for i in range(600))  # about 4,300 characters
    parts = chunks(text)
    assert all(len(p) <= 1000 for p in parts) and len(parts) == 5
    assert " ".join(parts) == text  # nothing lost, nothing added
    assert chunks("x" * 2500) == ["x" * 1000, "x" * 1000, "x" * 500]  # no whitespace: cut inside
    assert chunks("   ") == []


def test_knowledge_base_build_query_and_the_chain_lines(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.knowledge import knowledge_line, question_of
    from tests.conftest import run_cli

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "htn.md").write_text(
        "Hypertensive emergency is treated with intravenous labetalol or nicardipine, lowering the mean "
        "arterial pressure by no more than 25 percent in the first hour.",
        encoding="utf-8",
    )
    (docs / "dm.txt").write_text("Metformin is the first-line drug for type 2 diabetes.", encoding="utf-8")
    (docs / "more.jsonl").write_text(
        json.dumps({"text": "Aspirin is given in acute coronary syndrome."}) + "\n"
    )
    built = run_cli("automedeval", "kb", "build", str(docs), "--out", str(tmp_path / "kb"))
    assert built.returncode == 0, built.stderr
    assert "3 chunks indexed" in built.stdout
    asked = run_cli("automedeval", "kb", "query", str(tmp_path / "kb"), "hypertensive emergency labetalol")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith(
        'According to the Reference, the related knowledge for "hypertensive emergency labetalol" is '
        '"Hypertensive emergency is treated with intravenous labetalol'
    )
    assert "htn.md#0" in asked.stdout
    reply = "Analyze: Step 1: unsure.\n[Question]: What is first line for type 2 diabetes?\nMore text"
    assert question_of(reply) == "What is first line for type 2 diabetes?"
    assert question_of("Score: Doctor 1: 4") is None
    from clinieval.benchmarks.automedeval.knowledge import Lookup

    assert (
        knowledge_line(Lookup("q", (), "k"))
        == 'According to the Reference, the related knowledge for "q" is "k"'
    )
    (docs / "scan.pdf").write_bytes(b"%PDF-1.4")
    bad = run_cli("automedeval", "kb", "build", str(docs / "scan.pdf"), "--out", str(tmp_path / "kb2"))
    assert bad.returncode == 2 and "converted to text first" in bad.stderr and not (tmp_path / "kb2").exists()
    single = run_cli("run", "automedeval", "-m", "openai:http://127.0.0.1:9/v1@m")
    assert single.returncode == 2 and "no single-arm run" in single.stderr


def test_runs_become_a_judge_set(tmp_path: Path) -> None:
    """Two runs of the same questions (a real local server, two answers) become a set the loader
    reads back; a sample without a reference and one a run failed on are left out and counted."""
    from tests.conftest import run_cli
    from tests.fault_server import FaultServer

    data = tmp_path / "items.jsonl"
    rows = [
        {"id": "a", "input": "Q a?", "target": "ref a"},
        {"id": "b", "input": "Q b?", "target": "ref b"},
        {"id": "c", "input": "Q c?"},
        {"id": "d", "input": "Q d? FAULT:FILTER", "target": "ref d"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    calls = {"n": 0}

    def answer(prompt: str) -> str:  # the first run's answers, then the second's
        calls["n"] += 1
        return "First answer." if calls["n"] <= 3 else "Second answer."

    with FaultServer(responder=answer) as server:  # one server: both runs have the same model spec
        for name in ("one", "two"):
            cmd = ("run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(tmp_path / name),
                   "--no-progress", "--scorer", "answered", "--concurrency", "1")  # fmt: skip
            done = run_cli(*cmd)
            assert done.returncode in (0, 1), done.stderr  # the filtered item is a failure, not an error
    out = tmp_path / "set.jsonl"
    made = run_cli("automedeval", "convert", str(tmp_path / "one"), str(tmp_path / "two"), "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert "2 items x 2 responses; left out: 1 without a reference, 1 with a failed call" in made.stdout
    items = load_set(out)
    assert [x.id for x in items] == ["a", "b"]
    assert items[0].reference == "ref a" and [r.text for r in items[0].responses] == [
        "First answer.",
        "Second answer.",
    ]
    # the same model spec twice: each response named with its run folder as well
    assert items[0].models[0].endswith("@fault [one]") and items[0].models[1].endswith("@fault [two]")
    lonely = run_cli("automedeval", "convert", str(tmp_path / "one"), "--out", str(tmp_path / "x.jsonl"))
    assert lonely.returncode == 2 and "two or more run folders" in lonely.stderr


def test_judging_a_set_maps_shown_orders_back_and_runs_the_knowledge_chain(tmp_path: Path) -> None:
    """A scripted judge (a real local server) that scores each answer by its text, whatever order it
    is shown in: the mapped-back scores must be the same in every repeat, the physicians' order is
    reproduced, a [Question] reply triggers one lookup, and a rerun asks nothing."""
    import re as regex

    from tests.conftest import run_cli
    from tests.fault_server import FaultServer

    items = [
        {"id": f"q{i}", "question": f"Question {i}?", "reference": "Ref.",
         "responses": [{"model": m, "text": f"{m} says {s}.",
                        "ratings": {"dr1": {"relevancy": s, "fluency": s, "correctness": s}}}
                       for m, s in (("a", 5), ("b", 3), ("c", 1))]}
        for i in range(4)
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "set.jsonl", *items)
    docs = tmp_path / "docs.txt"
    docs.write_text("Labetalol is first line in hypertensive emergency.", encoding="utf-8")
    assert run_cli("automedeval", "kb", "build", str(docs), "--out", str(tmp_path / "kb")).returncode == 0

    def reply(prompt: str) -> str:
        if prompt.startswith("According to the Reference"):  # after a lookup: a tie, whatever the order
            return "Analyze: all fine.\nScore: Doctor 1: 3 points. Doctor 2: 3 points. Doctor 3: 3 points."
        if "Question 0?" in prompt:
            return "Analyze: unsure.\n[Question] first line drug for hypertensive emergency"
        shown = regex.findall(r"^Doctor \d: (\w) says (\d)\.", prompt, regex.M)
        scores = " ".join(f"Doctor {n}: {s} points." for n, (_, s) in enumerate(shown, 1))
        return f"Analyze: Step 1: compared.\nScore: {scores}"

    with FaultServer(responder=reply) as server:
        spec = f"openai:{server.url}@fault"
        cmd = ("automedeval", "judge", str(path), "--judge", spec, "--out", str(tmp_path / "judged"),
               "--repeats", "3", "--order", "shuffled", "--kb", str(tmp_path / "kb"),
               "--no-progress")  # fmt: skip
        done = run_cli(*cmd)
        assert done.returncode == 0, done.stderr
        first = len(server.log.received)
        again = run_cli(*cmd)
        assert again.returncode == 0 and len(server.log.received) == first  # all from the cache
    verdicts = [json.loads(x) for x in (tmp_path / "judged" / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 12
    for v in verdicts:
        assert v["scores"] == ([3, 3, 3] if v["item"] == "q0" else [5, 3, 1]), v  # mapped back from any order
    assert {tuple(v["shown"]) for v in verdicts} != {(0, 1, 2)}  # the orders did vary
    summary = json.loads((tmp_path / "judged" / "summary.json").read_text())
    assert summary["lookups"] == 3 and all(len(v["lookups"]) == 1 for v in verdicts if v["item"] == "q0")
    assert summary["parse_rate"] == 1.0
    # q0: a judge tie where the physicians ordered a > b > c: its 3 pairs and the item wrong
    assert summary["agreement"]["accuracy_2tuple"] == pytest.approx(9 / 12)
    assert summary["agreement"]["accuracy_triple"] == pytest.approx(3 / 4)
    assert summary["bias"]["swap_consistency"]["rate"] == 1.0
