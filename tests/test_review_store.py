"""The review database and its commands on real SQLite files (and one real PostgreSQL): schema and
migrations, users, imports, assignment, optimistic saves with their audit trail, live agreement,
the export and its round trip through `clinieval analyze`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from clinieval.analysis import agreement as stats
from clinieval.analysis.rank_agreement import inter_rater_kendall
from clinieval.analysis.rankings import ScoreTable
from clinieval.cli.review import review_app
from clinieval.errors import UserError
from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.agreement import study_agreement
from clinieval.review.db import Assignment, Item, User, read_session
from clinieval.review.export import export_study
from clinieval.review.items import AnswerIn, ReviewItem, read_items
from clinieval.review.study_kinds import get_kind
from tests.conftest import free_port, run_cli, wait_http

pytest_plugins = ["tests.postgres"]

PASSWORDS = {"ann": "ann-secret-1", "bob": "bob-secret-2", "cat": "cat-secret-3", "dan": "dan-secret-4"}


def rank_item(key: str, author: str | None = None, context: str = "note") -> ReviewItem:
    answers = tuple(AnswerIn(f"a{i}", f"model-{m}", f"answer {m}") for i, m in enumerate("xyz", 1))
    return ReviewItem(item=key, prompt=f"instruction {key}", context=context, author=author, answers=answers)


def write_jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "review.sqlite")
    store.init_db(path)
    return path


@pytest.fixture
def team(db: str) -> Any:
    engine = store.connect(db)
    accounts.add_user(engine, "boss", "admin", "boss-secret-0")
    for name, pw in PASSWORDS.items():
        accounts.add_user(engine, name, "reviewer", pw)
    return engine


def user(engine: Any, name: str) -> User:
    found = accounts.verify_user(engine, name, PASSWORDS[name])
    assert found is not None
    return found


def rank_payload(ranks: dict[str, int], correct: dict[str, bool]) -> dict[str, Any]:
    return {
        "answers": {
            k: {
                "rank": r,
                "correct": correct[k],
                "reasons": [] if correct[k] else ["C2"],
                "rationale": "" if correct[k] else "wrong dose",
            }
            for k, r in ranks.items()
        }
    }


# --- schema ------------------------------------------------------------------------------------------


def test_init_creates_current_schema_in_wal_mode_and_is_idempotent(db: str) -> None:
    engine = store.connect(db)
    assert store.current_revision(engine) == "0003"
    secret = store.session_secret(engine)
    assert len(secret) >= 48
    store.init_db(db)  # again: nothing changes, the secret is kept
    assert store.session_secret(engine) == secret
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"users", "settings", "studies", "items", "answers", "assignments", "audit", "sessions"} <= tables
    with engine.connect() as conn:  # the app's own connections sync every commit (power-cut safe)
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


def test_connect_refuses_missing_uninitialised_and_older_databases(tmp_path: Path, db: str) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(UserError, match="clinieval review init --db"):
        store.connect(str(missing))
    assert not missing.exists()  # never created behind the user's back
    blank = tmp_path / "blank.sqlite"
    sqlite3.connect(blank).close()
    with pytest.raises(UserError, match="not a review database"):
        store.connect(str(blank))
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE alembic_version SET version_num = '0000'")
    with pytest.raises(UserError, match=r"revision 0000.*run `clinieval review init"):
        store.connect(db)


def test_unreachable_postgres_is_one_line_without_the_password() -> None:
    url = f"postgresql://clinician:hunter2-pw@127.0.0.1:{free_port()}/review"
    with pytest.raises(UserError, match="cannot open the review database") as caught:
        store.init_db(url)
    assert "hunter2-pw" not in str(caught.value) and "\n" not in str(caught.value)


def test_database_urls() -> None:
    from clinieval.review.db import database_url, shown_url

    assert database_url("postgresql://u:pw@h/d").drivername == "postgresql+psycopg"
    assert "pw" not in shown_url("postgresql://u:pw@h/d")
    with pytest.raises(UserError, match="not supported"):
        database_url("mysql://u@h/d")


# --- users -------------------------------------------------------------------------------------------


def test_users_are_hashed_with_argon2_and_verified(team: Any, db: str) -> None:
    ann = accounts.verify_user(team, "ann", "ann-secret-1")
    assert ann is not None and ann.role == "reviewer"
    assert ann.password_hash.startswith("$argon2id$") and "ann-secret-1" not in ann.password_hash
    assert accounts.verify_user(team, "ann", "ann-secret-2") is None
    assert accounts.verify_user(team, "nobody", "ann-secret-1") is None
    with pytest.raises(UserError, match="'ann' already exists"):
        accounts.add_user(team, "ann", "reviewer", "another-pw")
    with pytest.raises(UserError, match="role 'owner' is unknown"):
        accounts.add_user(team, "eve", "owner", "long-enough")
    with pytest.raises(UserError, match="at least 8"):
        accounts.add_user(team, "eve", "reviewer", "short")
    with pytest.raises(UserError, match="printable"):
        accounts.add_user(team, " eve", "reviewer", "long-enough")
    assert [u.name for u in accounts.list_users(team)] == ["ann", "bob", "boss", "cat", "dan"]


# --- items and import --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"item": "q1"}, "items.jsonl:2: missing field 'prompt'"),
        ({"item": "", "prompt": "p"}, "items.jsonl:2: field 'item' must be a non-empty"),
        ({"item": "q1", "prompt": 3}, "items.jsonl:2: field 'prompt' is int, not text"),
        ({"item": "q1", "prompt": "p", "extra": 1}, "items.jsonl:2: unknown field 'extra'"),
        ({"item": "q1", "prompt": "p", "answers": {}}, "items.jsonl:2: field 'answers' should be a list"),
        (
            {"item": "q1", "prompt": "p", "answers": [{"id": "a1", "source": "m", "text": "t"}] * 2},
            r"items.jsonl:2: answers\[1\]: answer id 'a1' appears twice",
        ),
        (
            {"item": "q1", "prompt": "p", "answers": [{"id": "a1", "text": "t"}]},
            r"items.jsonl:2: answers\[0\]: missing field 'source'",
        ),
        ({"item": "q0", "prompt": "p"}, "items.jsonl:2: item 'q0' repeats .*items.jsonl:1"),
    ],
)
def test_item_errors_name_file_line_and_field(tmp_path: Path, line: dict[str, Any], message: str) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [{"item": "q0", "prompt": "ok"}, line])
    with pytest.raises(UserError, match=message):
        read_items(path)


def test_items_file_round_trips(tmp_path: Path) -> None:
    from clinieval.review.items import write_items

    items = [rank_item("q1", author="ann"), ReviewItem("q2", "p", fields={"question": "?"}, meta={"k": [1]})]
    write_items(tmp_path / "i.jsonl", items)
    assert read_items(tmp_path / "i.jsonl") == items


def test_import_adds_new_items_and_refuses_changed_ones(team: Any) -> None:
    first = importing.import_items(team, "med", "rank", {"ties": True}, [rank_item("q1"), rank_item("q2")])
    assert (first.added, first.unchanged, first.study_created) == (2, 0, True)
    again = importing.import_items(team, "med", "rank", None, [rank_item("q1"), rank_item("q3")])
    assert (again.added, again.unchanged, again.study_created) == (1, 1, False)
    with pytest.raises(UserError, match="item 'q2' is already in study 'med' with a different context"):
        importing.import_items(
            team, "med", "rank", None, [rank_item("q4"), rank_item("q2", context="changed")]
        )
    with read_session(team) as s:  # all or nothing: q4 was not added either
        assert sorted(s.scalars(select(Item.key)).all()) == ["q1", "q2", "q3"]
    with pytest.raises(UserError, match="is a rank study; import into it with --kind rank"):
        importing.import_items(team, "med", "rate", None, [rank_item("q9")])
    with pytest.raises(UserError, match="created with config"):
        importing.import_items(team, "med", "rank", {"ties": False}, [rank_item("q9")])
    with pytest.raises(UserError, match="at least 2 answers"):
        importing.import_items(
            team, "other", "rank", None, [ReviewItem("q1", "p", answers=rank_item("x").answers[:1])]
        )
    leaky = ReviewItem("q1", "p", answers=(AnswerIn("gpt-4o", "gpt-4o", "t"), AnswerIn("a2", "m2", "t")))
    with pytest.raises(UserError, match="contains its model's name"):
        importing.import_items(team, "other", "rank", None, [leaky])


# --- assignment --------------------------------------------------------------------------------------


def _assignments(engine: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    with read_session(engine) as s:
        rows = s.execute(
            select(Item.key, User.name, Assignment.answer_order)
            .join(Item, Assignment.item_id == Item.id)
            .join(User, Assignment.user_id == User.id)
        ).all()
    return sorted((k, n, tuple(o)) for k, n, o in rows)


def test_assignment_is_balanced_overlapping_seeded_and_skips_authors(tmp_path: Path) -> None:
    def build(name: str, seed: int) -> Any:
        engine = store.init_db(str(tmp_path / name))
        for reviewer, pw in PASSWORDS.items():
            accounts.add_user(engine, reviewer, "reviewer", pw)
        items = [rank_item(f"q{i}", author="ANN" if i < 2 else None) for i in range(6)]  # case ignored
        importing.import_items(engine, "med", "rank", None, items)
        counts = assigning.assign(engine, "med", per_item=2, seed=seed)
        assert (counts.created, counts.items, counts.unmatched_authors) == (12, 6, [])
        # 12 assignments over 4 reviewers: exactly 3 each, although ann may take only 4 of the 6 items
        assert counts.per_reviewer == {"ann": 3, "bob": 3, "cat": 3, "dan": 3}
        return engine

    engine = build("a.sqlite", seed=7)
    rows = _assignments(engine)
    per_item = Counter(k for k, _, _ in rows)
    assert per_item == {f"q{i}": 2 for i in range(6)}  # two distinct reviewers (unique constraint) per item
    assert not [r for r in rows if r[1] == "ann" and r[0] in ("q0", "q1")]
    for key, name, order in rows:
        assert sorted(order) == ["a1", "a2", "a3"]
        assert list(order) == assigning.answer_order(7, name, key, ["a1", "a2", "a3"])
    assert _assignments(build("b.sqlite", seed=7)) == rows  # same seed, same everything
    assert _assignments(build("c.sqlite", seed=8)) != rows
    assert assigning.assign(engine, "med", per_item=2, seed=7).created == 0  # nothing twice
    more = assigning.assign(engine, "med", per_item=3, seed=7)  # one more reviewer for every item
    assert more.created == 6 and sum(more.per_reviewer.values()) == 18
    with pytest.raises(UserError, match=r"item 'q\d' needs 1 more reviewer\(s\) but only 0 can take it"):
        assigning.assign(engine, "med", per_item=4, seed=7)  # ann wrote q0 and q1: only 3 can review them


def test_assign_reports_authors_who_are_not_users(team: Any) -> None:
    importing.import_items(team, "med", "rank", None, [rank_item("q1", author="Dr Who")])
    counts = assigning.assign(team, "med", per_item=1, seed=0)
    assert counts.unmatched_authors == ["Dr Who"]
    with pytest.raises(UserError, match="'zed' is not a reviewer"):
        assigning.assign(team, "med", per_item=1, seed=0, reviewers=["zed"])


# --- saving ------------------------------------------------------------------------------------------


@pytest.fixture
def assigned(team: Any) -> tuple[Any, int, User]:
    importing.import_items(team, "med", "rank", None, [rank_item("q1")])
    assigning.assign(team, "med", per_item=2, seed=3, reviewers=["ann", "bob"])
    ann = user(team, "ann")
    (entry,) = reviewing.reviewer_queue(team, ann)
    return team, entry.id, ann


def test_view_is_blinded_and_in_the_reviewers_order(assigned: tuple[Any, int, User]) -> None:
    engine, aid, ann = assigned
    view = reviewing.assignment_view(engine, aid, ann)
    order = assigning.answer_order(3, "ann", "q1", ["a1", "a2", "a3"])
    assert [a.key for a in view.answers] == order
    # lettered as the page letters them, and a refused save names them the same way
    assert [a.letter for a in view.answers] == ["A", "B", "C"]
    assert view.names == {key: f"Answer {x}" for key, x in zip(order, "ABC", strict=True)}
    assert "model-" not in repr(view)
    with pytest.raises(store.Forbidden):
        reviewing.assignment_view(engine, aid, user(engine, "bob"))


def test_an_answer_missing_from_the_stored_order_is_shown_last_not_hidden() -> None:
    """The one way answers are lettered (the pages and the API both use it)."""
    shown = reviewing.shown_answers(["a2", "gone", "a1"], {"a1": "one", "a2": "two", "a3": "three"})
    assert [(a.letter, a.key, a.text) for a in shown] == [
        ("A", "a2", "two"),
        ("B", "a1", "one"),
        ("C", "a3", "three"),
    ]


def test_stale_save_is_refused_and_nothing_is_lost_and_every_change_is_audited(
    assigned: tuple[Any, int, User],
) -> None:
    engine, aid, ann = assigned
    draft = {"answers": {"a1": {"rank": 1, "correct": True}}}
    assert reviewing.save(engine, aid, ann, draft, expected_version=0, submit=False) == 1
    other_tab = {"answers": {"a1": {"rank": 2}}}
    with pytest.raises(store.StaleSave, match=r"version 1 is stored, your page has version 0.*NOT saved"):
        reviewing.save(engine, aid, ann, other_tab, expected_version=0, submit=False)
    view = reviewing.assignment_view(engine, aid, ann)
    assert view.version == 1 and view.payload is not None
    assert view.payload["answers"]["a1"]["rank"] == 1  # the first save survived
    # an incomplete submission is refused by the kind, and nothing is written
    with pytest.raises(UserError, match=r"^Answer [ABC] has no response yet"):  # named as the page names it
        reviewing.save(engine, aid, ann, draft, expected_version=1, submit=True)
    final = rank_payload({"a1": 1, "a2": 2, "a3": 3}, {"a1": True, "a2": False, "a3": True})
    assert reviewing.save(engine, aid, ann, final, expected_version=1, submit=True) == 2
    assert reviewing.save(engine, aid, ann, final, expected_version=2, submit=True) == 2  # no change, no row
    with pytest.raises(UserError, match="already submitted"):
        reviewing.save(engine, aid, ann, draft, expected_version=2, submit=False)
    with pytest.raises(store.Forbidden):
        reviewing.save(engine, aid, user(engine, "bob"), final, expected_version=2, submit=True)
    trail = reviewing.audit_trail(engine, aid)
    assert [(a.action, a.old_version, a.new_version) for a in trail] == [("save", 0, 1), ("submit", 1, 2)]
    assert trail[0].old is None and trail[0].new is not None and trail[0].new["answers"]["a1"]["rank"] == 1
    assert trail[1].old == trail[0].new and trail[1].new is not None
    assert trail[1].new["answers"]["a2"] == {
        "rank": 2,
        "correct": False,
        "reasons": ["C2"],
        "rationale": "wrong dose",
    }
    assert all(a.user_id == ann.id and a.at.tzinfo is not None for a in trail)


def test_concurrent_saves_of_one_version_let_exactly_one_through(assigned: tuple[Any, int, User]) -> None:
    engine, aid, ann = assigned
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def attempt(rank: int) -> None:
        barrier.wait()
        try:
            reviewing.save(
                engine, aid, ann, {"answers": {"a1": {"rank": rank}}}, expected_version=0, submit=False
            )
            outcomes.append("saved")
        except store.StaleSave:
            outcomes.append("stale")

    threads = [threading.Thread(target=attempt, args=(r,)) for r in (1, 2, 3, 1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["saved"] + ["stale"] * 5
    assert len(reviewing.audit_trail(engine, aid)) == 1


@pytest.mark.parametrize(
    ("kind", "config", "payload", "message"),
    [
        (
            "rank",
            {},
            {"answers": {"a1": {"rank": 1}, "a2": {"rank": 1}}},
            "answer a1 and answer a2 share rank 1",
        ),
        ("rank", {}, {"answers": {"a9": {}}}, "does not have: 'a9'"),
        ("rank", {}, {"answers": {"a1": {"rank": 4}}}, "whole number from 1 to 2"),
        ("rank", {}, {"answers": {"a1": {"reasons": ["C4"]}}}, "reason 'C4' is unknown"),
        ("rate", {}, {"answers": {"a1": {"fluency": 6}}}, "fluency must be a whole number from 1 to 5"),
        ("rate", {}, {"answers": {"a1": {"beauty": 3}}}, "unknown entry 'beauty'"),
        ("question", {}, {"decision": "maybe"}, "choose a decision"),
        ("question", {}, {"fields": {"options": ["x"]}}, "must stay a list of 2"),
        ("sentence", {}, {"labels": {"abnormality": "weird"}}, "choose abnormality: normal or abnormal"),
    ],
)
def test_kinds_refuse_bad_drafts(kind: str, config: dict[str, Any], payload: Any, message: str) -> None:
    item = ReviewItem(
        "q1", "p", answers=rank_item("x").answers[:2], fields={"question": "?", "options": ["a", "b"]}
    )
    k = get_kind(kind)
    with pytest.raises(UserError, match=message):
        k.validate(payload, item, k.config(config), partial=True)


def test_kinds_complete_submissions() -> None:
    item = ReviewItem("q1", "p", answers=rank_item("x").answers[:2], fields={"question": "?", "answer": "A"})
    rank = get_kind("rank")
    tied = {"answers": {"a1": {"rank": 1, "correct": True}, "a2": {"rank": 1, "correct": True}}}
    assert rank.validate(tied, item, rank.config({"ties": True}))["answers"]["a2"]["reasons"] == []
    bad = {
        "answers": {
            "a1": {"rank": 1, "correct": True},
            "a2": {"rank": 2, "correct": False, "reasons": ["C1"]},
        }
    }
    with pytest.raises(UserError, match="answer 2 is marked incorrect: write a rationale"):
        rank.validate(bad, item, rank.config({}), names={"a1": "answer 1", "a2": "answer 2"})
    question = get_kind("question")
    with pytest.raises(UserError, match="no field was changed"):
        question.validate({"decision": "revise", "fields": {"answer": "A"}}, item, {})
    revised = question.validate({"decision": "revise", "fields": {"answer": "B"}}, item, {})
    assert revised == {"decision": "revise", "fields": {"question": "?", "answer": "B"}, "comment": ""}
    with pytest.raises(UserError, match="scale name 'mean' is taken"):
        get_kind("rate").config({"scales": [{"name": "mean", "label": "Mean"}]})


# --- agreement and export ----------------------------------------------------------------------------

# Hand-made: ann and bob rank the same 3 answers (models x, y, z) of 3 items.
#   q1: ann 1 2 3, bob 1 2 3 -> tau 1;  q2: ann 1 2 3, bob 3 2 1 -> tau -1;
#   q3: ann 1 2 3, bob 2 1 3 -> (2 concordant - 1 discordant) / 3 = 1/3;  mean = 1/9.
# Correct, units q1x..q3z: ann TTF TFF TTT, bob TFF TFT TTT: 7/9 agree; both 6 T and 3 F, so chance
# agreement 5/9 and Cohen's kappa (7/9 - 5/9) / (4/9) = 0.5. Krippendorff's alpha (nominal): 18
# values, 12 T and 6 F, 4 disagreeing ordered pairs: 1 - 17 * 4 / (2 * 12 * 6) = 76/144.
ANN = {"q1": (1, 2, 3), "q2": (1, 2, 3), "q3": (1, 2, 3)}
BOB = {"q1": (1, 2, 3), "q2": (3, 2, 1), "q3": (2, 1, 3)}
ANN_OK = {"q1": "TTF", "q2": "TFF", "q3": "TTT"}
BOB_OK = {"q1": "TFF", "q2": "TFT", "q3": "TTT"}


@pytest.fixture
def reviewed(team: Any) -> Any:
    importing.import_items(team, "med", "rank", None, [rank_item(k) for k in ("q1", "q2", "q3")])
    assigning.assign(team, "med", per_item=2, seed=1, reviewers=["ann", "bob"])
    for name, ranks, oks in (("ann", ANN, ANN_OK), ("bob", BOB, BOB_OK)):
        reviewer = user(team, name)
        for entry in reviewing.reviewer_queue(team, reviewer):
            r, ok = ranks[entry.item], oks[entry.item]
            payload = rank_payload(
                {"a1": r[0], "a2": r[1], "a3": r[2]}, {f"a{i}": ok[i - 1] == "T" for i in (1, 2, 3)}
            )
            reviewing.save(team, entry.id, reviewer, payload, expected_version=0, submit=True)
    return team


def test_agreement_matches_hand_computed_values_and_the_analysis_functions(reviewed: Any) -> None:
    result = study_agreement(reviewed, "med")
    assert result["submitted"] == 6 and result["reviewers"] == 2
    tau = result["kendall_tau"]
    assert tau["mean_tau_b"] == pytest.approx(1 / 9) and tau["items"] == 3 and tau["pairs"] == 3
    tables = {
        who: ScoreTable.from_rows((i, m, float(r[j])) for i, r in ranks.items() for j, m in enumerate("xyz"))
        for who, ranks in (("ann", ANN), ("bob", BOB))
    }
    assert tau["mean_tau_b"] == pytest.approx(inter_rater_kendall(tables).mean)
    correct = result["correct"]
    assert correct["cohen_kappa"]["mean"] == pytest.approx(0.5)
    assert correct["krippendorff_alpha_nominal"] == pytest.approx(76 / 144)
    flat = [[c == "T" for i in ("q1", "q2", "q3") for c in who[i]] for who in (ANN_OK, BOB_OK)]
    assert correct["krippendorff_alpha_nominal"] == pytest.approx(
        stats.krippendorff_alpha(flat, level_of_measurement="nominal")
    )
    assert correct["items_with_overlap"] == 3


def test_rate_agreement_uses_icc_and_alpha_and_exports_clinician_scores(team: Any, tmp_path: Path) -> None:
    importing.import_items(team, "r", "rate", {"scales": [{"name": "fluency", "label": "Fluency"}]}, [
        ReviewItem(f"q{i}", "p", answers=rank_item("x").answers[:1]) for i in range(4)
    ])  # fmt: skip
    assigning.assign(team, "r", per_item=2, seed=0, reviewers=["ann", "bob"])
    scores = {"ann": [1, 2, 4, 5], "bob": [2, 2, 5, 4]}
    for name in ("ann", "bob"):
        who = user(team, name)
        for entry in reviewing.reviewer_queue(team, who):
            value = scores[name][int(entry.item[1:])]
            reviewing.save(team, entry.id, who, {"answers": {"a1": {"fluency": value}}}, 0, submit=True)
    out = export_study(team, "r", tmp_path / "r")
    assert out.extra == ("clinicians.csv",)
    # one scale, so a response's mean is its fluency: ann 1 2 4 5 -> 3, bob 2 2 5 4 -> 3.25
    clinicians = (tmp_path / "r" / "clinicians.csv").read_text().splitlines()
    assert clinicians == ["model,clinician,score", "model-x,ann,3.0", "model-x,bob,3.25"]
    fluency = study_agreement(team, "r")["scales"]["fluency"]
    matrix = [[a, b] for a, b in zip(scores["ann"], scores["bob"], strict=True)]
    icc = stats.intraclass_correlation(matrix)
    assert fluency["icc"]["model"].startswith("two-way") and fluency["icc"]["units"] == 4
    assert fluency["icc"]["single"] == pytest.approx(icc["ICC2"].icc)
    assert fluency["krippendorff_alpha_ordinal"] == pytest.approx(
        stats.krippendorff_alpha([scores["ann"], scores["bob"]], level_of_measurement="ordinal")
    )


def test_agreement_with_one_reviewer_is_undefined_not_an_error(team: Any) -> None:
    importing.import_items(team, "med", "rank", None, [rank_item("q1")])
    result = study_agreement(team, "med")
    assert result["kendall_tau"] is None and result["undefined"]


def test_export_maps_models_back_hides_secrets_and_round_trips_through_analyze(
    reviewed: Any, db: str, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    result = export_study(reviewed, "med", out)
    assert (result.responses, result.table, result.rows, result.extra) == (
        6,
        "ranks.csv",
        18,
        ("reviews.csv",),
    )
    responses = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    first = responses[0]
    assert (first["item"], first["reviewer"], first["version"]) == ("q1", "ann", 1)
    assert sorted(first["payload"]["answers"]) == ["model-x", "model-y", "model-z"]
    assert first["models_shown"] == ["model-" + "xyz"[int(k[1]) - 1] for k in first["answer_order"]]
    assert first["payload"]["answers"]["model-z"] == {
        "rank": 3, "correct": False, "reasons": ["C2"], "rationale": "wrong dose"
    }  # fmt: skip
    text = "".join(p.read_text() for p in out.iterdir())
    with read_session(reviewed) as s:
        hashes = list(s.scalars(select(User.password_hash)).all())
    for secret in [*hashes, *PASSWORDS.values(), store.session_secret(reviewed), "argon2"]:
        assert secret not in text
    header = (out / "ranks.csv").read_text().splitlines()[0]
    assert header == "item,reviewer,model,rank,correct,reasons,rationale"

    done = run_cli(
        "analyze", str(out / "ranks.csv"), "--human-rank", "rank", "--correct", "correct",
        "--rater", "reviewer", "--resamples", "200", "--out", str(tmp_path / "analysis"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "analysis" / "analysis.json").read_text())
    human = analysis["human"]
    assert human["raters"]["inter_rater_kendall"]["mean_tau_b"] == pytest.approx(1 / 9)
    # the primary rater of every item is ann (first listed): she ranked x, y, z as 1, 2, 3 throughout
    assert human["mean_rank"] == {"model-x": 1.0, "model-y": 2.0, "model-z": 3.0}
    # ann's correctness: x TTT, y TFT, z FFT
    means = {m: s["mean"] for m, s in analysis["scores"]["correct"]["per_model"].items()}
    assert means == pytest.approx({"model-x": 1.0, "model-y": 2 / 3, "model-z": 1 / 3})

    from clinieval.benchmarks.medalign.table import read_reviews  # MedAlign's `analyze --reviews`

    reviews = read_reviews(out / "reviews.csv")
    assert reviews[("q2", "model-z")] == [
        {"rank": 3.0, "correct": 0.0, "rater": "ann"},
        {"rank": 1.0, "correct": 1.0, "rater": "bob"},
    ]

    # a second export replaces the first; a folder that is not an export is never replaced
    export_study(reviewed, "med", out)
    stranger = tmp_path / "mine"
    stranger.mkdir()
    (stranger / "thesis.docx").write_text("precious")
    with pytest.raises(UserError, match="not an earlier review export"):
        export_study(reviewed, "med", stranger)
    assert (stranger / "thesis.docx").read_text() == "precious"


def test_progress_counts(reviewed: Any) -> None:
    p = assigning.progress(reviewed, "med")
    assert (p.items, p.assigned_items, p.complete_items) == (3, 3, 3)
    assert p.by_status == {"pending": 0, "draft": 0, "submitted": 6}
    assert p.per_reviewer["ann"]["submitted"] == 3


# --- the commands --------------------------------------------------------------------------------------


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(review_app, list(args), input=input)


def test_cli_init_users_import_assign_export(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite")
    assert invoke("init", "--db", db).exit_code == 0
    added = invoke("add-user", "ann", "--role", "reviewer", "--db", db, input="ann-secret-1\n")
    assert added.exit_code == 0 and "added reviewer ann" in added.output
    assert invoke("add-user", "bob", "--db", db, input="bob-secret-2\n").exit_code == 0
    bad_role = invoke("add-user", "eve", "--role", "root", "--db", db, input="long-enough\n")
    assert isinstance(bad_role.exception, UserError) and "role 'root'" in str(bad_role.exception)
    assert accounts.verify_user(store.connect(db), "ann", "ann-secret-1") is not None

    items = write_jsonl(
        tmp_path / "items.jsonl", [x.to_json() for x in (rank_item("q1", author="ann"), rank_item("q2"))]
    )
    done = invoke(
        "import", str(items), "--study", "med", "--kind", "rank", "--config", '{"ties": true}', "--db", db
    )
    assert done.exit_code == 0 and "2 item(s) added" in done.output
    broken = write_jsonl(tmp_path / "broken.jsonl", [{"item": "q1", "prompt": "p"}, {"item": "q3"}])
    failed = invoke("import", str(broken), "--study", "med", "--kind", "rank", "--db", db)
    assert isinstance(failed.exception, UserError) and "broken.jsonl:2: missing field 'prompt'" in str(
        failed.exception
    )

    done = invoke("assign", "--study", "med", "--per-item", "1", "--seed", "5", "--db", db)
    assert done.exit_code == 0 and "2 new assignment(s)" in done.output
    assert next(r for r in _assignments(store.connect(db)) if r[0] == "q1")[1] == "bob"  # ann wrote q1

    out = tmp_path / "out"
    done = invoke("export", "--study", "med", str(out), "--db", db)
    assert done.exit_code == 0 and "0 submitted review(s)" in done.output
    assert (out / "ranks.csv").read_text() == "item,reviewer,model,rank,correct,reasons,rationale\n"
    shown = invoke("progress", "--study", "med", "--db", db)
    assert shown.exit_code == 0 and "pending 2" in shown.output

    remote = invoke("serve", "--db", db, "--host", "0.0.0.0")
    assert isinstance(remote.exception, UserError) and "--allow-remote" in str(remote.exception)
    missing = invoke("export", "--study", "med", str(out), "--db", str(tmp_path / "nope.sqlite"))
    assert isinstance(missing.exception, UserError) and "review init" in str(missing.exception)


def test_serve_runs_a_real_server_on_loopback(db: str, tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    code = "from clinieval.cli.review import review_app; review_app()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--db", db, "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/", timeout=60, proc=proc)
        response = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert response.status_code < 500
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


# --- PostgreSQL ---------------------------------------------------------------------------------------


def test_postgres_init_import_assign_save_export(
    postgres_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLINIEVAL_REVIEW_SECRET_FILE", str(tmp_path / "review.secret"))  # not in ~/.config
    engine = store.init_db(postgres_db_url)
    assert store.current_revision(store.connect(postgres_db_url)) == "0003"
    for name in ("ann", "bob"):
        accounts.add_user(engine, name, "reviewer", PASSWORDS[name])
    importing.import_items(engine, "med", "rank", None, [rank_item("q1", author="ann"), rank_item("q2")])
    counts = assigning.assign(engine, "med", per_item=1, seed=2)
    assert counts.created == 2
    bob = user(engine, "bob")
    entry = next(e for e in reviewing.reviewer_queue(engine, bob) if e.item == "q1")
    payload = rank_payload({"a1": 2, "a2": 1, "a3": 3}, {"a1": True, "a2": True, "a3": False})
    assert reviewing.save(engine, entry.id, bob, payload, 0, submit=True) == 1
    with pytest.raises(store.StaleSave):
        reviewing.save(engine, entry.id, bob, payload, 0, submit=True)
    assert [a.new_version for a in reviewing.audit_trail(engine, entry.id)] == [1]
    result = export_study(engine, "med", tmp_path / "pg")
    assert (result.responses, result.rows) == (1, 3)
    row = json.loads((tmp_path / "pg" / "responses.jsonl").read_text())
    assert row["reviewer"] == "bob" and row["payload"]["answers"]["model-y"]["rank"] == 1
    engine.dispose()
