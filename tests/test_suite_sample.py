"""``clinieval suite sample`` (issue 39): a seeded clinician sample of a finished suite's judged
items, as blinded review studies, and the clinicians' ratings read back.

The suite is real and cheap: MedAlign (its synthetic set) and EHRNoteQA (a small inline set) over
two models on local OpenAI-compatible servers (tests/fault_server.py) whose answers name the
model and say GOOD or BAD by item, judged by a scripted third server. ``suite run`` and ``suite
sample`` run as a user runs them; the reviews are submitted through the review app's own forms
(its ASGI app through FastAPI's TestClient) by scripted clinicians with a known rule, and
:func:`~clinieval.suite.clinicians.read_clinicians` must return exactly the rule's scores, from
the database and from every form of the export.
"""

from __future__ import annotations

import csv
import html
import json
import re
import statistics
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from clinieval.errors import UserError
from clinieval.records.runs import RunDir
from clinieval.review import accounts, assigning, store
from clinieval.review.app import create_app
from clinieval.review.db import Answer, Item, Study, User, read_session
from clinieval.review.items import AnswerIn, ReviewItem
from clinieval.suite.clinicians import read_clinicians
from clinieval.suite.sample_design import SampleDesign, design_path, draw, read_design
from clinieval.suite.sample_plan import _ratings_needed
from tests.conftest import run_cli
from tests.fault_server import FaultServer
from tests.suite_helpers import run_suite_file

MODELS = {"zephyrine": "Larkspur-9B-chat", "quokkalm": "orbweaver-70b"}
"""The suite's names and the names their servers serve them under: neither may reach a reviewer."""
JUDGE_MARK = "XYZZY-JUDGE-RATIONALE"
"""In every MedAlign verdict: a reviewer must never see a judge's words."""
PASSWORD = "pass-word-123"
ARMS = {"medalign": "keep-recent", "ehrnoteqa": "mc"}
NOTES = ["DISCHARGE SUMMARY\nDIAGNOSIS: atrial fibrillation.", "DISCHARGE SUMMARY\nDIAGNOSIS: pneumonia."]
QA_PATIENTS = ("p0", "p0", "p0", "p1", "p2", "p2", "p3", "p3")
"""EHRNoteQA's questions by patient: one patient has three, one a single question."""


def verdict(model: str, prompt: str) -> str:
    """A model's answer: GOOD or BAD by item and model, and the model naming itself."""
    good = zlib.crc32(f"{model}|{prompt}".encode()) % 3 != 0
    return f"As {MODELS[model]} ({model}) I find this {'GOOD' if good else 'BAD'}."


def judge(prompt: str) -> str:
    """The scripted judge: a 1/0 verdict that is not the clinicians' rule (it reads nothing)."""
    bad = zlib.crc32(prompt.encode()) % 2 == 0
    if "C3" in prompt:  # MedAlign's rubric
        return json.dumps({"rationale": JUDGE_MARK, "C1": False, "C2": False, "C3": bad, "score": 3})
    return "No." if bad else "Yes."


def write_qa(path: Path) -> Path:
    items = [
        {
            "id": f"q{i}",
            "patient_id": pid,
            "question": f"Which drug was the patient discharged on? ({i})",
            "choices": ["Aspirin", "Metoprolol", "Heparin", f"Warfarin {i} mg", "Amoxicillin"],
            "answer": "B",
            "notes": [NOTES[i % 2]],
        }
        for i, pid in enumerate(QA_PATIENTS)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Suite:
    run: Path
    folder: Path

    def patients(self, benchmark: str) -> dict[str, str]:
        """Item -> patient, from the data files the suite read."""
        if benchmark == "ehrnoteqa":
            return {f"q{i}": p for i, p in enumerate(QA_PATIENTS)}
        with (self.folder / "medalign" / "instructions.csv").open(encoding="utf-8") as f:
            return {r["instruction_id"]: r["person_id"] for r in csv.DictReader(f)}

    def answers(self, benchmark: str) -> dict[str, dict[str, str]]:
        """Each model's answer text per item, read from its cell's run folder (not the review)."""
        out: dict[str, dict[str, str]] = {}
        for model in MODELS:
            run = RunDir.open(self.run / benchmark / model / ARMS[benchmark])
            out[model] = {r.sample.id: r.output.text for r in run.records() if r.output is not None}
        return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """The finished suite (both benchmarks x both models, judged twice), built once."""
    from clinieval.benchmarks.medalign.synth import build_synthetic_set

    folder = tmp_path_factory.mktemp("suite-sample")
    build_synthetic_set(folder / "medalign", patients=4, per_patient=2)
    write_qa(folder / "qa.jsonl")
    servers = {
        m: FaultServer(responder=lambda p, m=m: verdict(m, p), model_fields={"id": MODELS[m]})  # type: ignore[misc]
        for m in MODELS
    }
    with servers["zephyrine"] as z, servers["quokkalm"] as q, FaultServer(responder=judge) as j:
        run = run_suite_file(
            folder,
            [
                'title = "Calibration Test"',
                "[models]",
                *(f'{m} = "openai:{s.url}@{MODELS[m]}"' for m, s in (("zephyrine", z), ("quokkalm", q))),
                "[judge]",
                f'model = "openai:{j.url}@fault"',
                "repeats = 2",
                "[endpoints]",
                "retries = 0",
                "timeout = 30",
                "[benchmarks.medalign]",
                'data = "medalign"',
                'tokenizer = "tiktoken:cl100k_base"',
                "max_context = 1024",
                "max_tokens = 16",
                "snippets = 1",
                "judge_max_tokens = 64",
                "[benchmarks.ehrnoteqa]",
                'data = "qa.jsonl"',
                "loglik = false",
                "max_tokens = 16",
            ],
        )
    yield Suite(run, folder)


def new_db(path: Path, reviewers: tuple[str, ...] = ("ann", "bob")) -> str:
    engine = store.init_db(path)
    for name in reviewers:
        accounts.add_user(engine, name, "reviewer", PASSWORD)
    accounts.add_user(engine, "boss", "admin", PASSWORD)
    engine.dispose()
    return str(path)


def sample(suite: Suite, db: str, *args: str) -> Any:
    return run_cli("suite", "sample", str(suite.run), "--review", db, *args)


def studies(db: str) -> dict[str, dict[str, Any]]:
    """Each study's kind, config and items (key -> answer key -> (model, text)), as stored."""
    engine = store.connect(db)
    out: dict[str, dict[str, Any]] = {}
    with read_session(engine) as s:
        for study in s.scalars(select(Study)).all():
            items = {}
            for item in s.scalars(select(Item).where(Item.study_id == study.id)).all():
                answers = s.scalars(select(Answer).where(Answer.item_id == item.id)).all()
                items[item.key] = {a.key: (a.source, a.text) for a in answers}
            out[study.name] = {"kind": study.kind, "config": study.config, "items": items}
    engine.dispose()
    return out


# --- the scripted clinicians, through the review app's forms ------------------------------------------


def csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token"
    return found.group(1)


def shown_answers(page: str) -> dict[str, str]:
    """Answer letter -> the text the reviewer's page shows."""
    found = re.findall(r'id="answer-text-([A-Z]+)" class="answer-text">(.*?)</div>', page, re.S)
    return {letter: html.unescape(text) for letter, text in found}


Rule = Callable[[str, str, dict[str, str]], dict[str, Any]]
"""(reviewer, item key, {letter: the text shown}) -> the form's fields for those answers."""


def correctness(flip: tuple[str, str] | None = None) -> Rule:
    """Correct when the answer says GOOD; ``flip`` (reviewer, item) marks the opposite there."""

    def fields(reviewer: str, item: str, answers: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for letter, text in answers.items():
            good = ("GOOD" in text) != ((reviewer, item) == flip)
            out[f"correct-{letter}"] = "correct" if good else "incorrect"
            if not good:
                out[f"reasons-{letter}"] = ["C2"]
                out[f"rationale-{letter}"] = "not what the record says"
        return out

    return fields


def ranking(reviewer: str, item: str, answers: dict[str, str]) -> dict[str, Any]:
    """GOOD answers share rank 1, BAD ones come after them; each marked as the correctness rule."""
    goods = sum("GOOD" in t for t in answers.values())
    out = correctness()(reviewer, item, answers)
    for letter, text in answers.items():
        out[f"rank-{letter}"] = "1" if "GOOD" in text else str(goods + 1)
    return out


def logged_in(client: TestClient, name: str) -> str:
    """Log ``name`` in; the session's CSRF token."""
    client.cookies.clear()
    form = client.get("/login")
    login = {"name": name, "password": PASSWORD, "csrf_token": csrf(form.text)}
    return csrf(client.post("/login", data=login).text)


def admin_pages(db: str, study: str) -> list[str]:
    """What an admin sees of a study: the study page and its disagreements."""
    engine = store.connect(db)
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        logged_in(client, "boss")
        pages = [client.get(f"/admin/studies/{study}"), client.get(f"/admin/studies/{study}/disagreements")]
    engine.dispose()
    assert [p.status_code for p in pages] == [200, 200]
    return [p.text for p in pages]


def review_all(db: str, rule: Rule, study: str) -> list[str]:
    """Every assignment of ``study`` submitted by its reviewer through the web form; the pages seen."""
    engine = store.connect(db)
    pages = []
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        for reviewer in ("ann", "bob"):
            token = logged_in(client, reviewer)
            queue = client.get("/").text
            for aid in re.findall(r'data-assignment="(\d+)"', queue):
                page = client.get(f"/a/{aid}").text
                if f"{study} — item" not in page:
                    continue
                pages.append(page)
                item = re.search(r'<span id="item-key">([^<]+)</span>', page)
                version = re.search(r'id="form-version" name="version" value="(\d+)"', page)
                assert item and version
                answers = shown_answers(page)
                data = {"csrf_token": token, "version": version.group(1), "action": "submit"}
                data |= rule(reviewer, html.unescape(item.group(1)), answers)
                done = client.post(f"/a/{aid}", data=data, follow_redirects=False)
                assert done.status_code == 303, done.text
    engine.dispose()
    return pages


def expected(
    suite: Suite, design: SampleDesign, score: Callable[[str, str, dict[str, str]], float]
) -> dict[str, Any]:
    """benchmark -> model -> item -> the rule's score of the answer in the run folder."""
    out: dict[str, Any] = {}
    for b in design.benchmarks:
        texts = suite.answers(b.benchmark)
        out[b.benchmark] = {
            m: {i: score(m, i, {o: texts[o][i] for o in MODELS}) for i in b.items} for m in MODELS
        }
    return out


# --- the tests ----------------------------------------------------------------------------------------


def test_correctness_sample_is_stratified_blinded_and_read_back(suite: Suite, tmp_path: Path) -> None:
    db = new_db(tmp_path / "review.db")
    done = sample(suite, db, "--n", "3", "--seed", "1")
    assert done.returncode == 0, done.stderr
    design = read_design(design_path(suite.run, "sample"))
    assert (design.seed, design.n, design.kind) == (1, 3, "correctness")
    stored = studies(db)
    assert set(stored) == {"calibration-test-medalign-calibration", "calibration-test-ehrnoteqa-calibration"}
    for b in design.benchmarks:
        assert b.binary and b.models == tuple(MODELS) and b.eligible == 8
        assert b.judged == {m: 8 for m in MODELS}
        # whole patients (as the data files say) until at least n items: the last one kept whole
        of = suite.patients(b.benchmark)
        assert {i for i, p in of.items() if p in b.patients} == set(b.items)
        assert {of[i] for i in b.items} == set(b.patients) and b.patient_of == {i: of[i] for i in b.items}
        assert 3 <= len(b.items) < 3 + max(Counter(of.values()).values())
        study = stored[b.study]
        assert (study["kind"], study["config"]["rank"]) == ("rank", False)
        # stratified: the same items, each with every model's answer under a blind key
        assert sorted(study["items"]) == sorted(b.items)
        for item, answers in study["items"].items():
            assert sorted(src for src, _ in answers.values()) == sorted(MODELS)
            assert {k: src for k, (src, _) in answers.items()} == b.answers[item]
            for _, text in answers.values():
                assert not any(n.lower() in text.lower() for m in MODELS for n in (m, MODELS[m])), text
                assert "[model hidden]" in text and JUDGE_MARK not in text
        recorded = study["config"]["design"]
        assert (recorded["seed"], recorded["n"], recorded["items"]) == (1, 3, list(b.items))
        assert not any(m in json.dumps(study["config"]) for m in MODELS)  # admins are blinded too
    # the same key is not the same model across items
    keys = [a["a1"] for b in design.benchmarks for a in b.answers.values()]
    assert set(keys) == set(MODELS)

    # scripted clinicians: ann marks GOOD answers correct; bob too, but flips one item
    flipped = design.benchmark("medalign").items[0]
    rule = correctness(flip=("bob", flipped))
    for b in design.benchmarks:
        assigning.assign(store.connect(db), b.study, per_item=2, seed=5)
        pages = review_all(db, rule, b.study)
        assert len(pages) == 2 * len(b.items)
        for page in [*pages, *admin_pages(db, b.study)]:
            lowered = page.lower()
            assert not any(n.lower() in lowered for m in MODELS for n in (m, MODELS[m]))
            assert JUDGE_MARK.lower() not in lowered and 'name="rank-' not in page

    def score(model: str, item: str, texts: dict[str, str]) -> float:
        good = "GOOD" in texts[model]
        return 0.5 if item == flipped else float(good)

    want = expected(suite, design, score)
    ratings = read_clinicians(db, design)
    assert ratings.kind == "correctness" and ratings.scale == (0.0, 1.0)
    assert ratings.scores == want
    assert ratings.unreviewed == {"medalign": 0, "ehrnoteqa": 0}
    assert all(n == 2 for b in ratings.reviewers.values() for n in b.values())

    # the export, in each of its forms, reads the same
    for b in design.benchmarks:
        out = tmp_path / f"export-{b.benchmark}"
        exported = run_cli("review", "export", "--db", db, "--study", b.study, str(out))
        assert exported.returncode == 0, exported.stderr
        for source in (out, out / "responses.jsonl", out / "ranks.csv"):
            got = read_clinicians(source, design)
            assert got.scores == {b.benchmark: want[b.benchmark]}, source
        bare = tmp_path / f"bare-{b.benchmark}.csv"
        bare.write_text((out / "ranks.csv").read_text(encoding="utf-8"), encoding="utf-8")
        assert read_clinicians(bare, design).scores == {b.benchmark: want[b.benchmark]}  # found by its items

    # the same command again adds nothing and keeps the design; another draw into it is refused
    before = design_path(suite.run, "sample").read_bytes()
    again = sample(suite, db, "--n", "3", "--seed", "1")
    assert again.returncode == 0, again.stderr
    assert "0 item(s) added" in again.stdout and design_path(suite.run, "sample").read_bytes() == before
    other = sample(suite, db, "--n", "3", "--seed", "2")
    assert (
        other.returncode == 2 and "was drawn with seed 1, n 3, correctness; this asks seed 2" in other.stderr
    )
    assert design_path(suite.run, "sample").read_bytes() == before

    # a pilot: the plan from these ratings, and from a stated correlation
    planned = run_cli("suite", "sample", str(suite.run), "--plan", "0.3", "--pilot", db)
    assert planned.returncode == 0, planned.stderr
    assert "from the pilot sample 'sample'" in planned.stdout
    assert (
        len([line for line in planned.stdout.splitlines() if line.startswith(("medalign", "ehrnoteqa"))]) == 4
    )


def test_same_seed_same_sample_other_seed_other_sample(suite: Suite, tmp_path: Path) -> None:
    db = new_db(tmp_path / "review.db", reviewers=())
    for name, seed in (("one", "7"), ("two", "7"), ("three", "8")):
        done = sample(suite, db, "--n", "3", "--seed", seed, "--study", name)
        assert done.returncode == 0, done.stderr
    one, two, three = (read_design(design_path(suite.run, n)) for n in ("one", "two", "three"))
    assert [b.items for b in one.benchmarks] == [b.items for b in two.benchmarks]
    assert [b.answers for b in one.benchmarks] == [b.answers for b in two.benchmarks]
    assert [b.items for b in one.benchmarks] != [b.items for b in three.benchmarks]
    assert set(studies(db)) == {
        f"{n}-{b}" for n in ("one", "two", "three") for b in ("medalign", "ehrnoteqa")
    }
    # the draw: nested in n, every seed a reordering of whole patients
    of = dict(zip([f"q{i}" for i in range(8)], QA_PATIENTS, strict=True))
    small, large = draw(list(of), of, 2, 3, "x"), draw(list(of), of, 6, 3, "x")
    assert large[1][: len(small[1])] == small[1]
    assert len({tuple(draw(list(of), of, 2, s, "x")[0]) for s in range(20)}) > 1


def test_ranking_sample_reads_win_shares(suite: Suite, tmp_path: Path) -> None:
    db = new_db(tmp_path / "review.db")
    done = sample(suite, db, "--n", "2", "--seed", "4", "--kind", "ranking", "--study", "ranked")
    assert done.returncode == 0, done.stderr
    design = read_design(design_path(suite.run, "ranked"))
    stored = studies(db)
    for b in design.benchmarks:
        assert stored[b.study]["kind"] == "rank" and stored[b.study]["config"]["ties"] is True
        assert "rank" not in stored[b.study]["config"]  # a ranking is asked
        assigning.assign(store.connect(db), b.study, per_item=2, seed=5)
        pages = review_all(db, ranking, b.study)
        assert pages and all('name="rank-A"' in p for p in pages)

    def share(model: str, item: str, texts: dict[str, str]) -> float:
        mine = "GOOD" in texts[model]
        others = ["GOOD" in t for m, t in texts.items() if m != model]
        return statistics.fmean(1.0 if mine > o else 0.5 if mine == o else 0.0 for o in others)

    ratings = read_clinicians(db, design)
    assert ratings.kind == "ranking" and ratings.scores == expected(suite, design, share)
    # read as the correctness sample drawn into another study, this database is one clear error
    with pytest.raises(UserError, match="has no study 'other-medalign'"):
        read_clinicians(db, replace(design, name="other", benchmarks=tuple(
            replace(b, study=f"other-{b.benchmark}") for b in design.benchmarks
        )))  # fmt: skip
    with pytest.raises(UserError, match="a rank study, not the correctness study"):
        read_clinicians(db, replace(design, kind="correctness"))


def test_bad_sources_are_one_clear_error(suite: Suite, tmp_path: Path) -> None:
    db = new_db(tmp_path / "review.db", reviewers=())
    assert sample(suite, db, "--n", "2", "--study", "bad").returncode == 0
    design = read_design(design_path(suite.run, "bad"))
    empty = new_db(tmp_path / "empty.db", reviewers=())
    with pytest.raises(UserError, match=r"has no study 'bad-medalign'"):
        read_clinicians(empty, design)
    export = tmp_path / "export"
    export.mkdir()
    (export / "study.json").write_text(
        json.dumps(
            {"format": "clinieval-review-export/1", "study": "someone-else", "kind": "rank", "config": {}}
        ),
        encoding="utf-8",
    )
    (export / "responses.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(UserError, match=r"an export of study 'someone-else', not one of sample 'bad'"):
        read_clinicians(export, design)
    stray = tmp_path / "stray.csv"
    stray.write_text("item,reviewer,model,rank,correct\nnot-an-item,ann,zephyrine,,true\n", encoding="utf-8")
    with pytest.raises(UserError, match="item not-an-item is not in sample 'bad'"):
        read_clinicians(stray, design)
    item = design.benchmark("medalign").items[0]
    other = tmp_path / "other.csv"
    other.write_text(f"item,reviewer,model,rank,correct\n{item},ann,someone,,true\n", encoding="utf-8")
    with pytest.raises(UserError, match=f"item {item} has no answer from someone"):
        read_clinicians(other, design)
    # the command's own mistakes
    no_n = run_cli("suite", "sample", str(suite.run), "--review", db)
    assert no_n.returncode == 2 and "--plan WIDTH" in no_n.stderr
    taken = sample(suite, db, "--n", "2", "--study", "bad", "--kind", "rating")
    assert taken.returncode == 2 and "rating" in taken.stderr and "--study" in taken.stderr


def test_plan_with_a_stated_correlation(suite: Suite) -> None:
    """sd is sqrt(p(1-p)) with p each model's judge mean (the leaderboard's number, read apart)."""
    report = run_cli("suite", "report", str(suite.run))
    assert report.returncode == 0, report.stderr
    board = json.loads((suite.run / "report" / "leaderboard.json").read_text(encoding="utf-8"))
    means = {(b["name"], s["model"]): s["mean"] for b in board["benchmarks"] for s in b["scores"]}
    done = run_cli("suite", "sample", str(suite.run), "--plan", "0.25", "--assume-rho", "0.7")
    assert done.returncode == 0, done.stderr
    assert "correctness scale (0-1); rho 0.7 as stated" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("medalign", "ehrnoteqa"))]
    assert sorted((r[0], r[1]) for r in rows) == sorted(means)
    for bench, model, judged, sd, rho, ppi, alone in rows:
        p = means[(bench, model)]
        assert (judged, rho) == ("8", "0.70") and float(sd) == pytest.approx((p * (1 - p)) ** 0.5, abs=5e-4)
        want = [_ratings_needed(0.25, sd=(p * (1 - p)) ** 0.5, rho=r, judged=8) for r in (0.7, 0.0)]
        assert [int(ppi.rstrip("*")), int(alone.rstrip("*"))] == want
        assert want[0] <= want[1]
    neither = run_cli("suite", "sample", str(suite.run), "--plan", "0.25")
    assert neither.returncode == 2 and "--pilot DB_OR_EXPORT or --assume-rho R" in neither.stderr


def test_ratings_needed_is_ppis_count_and_marks_what_is_out_of_reach() -> None:
    from clinieval.analysis.ppi import ratings_needed

    assert _ratings_needed(0.1, sd=0.5, rho=0.0, judged=1000) == 385  # (2 * 1.96 / 0.1)^2 / 4 = 384.1
    for rho, judged in ((0.8, 1000), (0.5, 500), (0.95, 10_000)):
        n = _ratings_needed(0.1, sd=0.5, rho=rho, judged=judged)
        assert n == ratings_needed(0.1, sd=0.5, rho=rho, judged=judged) and n <= 385
    assert _ratings_needed(0.1, sd=0.5, rho=0.8, judged=1000) < 200
    # rating all 50 judged items cannot give 0.1: the clinicians-alone count, above 50, marks it
    assert _ratings_needed(0.1, sd=0.5, rho=0.5, judged=50) == 385
    assert _ratings_needed(0.1, sd=0.0, rho=0.5, judged=50) == 2
    with pytest.raises(UserError, match="positive"):
        _ratings_needed(0.0, sd=0.5, rho=0.5, judged=10)
    with pytest.raises(UserError, match="between -1 and 1"):
        _ratings_needed(0.1, sd=0.5, rho=1.5, judged=10)


def test_a_correctness_study_asks_no_rank_and_takes_one_answer(tmp_path: Path) -> None:
    from clinieval.review.importing import import_items
    from clinieval.review.study_kinds import get_kind

    kind = get_kind("rank")
    assert kind.config({"rank": True}) == {"ties": False}  # studies made before the key compare equal
    config = kind.config({"rank": False, "design": {"seed": 1}})
    assert config == {"ties": False, "rank": False, "design": {"seed": 1}}
    one = ReviewItem("i1", "Q?", answers=(AnswerIn("a1", "m", "text"),))
    engine = store.init_db(tmp_path / "r.db")
    assert import_items(engine, "c", "rank", config, [one]).added == 1
    with pytest.raises(UserError, match="a rank study needs at least 2 answers"):
        import_items(engine, "r", "rank", {}, [one])
    ok = kind.validate({"answers": {"a1": {"correct": True}}}, one, config)
    assert ok["answers"]["a1"]["rank"] is None
    with pytest.raises(UserError, match="asks only whether each answer is correct"):
        kind.validate({"answers": {"a1": {"correct": True, "rank": 1}}}, one, config)
    assert [m.key for m in kind.measures(config)] == ["correct"]
    # the reviewer's queue says what the study asks (it said "Rank answers")
    from clinieval.review.accounts import add_user
    from clinieval.review.assigning import assign
    from clinieval.review.web.data import queue

    user = add_user(engine, "ann", "reviewer", PASSWORD)
    assign(engine, "c", 1, 0, ["ann"])
    assert [(q.name, q.label) for q in queue(engine, user.id)] == [("c", "Mark answers correct")]
    assert kind.title({}) == "Rank answers"
    with pytest.raises(UserError, match="'design' should be an object"):
        kind.config({"design": [1]})


def test_rating_scores_read_back_on_their_scale(tmp_path: Path) -> None:
    """A graded judge's sample is a rate study; its 1-5 scores come back per model, averaged over
    reviewers, from the database and from the export's ratings.csv (no suite needed: the design
    and the study are made as `suite sample` makes them)."""
    from clinieval.review import reviewing
    from clinieval.review.importing import import_items
    from clinieval.suite.sample_design import BenchmarkSample, review_study

    b = BenchmarkSample(
        benchmark="bench",
        study="graded-bench",
        models=("m1", "m2"),
        judged={"m1": 3, "m2": 3},
        eligible=3,
        patients=("p1", "p2"),
        items=("i1", "i2"),
        patient_of={"i1": "p1", "i2": "p2"},
        answers={"i1": {"a1": "m2", "a2": "m1"}, "i2": {"a1": "m1", "a2": "m2"}},
        binary=False,
    )
    design = SampleDesign("graded", 3, 2, "rating", "now", "t", (b,))
    kind, config = review_study("rating")
    assert (kind, [s["name"] for s in config["scales"]]) == ("rate", ["correctness"])
    db = new_db(tmp_path / "r.db")
    engine = store.connect(db)
    items = [
        ReviewItem(i, f"question {i}", answers=tuple(AnswerIn(k, m, f"answer {k}") for k, m in a.items()))
        for i, a in b.answers.items()
    ]
    import_items(engine, b.study, kind, {**config, "design": design.study_design("bench")}, items)
    assigning.assign(engine, b.study, per_item=2, seed=0)
    given = {("ann", "m1"): 5, ("ann", "m2"): 2, ("bob", "m1"): 4, ("bob", "m2"): 2}
    for name in ("ann", "bob"):
        with read_session(engine) as session:
            user = session.scalars(select(User.id).where(User.name == name)).one()
        for entry in reviewing.reviewer_queue(engine, user):
            keyed = b.answers[entry.item]
            payload = {"answers": {k: {"correctness": given[(name, m)]} for k, m in keyed.items()}}
            reviewing.save(engine, entry.id, user, payload, entry.version, submit=True)
    want = {"bench": {"m1": {"i1": 4.5, "i2": 4.5}, "m2": {"i1": 2.0, "i2": 2.0}}}
    ratings = read_clinicians(db, design)
    assert (ratings.kind, ratings.scale, ratings.scores) == ("rating", (1.0, 5.0), want)
    out = tmp_path / "export"
    assert run_cli("review", "export", "--db", db, "--study", b.study, str(out)).returncode == 0
    assert read_clinicians(out / "ratings.csv", design).scores == want
    engine.dispose()
