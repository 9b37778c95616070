"""The review app as a clinician and an admin use it (issue 26, items 6-10).

* Items built from runs carry the record the model was asked about: real runs (``clinieval run``
  over a local OpenAI-compatible server) go through every path into a study (``automedeval
  convert`` then ``review import``, the README's path; ``automedeval review-items``; the run
  folders themselves), and each item's page shows the record.
* The queue previews each question (escaped, cut at about 120 characters), says what the reviewer
  does in plain words, counts what is done, points at where to start, and keeps the data's order.
* The admin's agreement panel is one readable table per scale or label set (value, 95 % CI, units,
  reviewers, a band in words), says in words why a number is missing, and links to the items where
  reviewers differ most, their values side by side and no model named.
* ``review import`` reads a first line of any length, takes an existing study's kind when
  ``--kind`` is left out (and refuses a different one clearly), and calls an empty file empty.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from typer.testing import CliRunner

from clinieval.analysis import agreement as stats
from clinieval.benchmarks.automedeval.data import load_set
from clinieval.cli.review import review_app
from clinieval.errors import UserError
from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.app import create_app
from clinieval.review.items import AnswerIn, ReviewItem
from tests.conftest import run_cli
from tests.fault_server import FaultServer

PASSWORDS = {"admin": "admin-pass-2026", "ann": "ann-pass-2026", "bob": "bob-pass-2026"}

# --- runs whose samples carry a record ---------------------------------------------------------------

RECORDS = {
    "q1": "ADMISSION NOTE 2026-05-02\nAtrial fibrillation, CHA2DS2-VASc 4.\n"
    "Medications: apixaban 5 mg twice daily; metoprolol 25 mg daily.\n",
    "q2": "CLINIC NOTE 2026-04-18\nType 2 diabetes.\nHbA1c 7.1 % (2026-01-10), 7.9 % (2026-05-02).\n",
}
QUESTIONS = {"q1": "What anticoagulant is the patient taking?", "q2": "What was the last HbA1c?"}
TARGETS = {"q1": "Apixaban 5 mg twice daily.", "q2": "7.9 % on 2 May 2026."}
RUN_MODELS = ("model-alpha", "model-beta")


def make_runs(folder: Path) -> list[Path]:
    """Two real runs of the same two samples, each sample's record in ``context``, one answer per
    run from a local server (one model name per run, as two arms would have)."""
    data = folder / "samples.jsonl"
    rows = [{"id": k, "input": QUESTIONS[k], "context": RECORDS[k], "target": TARGETS[k]} for k in QUESTIONS]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    runs: list[Path] = []
    for model in RUN_MODELS:

        def answer(prompt: str, model: str = model) -> str:
            first = model == RUN_MODELS[0]
            if "anticoagulant" in prompt:
                return "Apixaban." if first else "Apixaban 5 mg twice daily, for atrial fibrillation."
            return "7.9 %." if first else "HbA1c 7.9 % on 2 May 2026."

        with FaultServer(responder=answer, model_fields={"id": model}) as server:
            out = folder / f"run-{model}"
            done = run_cli("run", str(data), "-m", f"openai:{server.url}@{model}", "--out", str(out),
                           "--no-progress", "--scorer", "answered", "--concurrency", "1")  # fmt: skip
            assert done.returncode == 0, done.stderr
            runs.append(out)
            # the record is what the model was asked about
            assert any("apixaban 5 mg twice daily" in p for p in server.log.received)
    return runs


def ok(*args: str | Path) -> str:
    done = run_cli(*map(str, args))
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


# --- a review database and logged-in clients ----------------------------------------------------------


def review_db(path: Path) -> Engine:
    engine = store.init_db(path)
    for name, password in PASSWORDS.items():
        accounts.add_user(engine, name, "admin" if name == "admin" else "reviewer", password)
    return engine


def token(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found.group(1)


@pytest.fixture
def clients() -> Iterator[list[TestClient]]:
    made: list[TestClient] = []
    yield made
    for c in made:
        c.close()


def logged_in(engine: Engine, name: str, made: list[TestClient]) -> tuple[TestClient, str]:
    client = TestClient(create_app(engine), base_url="http://127.0.0.1")
    made.append(client)
    form = client.get("/login")
    page = client.post(
        "/login", data={"name": name, "password": PASSWORDS[name], "csrf_token": token(form.text)}
    )
    assert page.status_code == 200, page.text
    return client, token(page.text)


def uid(engine: Engine, name: str) -> int:
    return next(u.id for u in accounts.list_users(engine) if u.name == name)


def record_text(page: str) -> str:
    found = re.search(r'<pre id="record-text">(.*?)</pre>', page, re.S)
    assert found, "no record in the page"
    return html.unescape(found.group(1))


# --- 6: records travel with items built from runs ------------------------------------------------------


def test_records_travel_with_items_built_from_runs(tmp_path: Path, clients: list[TestClient]) -> None:
    runs = make_runs(tmp_path)
    judge_set = tmp_path / "set.jsonl"
    ok("automedeval", "convert", *runs, "--out", judge_set)
    assert [x.context for x in load_set(judge_set)] == [RECORDS["q1"], RECORDS["q2"]]
    items_file = tmp_path / "items.jsonl"
    ok("automedeval", "review-items", judge_set, "--out", items_file)
    db = tmp_path / "review.sqlite"
    engine = review_db(db)
    studies = {"from-set": "rate", "from-items": "rate", "from-runs": "rank"}
    ok("review", "import", judge_set, "--study", "from-set", "--db", db)  # the README's path
    ok("review", "import", items_file, "--study", "from-items", "--kind", "rate", "--db", db)
    ok("review", "import", *runs, "--study", "from-runs", "--db", db)  # the run folders themselves
    for study in studies:
        assigning.assign(engine, study, per_item=1, seed=0, reviewers=["ann"])
    client, _ = logged_in(engine, "ann", clients)
    pages = 0
    for entry in reviewing.reviewer_queue(engine, uid(engine, "ann")):
        page = client.get(f"/a/{entry.id}")
        assert page.status_code == 200
        assert "No record is attached" not in page.text, (entry.study, entry.item)
        assert record_text(page.text) == RECORDS[entry.item], (entry.study, entry.item)
        assert QUESTIONS[entry.item] in html.unescape(page.text)
        assert entry.kind == studies[entry.study]
        pages += 1
    assert pages == 6


# --- 7: the queue -----------------------------------------------------------------------------------------

LONG_PROMPT = (
    "A 67-year-old on warfarin <script>alert(1)</script> has an INR of 4.2 and no bleeding; "
    "what should be done today, and when should the INR be checked again? Consider the dose history."
)


def queue_items() -> dict[tuple[str, str], list[ReviewItem]]:
    answers = (AnswerIn("a1", "model-x", "Hold a dose."), AnswerIn("a2", "model-y", "Give vitamin K."))
    rate = [
        ReviewItem(
            item=f"t{i:02d}", prompt=LONG_PROMPT if i == 1 else f"Question number {i}?", answers=answers
        )
        for i in range(1, 8)
    ]
    question = [
        ReviewItem(
            item="g01",
            prompt="Review this generated question",
            fields={"question": "Which anticoagulant was the patient taking at discharge?",
                    "options": ["Warfarin", "Apixaban"], "answer": "B"},
        )
    ]  # fmt: skip
    return {("automedeval-pilot", "rate"): rate, ("ehrnoteqa-build", "question"): question}


def test_the_queue_previews_counts_and_says_where_to_start(tmp_path: Path, clients: list[TestClient]) -> None:
    engine = review_db(tmp_path / "review.sqlite")
    for (study, kind), items in queue_items().items():
        importing.import_items(engine, study, kind, None, items)
        assigning.assign(engine, study, per_item=1, seed=3, reviewers=["ann"])
    ann = accounts.verify_user(engine, "ann", PASSWORDS["ann"])
    assert ann is not None
    entries = {e.item: e for e in reviewing.reviewer_queue(engine, ann)}
    done = {"answers": {"a1": {"relevancy": 4, "fluency": 4, "correctness": 4},
                        "a2": {"relevancy": 2, "fluency": 3, "correctness": 1}}}  # fmt: skip
    reviewing.save(engine, entries["t01"].id, ann, done, 0, submit=True)
    reviewing.save(engine, entries["t02"].id, ann, done, 0, submit=True)
    reviewing.save(engine, entries["t04"].id, ann, {"answers": {}}, 0, submit=False)
    client, _ = logged_in(engine, "ann", clients)
    page = client.get("/").text

    # the data's order (import order), not the assignment's shuffled one
    keys = re.findall(
        r'<tr class="queue-row[^"]*" data-assignment="\d+" data-status="\w+" data-item="([^"]+)"', page
    )
    assert keys == [f"t{i:02d}" for i in range(1, 8)] + ["g01"], keys  # studies by name
    # a preview of each question, escaped and cut near 120 characters
    previews = [html.unescape(p) for p in re.findall(r'<td class="queue-preview">(.*?)</td>', page, re.S)]
    long = next(p for p in previews if p.startswith("A 67-year-old"))
    assert long.endswith("…") and 100 <= len(long) <= 122 and LONG_PROMPT.startswith(long[:-1].rstrip())
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "Question number 5?" in previews
    assert "Which anticoagulant was the patient taking at discharge?" in previews  # a question's own text
    # plain words, no version column
    assert "Version" not in page and ">rate<" not in page and ">question<" not in page
    assert "Rate answers" in page and "Review a generated question" in page
    # progress: done / total, overall and per study
    assert re.search(r'id="queue-progress"[^>]*>.*?2 of 8 submitted', page, re.S)
    assert "2 of 7 submitted" in page and "0 of 1 submitted" in page
    # where to start: the first unfinished item in the list, highlighted, and a button to it
    first_open = entries["t03"].id
    row = re.search(r'<tr class="queue-row next-up"[^>]*data-assignment="(\d+)"', page)
    assert row and int(row.group(1)) == first_open
    assert page.count("next-up") == 2  # one per study: each study's first unfinished item
    button = re.search(
        r'<a class="button start-button" id="start-automedeval-pilot" href="/a/(\d+)">([^<]+)</a>', page
    )
    assert button and int(button.group(1)) == first_open and button.group(2) == "Continue"
    fresh = re.search(r'id="start-ehrnoteqa-build" href="/a/(\d+)">([^<]+)</a>', page)
    assert fresh and int(fresh.group(1)) == entries["g01"].id and fresh.group(2) == "Start"


def test_kinds_have_a_plain_label_and_a_preview() -> None:
    from clinieval.review.study_kinds import KINDS

    assert {name: k.label for name, k in KINDS.items()} == {
        "rank": "Rank answers",
        "rate": "Rate answers",
        "question": "Review a generated question",
        "sentence": "Label sentence",
    }
    assert (
        KINDS["question"].preview("Review this generated question", {"question": "Which drug?"})
        == "Which drug?"
    )
    assert KINDS["rate"].preview("What dose?", {}) == "What dose?"
    assert KINDS["question"].preview("Review this", {"question": ["odd"]}) == "Review this"


# --- 8: the admin's agreement panel -------------------------------------------------------------------------

SCALES = ("relevancy", "fluency", "correctness")
# ann and bob rate the same 2 answers of 6 items. relevancy: close; fluency: every score 5 (no
# variation: alpha and the ICC are undefined); correctness: item t06 differs by 4 on one answer.
RATINGS: dict[str, dict[str, list[tuple[int, int]]]] = {
    "relevancy": {"ann": [(5, 1), (4, 2), (5, 2), (3, 1), (4, 3), (5, 1)],
                  "bob": [(5, 2), (4, 1), (4, 2), (3, 2), (5, 3), (4, 1)]},
    "fluency": {"ann": [(5, 5)] * 6, "bob": [(5, 5)] * 6},
    "correctness": {"ann": [(5, 1), (4, 2), (5, 2), (3, 1), (4, 3), (5, 1)],
                    "bob": [(5, 1), (4, 2), (5, 3), (3, 1), (4, 3), (1, 1)]},
}  # fmt: skip
RATE_TEXTS = ("Hold the next warfarin dose and recheck the INR.", "Give intravenous vitamin K now.")
SECRET_MODELS = ("SecretModelOne-70B", "SecretModelTwo-8B")


def rated_study(
    engine: Engine, reviewers: tuple[str, str] = ("ann", "bob"), models: tuple[str, str] = SECRET_MODELS
) -> None:
    """The study "rated": 6 items, 2 answers each (from ``models``), rated by ``reviewers`` as
    ann and bob in :data:`RATINGS`."""
    items = [
        ReviewItem(
            item=f"t{i:02d}",
            prompt=f"Patient {i}: INR 4.2 without bleeding. What now?",
            answers=tuple(
                AnswerIn(f"a{j}", m, t) for j, (m, t) in enumerate(zip(models, RATE_TEXTS, strict=True), 1)
            ),
        )
        for i in range(1, 7)
    ]
    importing.import_items(engine, "rated", "rate", None, items)
    assigning.assign(engine, "rated", per_item=2, seed=0, reviewers=list(reviewers))
    for name, user in zip(("ann", "bob"), reviewers, strict=True):
        who = uid(engine, user)
        for entry in reviewing.reviewer_queue(engine, who, "rated"):
            i = int(entry.item[1:]) - 1
            payload = {"answers": {f"a{j + 1}": {s: RATINGS[s][name][i][j] for s in SCALES} for j in (0, 1)}}
            reviewing.save(engine, entry.id, who, payload, 0, submit=True)


def koo_li(value: float) -> str:
    return "poor" if value < 0.5 else "moderate" if value < 0.75 else "good" if value < 0.9 else "excellent"


def cells(table: str, stat: str) -> dict[str, str]:
    row = re.search(rf'<tr class="agreement-row" data-stat="{stat}">(.*?)</tr>', table, re.S)
    assert row, f"no {stat} row"
    found = re.findall(r'<t[dh][^>]*class="(\w+)[^"]*"[^>]*>(.*?)</t[dh]>', row.group(1), re.S)
    return {k: html.unescape(re.sub(r"<[^>]+>", "", v)).strip() for k, v in found}


def test_the_agreement_panel_is_one_readable_table_per_scale(
    tmp_path: Path, clients: list[TestClient]
) -> None:
    engine = review_db(tmp_path / "review.sqlite")
    rated_study(engine)
    admin, _ = logged_in(engine, "admin", clients)
    page = admin.get("/admin/studies/rated")
    assert page.status_code == 200
    text = page.text
    for raw in ("raters_per_unit", "undefined", "scales / ", "krippendorff_alpha", " / icc"):
        assert raw not in text, raw  # no key dump
    for model in SECRET_MODELS:
        assert model not in text
    tables = dict(
        re.findall(r'<table class="agreement-table" data-measure="(\w+)">(.*?)</table>', text, re.S)
    )
    assert list(tables) == list(SCALES)
    assert "Relevancy" in tables["relevancy"] and "Knowledge correctness" in tables["correctness"]

    # relevancy: alpha and the ICC with their CIs, units, reviewers and a band in words
    units = [[RATINGS["relevancy"][n][i][j] for i in range(6) for j in (0, 1)] for n in ("ann", "bob")]
    alpha = stats.krippendorff_alpha(units, level_of_measurement="ordinal")
    icc = stats.intraclass_correlation([list(pair) for pair in zip(*units, strict=True)])["ICC2"]
    a = cells(tables["relevancy"], "alpha")
    assert a["value"] == f"{alpha:.2f}" and a["units"] == "12" and a["raters"] == "2"
    low, high = (float(x) for x in re.findall(r"-?\d\.\d\d", a["ci"]))
    assert low <= alpha <= high
    assert a["band"] == ("reliable" if alpha >= 0.8 else "tentative" if alpha >= 0.667 else "unreliable")
    i1 = cells(tables["relevancy"], "icc_single")
    assert i1["value"] == f"{icc.icc:.2f}" and i1["ci"] == f"{icc.ci_low:.2f} to {icc.ci_high:.2f}"
    assert i1["band"] == koo_li(icc.icc) and i1["units"] == "12" and i1["raters"] == "2"
    assert "ICC" in i1["name"] and cells(tables["relevancy"], "icc_average")["band"]
    # the conventions are named
    assert "Koo" in text and "Krippendorff" in text

    # fluency: every score equal; the numbers are missing and the page says why, in words
    f = cells(tables["fluency"], "alpha")
    assert f["value"] == "—" and "every rating is the same" in f["why"].lower()
    assert "no variation" in cells(tables["fluency"], "icc_single")["why"].lower()

    # each table links to the items where reviewers differ most on it
    links = re.findall(r'<a class="disagreements-link" href="([^"]+)"', text)
    assert len(links) == 3
    link = re.search(r'<a class="disagreements-link" href="([^"]+on=correctness)"', text)
    assert link and html.unescape(link.group(1)) == "/admin/studies/rated/disagreements?on=correctness"
    worst = admin.get(html.unescape(link.group(1)))
    assert worst.status_code == 200
    items = re.findall(r'<section class="disagreement" data-item="(\w+)" data-gap="(\d+)"', worst.text)
    assert items == [("t06", "4"), ("t03", "1")]  # largest gap first; items where they agree left out
    t06 = re.search(r'data-item="t06".*?</section>', worst.text, re.S)
    assert t06
    side = re.findall(r"<tr>\s*<th[^>]*>(.*?)</th>\s*<td>(\d)</td>\s*<td>(\d)</td>", t06.group(0), re.S)
    assert [(v1, v2) for _, v1, v2 in side] == [("5", "1"), ("1", "1")]  # ann, bob side by side
    assert "Hold the next warfarin dose" in html.unescape(side[0][0])
    assert re.search(r"<th[^>]*>ann</th>\s*<th[^>]*>bob</th>", t06.group(0))
    for model in SECRET_MODELS:
        assert model not in worst.text
    assert not re.search(r"\ba[12]\b", worst.text)  # nor the answer keys, which follow model order
    assert admin.get("/admin/studies/rated/disagreements?on=nope").status_code == 404
    reviewer, _ = logged_in(engine, "ann", clients)
    assert reviewer.get("/admin/studies/rated/disagreements?on=correctness").status_code == 403


# --- 10: import ---------------------------------------------------------------------------------------------


def invoke(*args: str) -> Any:
    return CliRunner().invoke(review_app, list(args))


def test_import_reads_a_first_line_of_any_length(tmp_path: Path) -> None:
    db = str(tmp_path / "review.sqlite")
    review_db(Path(db))
    long_record = "progress note line. " * 5_000  # 100,000 characters on the first line
    items = tmp_path / "items.jsonl"
    first = ReviewItem(item="q1", prompt="Summarise.", context=long_record,
                       answers=(AnswerIn("a1", "m1", "x"), AnswerIn("a2", "m2", "y")))  # fmt: skip
    items.write_text(json.dumps(first.to_json()) + "\n", encoding="utf-8")
    assert len(items.read_bytes()) > 1 << 16
    done = invoke("import", str(items), "--study", "long", "--kind", "rank", "--db", db)
    assert done.exit_code == 0, done.output
    assert "1 item(s) added" in done.output


def test_import_into_an_existing_study_takes_its_kind(tmp_path: Path) -> None:
    db = str(tmp_path / "review.sqlite")
    review_db(Path(db))
    pair = (AnswerIn("a1", "m1", "x"), AnswerIn("a2", "m2", "y"))
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    one.write_text(json.dumps(ReviewItem("q1", "p", answers=pair).to_json()) + "\n", encoding="utf-8")
    two.write_text(json.dumps(ReviewItem("q2", "p", answers=pair).to_json()) + "\n", encoding="utf-8")
    assert invoke("import", str(one), "--study", "s", "--kind", "rate", "--db", db).exit_code == 0
    again = invoke("import", str(two), "--study", "s", "--db", db)
    assert again.exit_code == 0, again.output
    assert "1 item(s) added" in again.output
    other = invoke("import", str(two), "--study", "s", "--kind", "rank", "--db", db)
    assert isinstance(other.exception, UserError)
    message = str(other.exception)
    assert (
        "study 's' is a rate study" in message and "--kind rank" in message and "leave --kind out" in message
    )
    new = invoke("import", str(two), "--study", "brand-new", "--db", db)
    assert isinstance(new.exception, UserError) and "--kind" in str(new.exception)


def test_an_empty_file_is_called_empty(tmp_path: Path) -> None:
    db = str(tmp_path / "review.sqlite")
    review_db(Path(db))
    for name, content in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n")):
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        done = invoke("import", str(path), "--study", "s", "--kind", "rate", "--db", db)
        assert isinstance(done.exception, UserError)
        assert str(done.exception) == f"{path} is empty: nothing to import"
    empty = tmp_path / "empty.jsonl"
    cli = run_cli("review", "import", str(empty), "--study", "s", "--db", db)
    assert cli.returncode == 2 and f"{empty} is empty: nothing to import" in cli.stderr
    assert "no source recognises" not in cli.stderr
