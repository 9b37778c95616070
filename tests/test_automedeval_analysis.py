"""AutoMedEval: the synthetic set, several judges side by side, and the report.

Judges here are scripted local servers (stand-ins for judge models, named as such): a
fact-counting judge whose scores follow from what each response was built from, and a flat judge
that gives every response 3. What each should get against the physicians is computed by hand from
the set's own numbers, not read back from the code under test.
"""

from __future__ import annotations

import asyncio
import json
import re
from itertools import combinations
from pathlib import Path

import pytest

from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs
from clinieval.benchmarks.automedeval.judge_set import Rating
from clinieval.benchmarks.automedeval.judging import JudgePlan, judge_set
from clinieval.benchmarks.automedeval.synth import (
    CONDITIONS,
    PHYSICIANS,
    VARIANTS,
    Built,
    synthetic_item,
    synthetic_set,
    true_rating,
)
from clinieval.errors import UserError
from tests.fault_server import FaultServer

_DOCTOR = re.compile(r"^Doctor (\d): (.*)$", re.MULTILINE)


def fact_judge(prompt: str) -> str:
    """Scores each answer by how many reference sentences it states word for word."""
    reference = prompt.split("[Reference Answer]\n", 1)[1].split("\n\n[Doctors' Answers]", 1)[0]
    facts = [f for f in re.split(r"(?<=\.) ", reference) if f]
    answers = prompt.split("[Doctors' Answers]\n", 1)[1]
    scores = [
        1 + round(4 * sum(f in text for f in facts) / len(facts)) for _, text in _DOCTOR.findall(answers)
    ]
    return "Analyze: Step 1: counted the key points.\nScore: " + " ".join(
        f"Doctor {i}: {s} points." for i, s in enumerate(scores, 1)
    )


def flat_judge(prompt: str) -> str:
    k = len(_DOCTOR.findall(prompt.split("[Doctors' Answers]\n", 1)[1]))
    return "Analyze: all similar.\nScore: " + " ".join(f"Doctor {i}: 3 points." for i in range(1, k + 1))


def _judge(items, responder, name: str, out: Path, repeats: int = 2, kb=None) -> list:  # type: ignore[no-untyped-def,type-arg]
    """Judge ``items`` with a scripted local server; the request bodies it received."""
    from clinieval.models.openai_http import OpenAIModel

    with FaultServer(responder=responder) as server:

        async def go() -> None:
            model = OpenAIModel(server.url, name, timeout_s=10)
            try:
                await judge_set(items, model, out, JudgePlan(repeats=repeats, kb=kb, progress=False))
            finally:
                await model.aclose()

        asyncio.run(go())
    return server.log.bodies


def _relations(scores: list[float]) -> list[int]:
    return [(a > b) - (a < b) for a, b in combinations(scores, 2)]


# --- the synthetic set ---------------------------------------------------------------------------


def test_true_rating_follows_the_stated_rule() -> None:
    assert true_rating(Built(4, 0, False), 4) == Rating(5, 5, 5)
    assert true_rating(Built(2, 0, True), 4) == Rating(3, 2, 3)
    assert true_rating(Built(3, 1, False), 4) == Rating(4, 5, 2)  # 1 + round(3) = 4; 4 - 2 = 2
    assert true_rating(Built(1, 1, False), 4) == Rating(2, 5, 1)  # correctness floored at 1


def test_synthetic_responses_hold_exactly_the_facts_they_were_built_with() -> None:
    for index in range(24):
        item, built = synthetic_item(index, seed=3)
        condition, variants = CONDITIONS[index % len(CONDITIONS)], VARIANTS[index % len(CONDITIONS)]
        for response, b in zip(item.responses, built, strict=True):
            verbatim = sum(f in response.text for f in condition.facts)
            own = sum(p in response.text for p in variants.paraphrases)
            wrong = sum(e in response.text for e in (*condition.errors, *variants.near_misses))
            expected = (0, 0, 0) if b.fragments else (b.facts - b.paraphrased, b.paraphrased, b.wrong)
            assert (verbatim, own, wrong) == expected
            assert set(response.ratings) == set(PHYSICIANS)
            truth = true_rating(b, len(condition.facts))
            for rating in response.ratings.values():  # each rater within one point of the rule
                assert abs(rating.relevancy - truth.relevancy) <= 1
                assert abs(rating.correctness - truth.correctness) <= 1
    assert synthetic_set(5, seed=1) == synthetic_set(5, seed=1) != synthetic_set(5, seed=2)


def test_word_overlap_is_not_the_physicians_rule_in_disguise() -> None:
    """The physicians rate what an answer says; the answers say it in their own words, pad it with
    general advice, or copy the reference with one critical detail wrong. So the overlap baseline is
    far from an oracle (before: responses were the reference's own sentences and overlap ranked
    pairs as the physicians did 77 % of the time, Spearman 0.87), while the noise-free rule itself
    still agrees with the (noisy) physicians well."""
    from scipy import stats

    from clinieval.benchmarks.automedeval.overlap_judge import overlap_score

    items = synthetic_set(120, seed=0)
    overlap, truth, human, agree_overlap, agree_truth = [], [], [], [], []
    for index, item in enumerate(items):
        _, built = synthetic_item(index, seed=0)
        k = len(CONDITIONS[index % len(CONDITIONS)].facts)
        h = [r.human_score() for r in item.responses]
        o = [overlap_score(r.text, item.reference) for r in item.responses]
        t = [true_rating(b, k).mean for b in built]
        human += h
        overlap += o
        truth += t
        agree_overlap.append(sum(a == b for a, b in zip(_relations(h), _relations(o), strict=True)) / 3)  # type: ignore[arg-type]
        agree_truth.append(sum(a == b for a, b in zip(_relations(h), _relations(t), strict=True)) / 3)  # type: ignore[arg-type]
    assert stats.spearmanr(overlap, human).statistic < 0.5
    assert sum(agree_overlap) / 120 < 0.55
    assert stats.spearmanr(truth, human).statistic > 0.85 and sum(agree_truth) / 120 > 0.6
    # the careful answers, padded with general advice, are the longest
    careful = [item.responses[0] for item in items]
    assert sum(len(r.text) for r in careful) > max(
        sum(len(i.responses[j].text) for i in items) for j in (1, 2)
    )


# --- several judges side by side -----------------------------------------------------------------


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list[Path]]:  # type: ignore[type-arg]
    items = synthetic_set(30, seed=7)
    root = tmp_path_factory.mktemp("judges")
    _judge(items, fact_judge, "fact-judge", root / "fact")
    _judge(items, flat_judge, "flat-judge", root / "flat")
    return items, [root / "fact", root / "flat"]


def test_flat_judge_agreement_is_the_share_of_ties_among_the_physicians(judged) -> None:  # type: ignore[no-untyped-def]
    items, folders = judged
    result = analyze(items, read_judge_runs(folders), AnalysisSettings(resamples=500, rationale=False))
    flat = next(b for b in result["judges"] if b["judge"] == "flat-judge")
    humans = [[r.human_score() for r in i.responses] for i in items]
    relations = [_relations(h) for h in humans]  # type: ignore[arg-type]
    ties = sum(rel.count(0) for rel in relations)
    all_equal = sum(all(x == 0 for x in rel) for rel in relations)
    assert flat["agreement"]["accuracy_2tuple"] == pytest.approx(ties / (3 * len(items)))
    assert flat["agreement"]["accuracy_triple"] == pytest.approx(all_equal / len(items))
    assert flat["parse_rate"] == 1.0 and flat["verdicts"] == 60
    # a flat judge never prefers anything: every pair is a tie in its win/tie table, which is
    # now beside the physicians' on the same items, with n (issue 25)
    assert all(p["tie_rate"] == 1.0 for p in flat["win_tie"]["judge"])
    assert flat["win_tie"]["items"] == 30 and flat["win_tie"]["units"] == 60
    assert flat["agreement"]["spearman"] is None  # constant judge scores: undefined, with its reason
    assert any("spearman" in u for u in flat["agreement"]["undefined"])


def test_fact_judge_is_best_and_the_flat_one_is_tested_against_it(judged) -> None:  # type: ignore[no-untyped-def]
    items, folders = judged
    result = analyze(items, read_judge_runs(folders), AnalysisSettings(resamples=500, rationale=False))
    assert result["best"] == "fact-judge"
    fact, flat = result["judges"]
    # the fact judge's scores, derived from how each response was built (not from the prompt)
    expected = []
    for index in range(30):
        _, built = synthetic_item(index, seed=7)
        k = len(CONDITIONS[index % len(CONDITIONS)].facts)
        # it counts the reference's sentences word for word: a paraphrase escapes it
        expected.append([1 + round(4 * (0 if b.fragments else b.facts - b.paraphrased) / k) for b in built])
    humans = [[r.human_score() for r in i.responses] for i in items]
    per_item = [
        sum(a == b for a, b in zip(_relations(h), _relations(e), strict=True)) / 3  # type: ignore[arg-type]
        for h, e in zip(humans, expected, strict=True)
    ]
    assert fact["agreement"]["accuracy_2tuple"] == pytest.approx(sum(per_item) / 30)
    low, high = fact["agreement"]["accuracy_2tuple_ci"]
    assert low <= fact["agreement"]["accuracy_2tuple"] <= high
    test = flat["vs_best"]
    assert test["items"] == 30 and "vs_best" not in fact
    # the paired t-test is scipy's on the same per-item shares
    from scipy import stats

    flat_items = [_relations(h).count(0) / 3 for h in humans]  # type: ignore[arg-type]
    t = stats.ttest_rel(flat_items, per_item)
    assert test["t_test"]["pvalue"] == pytest.approx(float(t.pvalue))
    assert test["difference_2tuple"]["mean"] == pytest.approx(sum(flat_items) / 30 - sum(per_item) / 30)
    # physicians' side: reliability and win/tie from the set alone
    assert result["physicians"]["physicians"] == 3
    # the items list their models in a seeded order each: the tables key on names, in name order
    pairs = [(p["model"], p["opponent"]) for p in result["physician_win_tie"]]
    assert pairs == [("careful", "confident"), ("careful", "terse"), ("confident", "terse")]
    careful_vs_terse = result["physician_win_tie"][1]
    by_name = [{r.model: r.human_score() for r in i.responses} for i in items]
    wins = sum(h["careful"] > h["terse"] for h in by_name)  # type: ignore[operator]
    assert careful_vs_terse["wins"] == wins
    assert len({i.models for i in items}) > 1  # the order really varies


def test_analyze_command_writes_an_escaped_report_and_refuses_a_foreign_set(
    judged,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    from clinieval.benchmarks.automedeval.convert import write_set
    from tests.conftest import run_cli

    items, folders = judged
    set_path = tmp_path / "set.jsonl"
    write_set(items, set_path)
    done = run_cli("automedeval", "analyze", str(set_path), *map(str, folders), "--out", str(tmp_path / "r"),
                   "--resamples", "200")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "r" / "automedeval.json").read_text())
    assert [b["judge"] for b in result["judges"]] == ["fact-judge", "flat-judge"]
    page = (tmp_path / "r" / "automedeval.html").read_text()
    md = (tmp_path / "r" / "automedeval.md").read_text()
    assert "Judges side by side" in md and "<svg" in page and "BARTScore: not available" in md
    assert result["judges"][0]["rationale"]["items"] == 30  # the set's reference rationales were scored
    other = tmp_path / "other.jsonl"
    write_set(synthetic_set(3, seed=99)[:2], other)
    foreign = json.loads(set_path.read_text().splitlines()[0])
    foreign["id"] = "not-judged"
    other.write_text(json.dumps(foreign) + "\n")
    bad = run_cli("automedeval", "analyze", str(other), str(folders[0]), "--out", str(tmp_path / "r2"))
    assert bad.returncode == 2 and "not in the set" in bad.stderr and not (tmp_path / "r2").exists()


def test_html_report_escapes_model_names(judged, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from clinieval.benchmarks.automedeval import report

    items, folders = judged
    evil = [replace(i, responses=tuple(replace(r, model=f"<script>{r.model}</script>") for r in i.responses))
            for i in items]  # fmt: skip
    result = analyze(evil, read_judge_runs(folders), AnalysisSettings(resamples=200, rationale=False))
    report.write(result, tmp_path)
    page = (tmp_path / "automedeval.html").read_text()
    assert "<script>careful" not in page and "&lt;script&gt;careful" in page


def test_read_judge_runs_errors_name_the_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no verdicts\.jsonl"):
        read_judge_runs([tmp_path])
    (tmp_path / "verdicts.jsonl").write_text('{"item": "a"}\n')
    with pytest.raises(UserError, match=r"verdicts.jsonl:1: not a verdict"):
        read_judge_runs([tmp_path])


def test_a_written_set_reads_back_with_its_ratings_and_rationales(tmp_path: Path) -> None:
    """write_set once dropped ratings and rationales, so a converted set lost its physicians."""
    from dataclasses import replace

    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.data import load_set

    items = synthetic_set(4, seed=2)
    write_set(items, tmp_path / "s.jsonl")
    back = load_set(tmp_path / "s.jsonl")
    assert [replace(i, source="") for i in back] == [replace(i, source="") for i in items]


# --- the overlap baseline, several judges in one command, the demo --------------------------------


def test_overlap_baseline_scores_reference_word_recall() -> None:
    from clinieval.benchmarks.automedeval.judging import judge_messages
    from clinieval.benchmarks.automedeval.overlap_judge import OverlapJudge, content_words, overlap_score
    from clinieval.benchmarks.automedeval.verdict import parse_scores
    from clinieval.types import GenerationConfig, Message

    reference = "Metformin lowers glucose. Exercise helps weight loss."
    assert content_words(reference) == {
        "metformin",
        "lowers",
        "glucose",
        "exercise",
        "helps",
        "weight",
        "loss",
    }
    assert overlap_score("metformin and exercise", reference) == 1 + round(4 * 2 / 7)  # 2
    assert overlap_score(reference, reference) == 5 and overlap_score("nothing here", reference) == 1
    item = synthetic_set(1)[0]
    messages = judge_messages(item, [r.text for r in item.responses], knowledge=False)
    out = asyncio.run(OverlapJudge().generate(messages, GenerationConfig()))
    assert parse_scores(out.text, 3) == [overlap_score(r.text, item.reference) for r in item.responses]
    other = asyncio.run(OverlapJudge().generate([Message("user", "hello")], GenerationConfig()))
    assert not other.ok and "only reads the AutoMedEval judge prompt" in (other.error_message or "")


def test_judge_command_compares_several_judges_in_one_run(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.convert import write_set
    from tests.conftest import run_cli

    set_path = tmp_path / "set.jsonl"
    write_set(synthetic_set(6, seed=4), set_path)
    with FaultServer(responder=flat_judge) as server:
        cmd = ("automedeval", "judge", str(set_path), "--judge", "baseline:overlap", "--judge",
               f"openai:{server.url}@fault", "--out", str(tmp_path / "out"), "--repeats", "2",
               "--no-progress", "--no-rationale")  # fmt: skip
        done = run_cli(*cmd)
        assert done.returncode == 0, done.stderr
        asked = len(server.log.received)
        again = run_cli(*cmd)
        assert again.returncode == 0 and len(server.log.received) == asked == 12  # the rerun asked nothing
    result = json.loads((tmp_path / "out" / "automedeval.json").read_text())
    assert [b["judge"] for b in result["judges"]] == ["overlap-baseline", "fault"]
    assert result["best"] == "overlap-baseline"
    folders = sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert len(folders) == 2 and all((tmp_path / "out" / f / "verdicts.jsonl").is_file() for f in folders)


def test_demo_runs_end_to_end_with_an_embedded_judge(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    done = run_cli("automedeval", "demo", "--out", str(tmp_path), "--items", "2", "--repeats", "1",
                   "--judge", "llamacpp:smollm2-135m-instruct", "--judge", "baseline:overlap",
                   "--no-progress", timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "automedeval.json").read_text())
    assert [b["judge"] for b in result["judges"]] == ["smollm2-135m-instruct", "overlap-baseline"]
    assert result["warnings"][0].startswith("These numbers are on clinieval's synthetic")
    assert any("not credible" in w for w in result["warnings"])  # the tiny judge is labelled
    assert (tmp_path / "set.jsonl").is_file() and (tmp_path / "kb").is_dir()
    assert result["judges"][0]["verdicts"] == 2  # 2 items x 1 repeat, parsed or not


def test_the_judge_is_offered_lookups_only_when_a_base_answers_them(tmp_path: Path) -> None:
    """Without --kb the prompt once still offered [Question]: a judge that asked lost its verdict."""
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase, build_kb

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(3):
        (docs / f"d{n}.txt").write_text(f"Document {n} about labetalol dosing and blood pressure.\n")
    build_kb([docs], tmp_path / "kb")
    items = synthetic_set(2)
    without = _judge(items, flat_judge, "fault", tmp_path / "without", repeats=1)
    with_kb = _judge(
        items, flat_judge, "fault", tmp_path / "with", repeats=1, kb=KnowledgeBase(tmp_path / "kb")
    )
    systems = {name: [b["messages"][0]["content"] for b in bodies] for name, bodies in
               (("without", without), ("with", with_kb))}  # fmt: skip
    assert systems["without"] and not any("[Question]" in s for s in systems["without"])
    assert systems["with"] and all("[Question]" in s for s in systems["with"])


# --- physicians' ratings through the review app ---------------------------------------------------


def test_ratings_made_in_the_review_app_reach_the_judge_analysis(tmp_path: Path) -> None:
    """A set goes to review items, two reviewers rate in a real review database, the export's
    ratings come back into the set, and the analysis sees those two physicians and no others."""
    from dataclasses import replace

    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.review import accounts, assigning, importing, reviewing, store
    from tests.conftest import run_cli

    unrated = [replace(i, responses=tuple(replace(r, ratings={}) for r in i.responses))
               for i in synthetic_set(4, seed=5)]  # fmt: skip
    write_set(unrated, tmp_path / "set.jsonl")
    items_path = tmp_path / "items.jsonl"
    done = run_cli("automedeval", "review-items", str(tmp_path / "set.jsonl"), "--out", str(items_path))
    assert done.returncode == 0, done.stderr
    db = str(tmp_path / "review.sqlite")
    engine = store.init_db(db)
    for name in ("ann", "bob"):
        accounts.add_user(engine, name, "reviewer", f"{name}-password-1")
    from clinieval.review.items import read_items

    importing.import_items(engine, "auto", "rate", None, read_items(items_path))
    assigning.assign(engine, "auto", per_item=2, seed=0)
    # ann rates the first answer shown (a1) 5 on every scale and the others 2; bob gives 4 and 1
    given = {"ann": (5, 2), "bob": (4, 1)}
    for name, (top, low) in given.items():
        who = accounts.verify_user(engine, name, f"{name}-password-1")
        assert who is not None
        for entry in reviewing.reviewer_queue(engine, who):
            scales = ("relevancy", "fluency", "correctness")
            payload = {
                "answers": {k: dict.fromkeys(scales, top if k == "a1" else low) for k in ("a1", "a2", "a3")}
            }
            reviewing.save(engine, entry.id, who, payload, 0, submit=True)
    exported = run_cli("review", "export", "--db", db, "--study", "auto", str(tmp_path / "export"))
    assert exported.returncode == 0, exported.stderr
    export = tmp_path / "export"
    back = run_cli("automedeval", "review-ratings", str(tmp_path / "set.jsonl"), str(export / "ratings.csv"),
                   "--out", str(tmp_path / "rated.jsonl"))  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert "24 ratings added to 4 items" in back.stdout  # 4 items x 3 answers x 2 reviewers
    rated = load_set(tmp_path / "rated.jsonl")
    for item, before in zip(rated, unrated, strict=True):
        first, *others = item.responses
        assert item.models == before.models  # each answer keeps its model and its place
        assert first.human_score() == pytest.approx((5 + 4) / 2)
        assert all(r.human_score() == pytest.approx((2 + 1) / 2) for r in others)
        assert all(set(r.ratings) == {"ann", "bob"} for r in item.responses)
    wrong = export / "responses.jsonl"
    bad = run_cli("automedeval", "review-ratings", str(tmp_path / "set.jsonl"), str(wrong),
                  "--out", str(tmp_path / "x.jsonl"))  # fmt: skip
    assert bad.returncode == 2 and "relevancy" in bad.stderr and not (tmp_path / "x.jsonl").exists()
