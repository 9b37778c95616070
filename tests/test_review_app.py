"""The review web app end to end: a real SQLite database made with ``review.store``, the real ASGI
app through FastAPI's TestClient, real argon2 logins.

What must hold: login works and refuses a wrong password; every POST without the session's CSRF
token is refused and changes nothing; a reviewer reaches only their own assignments and never the
admin pages, and cannot tell someone else's assignment from a missing one; no model name reaches
any page; each study kind's form saves and reads back; bad input is refused with a message and
loses nothing; a stale save is refused with 409 and the database keeps the newer save; a
2-million-character record comes in bounded pages and search finds the pages holding a term.
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from clinieval.errors import UserError
from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.app import check_host, create_app
from clinieval.review.db import ACTIONS, Assignment, Audit, User, read_session
from clinieval.review.items import AnswerIn, ReviewItem
from clinieval.review.web import record

SOURCES = ("ModelSecretAlpha-7B", "ModelSecretBeta-13B", "ModelSecretGamma")
PASSWORDS = {"admin": "admin-pass-1", "ann": "ann-pass-123", "bob": "bob-pass-123"}

# The long record: 20,000 lines of exactly 100 characters (99 + a line break) = 2,000,000 characters.
# A page is cut after the last line break before 20,000 characters, so each page is exactly 200
# lines: 100 pages. "ZebraFinch" sits on line 1234 (page 1234 // 200 + 1 = 7) and on the last
# line (page 100); "<script>" stands beside the first one to prove snippets are escaped.
LINE = 99
LONG_LINES = 20_000


def long_record() -> str:
    lines = [f"line {i:05d} ".ljust(LINE, "x") for i in range(LONG_LINES)]
    lines[1234] = "line 01234 <script>alert(1)</script> ZebraFinch seen".ljust(LINE, "y")
    lines[LONG_LINES - 1] = "final line zebrafinch".ljust(LINE, "z")
    return "".join(line + "\n" for line in lines)


def items_for(kind: str) -> list[ReviewItem]:
    if kind == "rank":
        answers = tuple(AnswerIn(f"a{i + 1}", s, f"rank answer {i + 1} text") for i, s in enumerate(SOURCES))
        return [
            ReviewItem(
                item="r1", prompt="Summarise the <b>record</b>", context=long_record(), answers=answers
            ),
            ReviewItem(item="r2", prompt="List the medications", context="short record\n", answers=answers),
        ]
    if kind == "rate":
        answers = tuple(AnswerIn(f"a{i + 1}", s, f"rate answer {i + 1}") for i, s in enumerate(SOURCES[:2]))
        return [ReviewItem(item="t1", prompt="What dose?", context="dose note", answers=answers)]
    if kind == "question":
        fields = {
            "question": "Which drug was started\nafter admission?",
            "options": ["aspirin", "heparin", "warfarin"],
            "answer": "B",
        }
        return [ReviewItem(item="g1", prompt="Generated item g1", context="discharge note", fields=fields)]
    return [ReviewItem(item="s1", prompt="Possible small effusion.", context="CHEST X-RAY report")]


CONFIGS: dict[str, dict[str, Any]] = {"rank": {"ties": False}, "rate": {}, "question": {}, "sentence": {}}


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database built once (users hashed, items imported, every item given to ann and bob);
    each test works on its own copy."""
    path = tmp_path_factory.mktemp("review") / "template.db"
    engine = store.init_db(path)
    for name, password in PASSWORDS.items():
        accounts.add_user(engine, name, "admin" if name == "admin" else "reviewer", password)
    for kind, config in CONFIGS.items():
        importing.import_items(engine, f"{kind}-study", kind, config, items_for(kind))
        assigning.assign(engine, f"{kind}-study", per_item=2, seed=11)
    engine.dispose()  # the last connection's close checkpoints the WAL into the file
    return path


@pytest.fixture
def engine(template_db: Path, tmp_path: Path) -> Iterator[Engine]:
    copy = tmp_path / "review.db"
    shutil.copy(template_db, copy)
    engine = store.connect(copy)
    yield engine
    engine.dispose()


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        yield client


def new_client(engine: Engine) -> TestClient:
    return TestClient(create_app(engine), base_url="http://127.0.0.1")


# --- helpers --------------------------------------------------------------------------------------


def token(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found.group(1)


def login(client: TestClient, name: str) -> str:
    """Log in; the CSRF token of the new session."""
    form = client.get("/login")
    response = client.post(
        "/login", data={"name": name, "password": PASSWORDS[name], "csrf_token": token(form.text)}
    )
    assert response.status_code == 200, response.text
    return token(response.text)


def uid(engine: Engine, name: str) -> int:
    with read_session(engine) as s:
        return s.scalars(select(User.id).where(User.name == name)).one()


def assignment_of(engine: Engine, name: str, study: str, item: str = "") -> int:
    entries = [
        e for e in reviewing.reviewer_queue(engine, uid(engine, name), study) if not item or e.item == item
    ]
    return entries[0].id


def stored(engine: Engine, assignment_id: int) -> tuple[int, str, dict[str, Any] | None]:
    with read_session(engine) as s:
        a = s.get(Assignment, assignment_id)
        assert a is not None
        return a.version, a.status, a.payload


def audit_count(engine: Engine) -> int:
    with read_session(engine) as s:
        # saves and submissions (the trail also records sign-ins and administrative changes)
        return s.scalar(select(func.count(Audit.id)).where(Audit.action.in_(ACTIONS))) or 0


def order_of(engine: Engine, assignment_id: int) -> list[str]:
    with read_session(engine) as s:
        a = s.get(Assignment, assignment_id)
        assert a is not None
        return list(a.answer_order)


def record_text(page: str) -> str:
    found = re.search(r'<pre id="record-text">(.*?)</pre>', page, re.S)
    assert found, "no record text in the page"
    return html.unescape(found.group(1))


def rank_form(csrf: str, version: int, action: str = "submit", **over: Any) -> dict[str, Any]:
    """A complete, valid rank response: A best, C worst; B incorrect for C2 with a rationale."""
    form: dict[str, Any] = {
        "csrf_token": csrf,
        "version": str(version),
        "action": action,
        "rank-A": "1",
        "rank-B": "2",
        "rank-C": "3",
        "correct-A": "correct",
        "correct-B": "incorrect",
        "reasons-B": ["C2"],
        "rationale-B": "wrong dose\r\nfor the weight",
        "correct-C": "correct",
    }
    form.update(over)
    return form


# --- login ----------------------------------------------------------------------------------------


def test_login_ok_and_wrong_password(app_client: TestClient) -> None:
    form = app_client.get("/login")
    wrong = app_client.post(
        "/login", data={"name": "ann", "password": "nope-nope", "csrf_token": token(form.text)}
    )
    assert wrong.status_code == 401
    assert "Wrong user name or password." in wrong.text
    assert app_client.get("/", follow_redirects=False).status_code == 303  # still logged out

    unknown = app_client.post(
        "/login", data={"name": "zed", "password": "x" * 9, "csrf_token": token(wrong.text)}
    )
    assert unknown.status_code == 401 and "Wrong user name or password." in unknown.text

    ok = app_client.post(
        "/login",
        data={"name": "ann", "password": PASSWORDS["ann"], "csrf_token": token(unknown.text)},
        follow_redirects=False,
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/"
    cookie = ok.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    queue = app_client.get("/")
    assert queue.status_code == 200 and '<span id="user-name">ann</span>' in queue.text


def test_login_sends_admin_to_admin_and_refuses_offsite_next(app_client: TestClient) -> None:
    form = app_client.get("/login")
    data = {
        "name": "admin",
        "password": PASSWORDS["admin"],
        "csrf_token": token(form.text),
        "next": "//evil.example/x",
    }
    response = app_client.post("/login", data=data, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    app_client.cookies.clear()
    form = app_client.get("/login")
    data = {"name": "admin", "password": PASSWORDS["admin"], "csrf_token": token(form.text)}
    assert app_client.post("/login", data=data, follow_redirects=False).headers["location"] == "/admin"


def test_pages_need_login(app_client: TestClient, engine: Engine) -> None:
    aid = assignment_of(engine, "ann", "rank-study")
    for path in ("/", f"/a/{aid}", f"/a/{aid}/context?page=2", f"/a/{aid}/search?q=line", "/admin"):
        response = app_client.get(path, follow_redirects=False)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/login?next=/"), path


def test_logout_ends_the_session(app_client: TestClient) -> None:
    csrf = login(app_client, "ann")
    assert app_client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert app_client.get("/", follow_redirects=False).headers["location"] == "/login?next=/"


# --- CSRF -----------------------------------------------------------------------------------------


def test_every_post_needs_the_csrf_token(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study")
    before = stored(engine, aid)
    for bad in (None, "forged-token", csrf[:-1] + ("A" if csrf[-1] != "A" else "B")):
        form = rank_form(csrf, 0)
        if bad is None:
            del form["csrf_token"]
        else:
            form["csrf_token"] = bad
        response = app_client.post(f"/a/{aid}", data=form)
        assert response.status_code == 403
        assert "security token is missing or does not match" in response.text
        # logout and login are POSTs too
        logout = app_client.post("/logout", data={} if bad is None else {"csrf_token": bad})
        assert logout.status_code == 403
        relog = app_client.post(
            "/login", data={"name": "bob", "password": PASSWORDS["bob"], "csrf_token": bad or ""}
        )
        assert relog.status_code == 403
    assert stored(engine, aid) == before
    assert audit_count(engine) == 0
    assert '<span id="user-name">ann</span>' in app_client.get("/").text  # neither logged out nor switched

    # the header form of the token (what a script would send) is accepted
    ok = app_client.post(
        f"/a/{aid}",
        data={k: v for k, v in rank_form(csrf, 0).items() if k != "csrf_token"},
        headers={"X-CSRF-Token": csrf},
        follow_redirects=False,
    )
    assert ok.status_code == 303
    assert stored(engine, aid)[0] == 1


def test_token_from_before_login_is_useless_after(app_client: TestClient, engine: Engine) -> None:
    anonymous = token(app_client.get("/login").text)
    csrf = login(app_client, "ann")
    assert csrf != anonymous
    aid = assignment_of(engine, "ann", "rank-study")
    assert app_client.post(f"/a/{aid}", data=rank_form(anonymous, 0)).status_code == 403
    assert stored(engine, aid)[0] == 0


# --- roles and ownership --------------------------------------------------------------------------


def test_reviewer_cannot_reach_another_reviewers_assignment(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    bobs = assignment_of(engine, "bob", "rank-study")
    missing = 99_999
    before = stored(engine, bobs)
    answers = {}
    for aid in (bobs, missing):
        pages = [
            app_client.get(f"/a/{aid}"),
            app_client.get(f"/a/{aid}/context?page=1"),
            app_client.get(f"/a/{aid}/search?q=line"),
            app_client.post(f"/a/{aid}", data=rank_form(csrf, 0)),
        ]
        assert [p.status_code for p in pages] == [404, 404, 404, 404]
        answers[aid] = [p.text for p in pages]
    assert answers[bobs] == answers[missing]  # someone else's looks exactly like nothing at all
    assert stored(engine, bobs) == before
    assert app_client.get("/a/not-a-number").status_code == 404


def test_reviewer_queue_lists_only_their_own(app_client: TestClient, engine: Engine) -> None:
    login(app_client, "ann")
    page = app_client.get("/").text
    shown = {int(x) for x in re.findall(r'data-assignment="(\d+)"', page)}
    with read_session(engine) as s:
        anns = set(s.scalars(select(Assignment.id).where(Assignment.user_id == uid(engine, "ann"))))
        bobs = set(s.scalars(select(Assignment.id).where(Assignment.user_id == uid(engine, "bob"))))
    assert shown == anns and len(anns) == 5 and not shown & bobs  # rank 2 + rate, question, sentence 1 each
    assert "0 of 2 submitted" in page


def test_reviewer_cannot_open_admin_pages(app_client: TestClient) -> None:
    login(app_client, "ann")
    for path in ("/admin", "/admin/studies/rank-study", "/admin/studies/no-such-study"):
        response = app_client.get(path)
        assert response.status_code == 403, path
        assert "rank-study" not in response.text
    assert 'id="nav-admin"' not in app_client.get("/").text


def test_admin_sees_progress_and_agreement_but_not_responses(app_client: TestClient, engine: Engine) -> None:
    # ann and bob both submit the same sentence labels: agreement becomes defined
    for name in ("ann", "bob"):
        with new_client(engine) as client:
            csrf = login(client, name)
            aid = assignment_of(engine, name, "sentence-study")
            form = {
                "csrf_token": csrf,
                "version": "0",
                "action": "submit",
                "label-abnormality": "abnormal",
                "label-ambiguity": "ambiguous",
                "rewrite": f"by {name}",
            }
            assert client.post(f"/a/{aid}", data=form, follow_redirects=False).status_code == 303
    login(app_client, "admin")
    home = app_client.get("/admin")
    assert home.status_code == 200
    row = re.search(r'<tr class="study-row" data-study="sentence-study">(.*?)</tr>', home.text, re.S)
    assert (
        row
        and '<td class="submitted">2</td>' in row.group(1)
        and '<td class="complete">1</td>' in row.group(1)
    )
    study = app_client.get("/admin/studies/sentence-study")
    assert study.status_code == 200
    assert re.search(r'data-reviewer="ann">.*?<td class="submitted">1</td>', study.text, re.S)
    assert 'class="agreement-table" data-measure="abnormality"' in study.text
    assert "From 2 submitted reviews by 2 reviewers" in study.text
    assert "by ann" not in study.text  # counts and agreement, never a reviewer's text
    assert app_client.get("/admin/studies/nope").status_code == 404
    # an admin does not read reviewers' responses through their pages either
    assert app_client.get(f"/a/{assignment_of(engine, 'ann', 'sentence-study')}").status_code == 404


def test_admin_agreement_hides_model_names() -> None:
    from clinieval.review.blinding import masker as redactor
    from clinieval.review.study_kinds import get_kind
    from clinieval.review.web.agreement_view import tables

    hide = redactor(["gpt", "gpt-4o"])
    assert hide("gpt-4o vs gpt") == "[model hidden] vs [model hidden]"
    scale = {"label": "Relevancy", "krippendorff_alpha_ordinal": None, "icc": None,
             "why": {"alpha": "gpt-4o rated alone", "icc": "so did gpt"}}  # fmt: skip
    result = {"kind": "rate", "submitted": 1, "reviewers": 1, "scales": {"relevancy": scale}}
    measures = get_kind("rate").measures({"scales": [{"name": "relevancy", "label": "Relevancy (gpt-4o)"}]})
    [table] = tables(result, measures, hide)
    texts = [table.title, *(r.name for r in table.rows), *(r.why or "" for r in table.rows)]
    assert not [t for t in texts if "gpt" in t]
    assert table.title == "Relevancy ([model hidden])"
    assert "Not defined yet: [model hidden] rated alone." in texts


# --- blinding -------------------------------------------------------------------------------------


def test_model_names_never_reach_the_browser(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    bodies = [app_client.get("/").text]
    for entry in reviewing.reviewer_queue(engine, uid(engine, "ann")):
        bodies.append(app_client.get(f"/a/{entry.id}").text)
        bodies.append(app_client.get(f"/a/{entry.id}/context?page=100").text)
        bodies.append(app_client.get(f"/a/{entry.id}/search?q=zebrafinch").text)
        bodies.append(app_client.get(f"/a/{entry.id}/search?q=answer").text)
    rank = assignment_of(engine, "ann", "rank-study", "r2")
    bodies.append(app_client.post(f"/a/{rank}", data=rank_form(csrf, 0, **{"rank-A": "9"})).text)  # 422
    assert app_client.post(f"/a/{rank}", data=rank_form(csrf, 0), follow_redirects=False).status_code == 303
    bodies.append(app_client.get(f"/a/{rank}").text)
    bodies.append(app_client.post(f"/a/{rank}", data=rank_form(csrf, 0)).text)  # 409 with the saved values
    with new_client(engine) as admin:
        login(admin, "admin")
        bodies += [admin.get("/admin").text, admin.get("/admin/studies/rank-study").text]
    assert len(bodies) == 26
    for body in bodies:
        assert "ModelSecret" not in body
        for source in SOURCES:
            assert source not in body
        assert not re.search(r"\ba[1-3]\b", body)  # nor the answer keys, which follow model order
    # the answers are there, under letters, and the posted names carry letters, not answer keys
    page = app_client.get(f"/a/{rank}").text
    assert [html.unescape(t) for t in re.findall(r"<h3>(Answer [A-Z])</h3>", page)] == [
        "Answer A",
        "Answer B",
        "Answer C",
    ]
    assert 'name="rank-A"' in page and 'name="rank-a1"' not in page and 'value="a1"' not in page


def test_answers_follow_the_stored_order(app_client: TestClient, engine: Engine) -> None:
    login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    order = order_of(engine, aid)
    page = app_client.get(f"/a/{aid}").text
    texts = re.findall(r'<div id="answer-text-[A-Z]" class="answer-text">(.*?)</div>', page, re.S)
    assert texts == [f"rank answer {int(k[1:])} text" for k in order]


# --- each kind saved and read back ----------------------------------------------------------------


def test_rank_saved_and_read_back(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    a, b, c = order_of(engine, aid)
    draft = app_client.post(
        f"/a/{aid}", data=rank_form(csrf, 0, action="save", **{"rank-C": ""}), follow_redirects=False
    )
    assert draft.status_code == 303 and draft.headers["location"].startswith(f"/a/{aid}?done=save")
    version, status, payload = stored(engine, aid)
    assert (version, status) == (1, "draft")
    assert payload is not None and payload["answers"][c]["rank"] is None
    response = app_client.post(f"/a/{aid}", data=rank_form(csrf, 1), follow_redirects=False)
    assert response.status_code == 303
    assert stored(engine, aid) == (
        2,
        "submitted",
        {
            "answers": {
                a: {"rank": 1, "correct": True, "reasons": [], "rationale": ""},
                b: {
                    "rank": 2,
                    "correct": False,
                    "reasons": ["C2"],
                    "rationale": "wrong dose\nfor the weight",
                },
                c: {"rank": 3, "correct": True, "reasons": [], "rationale": ""},
            }
        },
    )
    assert audit_count(engine) == 2
    page = app_client.get(response.headers["location"]).text
    assert 'id="flash"' in page and "Submitted (version 2)" in page
    assert re.search(r'id="rank-B" name="rank-B"[^>]*value="2"', page)
    assert re.search(r'id="correct-B-no"[^>]*value="incorrect"\s*checked', page)
    assert re.search(r'id="reason-B-C2"[^>]*value="C2"\s*checked', page)
    assert not re.search(r'id="reason-B-C1"[^>]*checked', page)
    assert 'name="rationale-B" rows="3">\nwrong dose\nfor the weight</textarea>' in page
    assert 'id="save-button"' not in page and "Submit changes" in page  # submitted: editable by submitting


def test_submitted_review_stays_editable(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    assert app_client.post(f"/a/{aid}", data=rank_form(csrf, 0), follow_redirects=False).status_code == 303
    changed = rank_form(csrf, 1, **{"rank-A": "3", "rank-C": "1"})
    assert app_client.post(f"/a/{aid}", data=changed, follow_redirects=False).status_code == 303
    version, status, payload = stored(engine, aid)
    assert (version, status) == (2, "submitted")
    assert payload is not None and payload["answers"][order_of(engine, aid)[0]]["rank"] == 3
    with read_session(engine) as s:
        trail = s.scalars(select(Audit).where(Audit.assignment_id == aid).order_by(Audit.id)).all()
    assert [(t.action, t.old_version, t.new_version) for t in trail] == [("submit", 0, 1), ("submit", 1, 2)]
    # a draft cannot quietly turn a submitted review back into an unfinished one
    draft = app_client.post(f"/a/{aid}", data=rank_form(csrf, 2, action="save"))
    assert draft.status_code == 422 and "already submitted" in draft.text
    assert stored(engine, aid)[0] == 2


def test_rate_saved_and_read_back(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rate-study")
    a, b = order_of(engine, aid)
    form = {
        "csrf_token": csrf,
        "version": "0",
        "action": "submit",
        "score-A-relevancy": "5",
        "score-A-fluency": "4",
        "score-A-correctness": "3",
        "score-B-relevancy": "1",
        "score-B-fluency": "2",
        "score-B-correctness": "2",
    }
    assert app_client.post(f"/a/{aid}", data=form, follow_redirects=False).status_code == 303
    assert stored(engine, aid)[2] == {
        "answers": {
            a: {"relevancy": 5, "fluency": 4, "correctness": 3},
            b: {"relevancy": 1, "fluency": 2, "correctness": 2},
        }
    }
    page = app_client.get(f"/a/{aid}").text
    assert re.search(r'id="score-A-fluency-4"[^>]*value="4"\s*checked', page)
    assert len(re.findall(r"checked", page)) == 6
    assert "Knowledge correctness" in page


def test_question_saved_and_read_back(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "question-study")
    page = app_client.get(f"/a/{aid}").text
    for name in ("field-question", "field-options-0", "field-options-2", "field-answer"):
        assert f'id="{name}" name="{name}"' in page
    form = {
        "csrf_token": csrf,
        "version": "0",
        "action": "submit",
        "decision": "revise",
        "field-question": "Which anticoagulant was started?",
        "field-options-0": "aspirin",
        "field-options-1": "heparin",
        "field-options-2": "apixaban",
        "field-answer": "B",
        "comment": "fixed",
    }
    assert app_client.post(f"/a/{aid}", data=form, follow_redirects=False).status_code == 303
    assert stored(engine, aid)[2] == {
        "decision": "revise",
        "fields": {
            "question": "Which anticoagulant was started?",
            "options": ["aspirin", "heparin", "apixaban"],
            "answer": "B",
        },
        "comment": "fixed",
    }
    page = app_client.get(f"/a/{aid}").text
    assert re.search(r'id="decision-revise"[^>]*checked', page)
    assert 'value="apixaban"' in page and "Generated: warfarin" in page


def test_question_keep_with_untouched_multiline_fields(app_client: TestClient, engine: Engine) -> None:
    """Browsers post textarea line breaks as CRLF: an untouched field must still count as unchanged."""
    csrf = login(app_client, "bob")
    aid = assignment_of(engine, "bob", "question-study")
    form = {
        "csrf_token": csrf,
        "version": "0",
        "action": "submit",
        "decision": "keep",
        "field-question": "Which drug was started\r\nafter admission?",
        "field-options-0": "aspirin",
        "field-options-1": "heparin",
        "field-options-2": "warfarin",
        "field-answer": "B",
    }
    assert app_client.post(f"/a/{aid}", data=form, follow_redirects=False).status_code == 303
    assert stored(engine, aid)[2] == {
        "decision": "keep",
        "fields": items_for("question")[0].fields,
        "comment": "",
    }


def test_sentence_saved_and_read_back(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "sentence-study")
    form = {
        "csrf_token": csrf,
        "version": "0",
        "action": "save",
        "label-abnormality": "abnormal",
        "rewrite": "Small left pleural effusion.",
    }
    assert app_client.post(f"/a/{aid}", data=form, follow_redirects=False).status_code == 303
    assert stored(engine, aid) == (
        1,
        "draft",
        {"labels": {"abnormality": "abnormal", "ambiguity": None}, "rewrite": "Small left pleural effusion."},
    )
    page = app_client.get(f"/a/{aid}").text
    assert re.search(r'id="label-abnormality-2"[^>]*value="abnormal"\s*checked', page)
    assert 'name="rewrite" rows="4">\nSmall left pleural effusion.</textarea>' in page
    # submitting without the second label is refused by the kind, and says which
    form.update(version="1", action="submit")
    refused = app_client.post(f"/a/{aid}", data=form)
    assert refused.status_code == 422 and "choose ambiguity: unambiguous or ambiguous" in refused.text


# --- refusals keep the reviewer's work ------------------------------------------------------------


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"reasons-B": []}, "Answer B is marked incorrect: tick at least one reason (C1, C2, C3)"),
        ({"rank-A": "abc"}, "Answer A: the rank must be a whole number from 1 to 3, got &#39;abc&#39;"),
        ({"rank-C": "2"}, "share rank 2; this study does not allow ties"),
        ({"correct-A": "maybe"}, "Answer A: correct must be true or false"),
        ({"reasons-B": ["C9"]}, "Answer B: reason &#39;C9&#39; is unknown"),
    ],
)
def test_invalid_rank_refused_with_message(
    app_client: TestClient, engine: Engine, over: dict[str, Any], message: str
) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    response = app_client.post(f"/a/{aid}", data=rank_form(csrf, 0, **over))
    assert response.status_code == 422
    assert 'id="form-error"' in response.text and message in response.text
    assert stored(engine, aid) == (0, "pending", None) and audit_count(engine) == 0
    # what was typed is still in the form
    assert "wrong dose\nfor the weight</textarea>" in response.text
    if "rank-A" in over:
        assert re.search(r'id="rank-A" name="rank-A"[^>]*value="abc"', response.text)


def test_incomplete_form_is_a_bad_request(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    for form in (rank_form(csrf, 0, action="publish"), {**rank_form(csrf, 0), "version": "v1"}):
        assert app_client.post(f"/a/{aid}", data=form).status_code == 400
    assert stored(engine, aid)[0] == 0


def test_stale_save_is_refused_and_loses_nothing(app_client: TestClient, engine: Engine) -> None:
    csrf = login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r2")
    _, b, c = order_of(engine, aid)
    # tab 1 saves a draft: version 0 -> 1
    first = rank_form(csrf, 0, action="save", **{"rationale-B": "from tab one"})
    assert app_client.post(f"/a/{aid}", data=first, follow_redirects=False).status_code == 303
    saved = stored(engine, aid)
    assert saved[0] == 1
    # tab 2 still shows version 0 and saves other values
    second = rank_form(csrf, 0, **{"rank-A": "3", "rank-C": "1", "rationale-B": "from tab two"})
    response = app_client.post(f"/a/{aid}", data=second)
    assert response.status_code == 409
    assert "someone saved this item since you opened it" in response.text
    assert stored(engine, aid) == saved and audit_count(engine) == 1  # the database kept tab one's save
    stale = re.search(r'<dl id="stale-saved">(.*?)</dl>', response.text, re.S)
    assert stale and "rationale: from tab one" in stale.group(1)  # what is stored now, shown
    assert "from tab two</textarea>" in response.text  # the reviewer's values, still in the form
    assert re.search(r'id="rank-A" name="rank-A"[^>]*value="3"', response.text)
    assert 'id="form-version" name="version" value="1"' in response.text
    # saving again from that page is a deliberate overwrite, and it works
    assert (
        app_client.post(f"/a/{aid}", data={**second, "version": "1"}, follow_redirects=False).status_code
        == 303
    )
    version, status, payload = stored(engine, aid)
    assert (version, status) == (2, "submitted") and payload is not None
    assert payload["answers"][b]["rationale"] == "from tab two" and payload["answers"][c]["rank"] == 1


# --- the record pane ------------------------------------------------------------------------------


def test_long_record_comes_in_bounded_pages(app_client: TestClient, engine: Engine) -> None:
    login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r1")
    page = app_client.get(f"/a/{aid}")
    assert page.status_code == 200
    assert len(page.content) < 60_000  # one page of the record, not 2 MB
    first = record_text(page.text)
    assert len(first) == 20_000 and first.startswith("line 00000 ") and first.endswith("\n")
    assert 'data-page="1" data-pages="100"' in page.text
    for n, expect in ((2, 2), (100, 100), (999, 100), (0, 1), ("abc", 1)):
        fragment = app_client.get(f"/a/{aid}/context?page={n}")
        assert fragment.status_code == 200 and len(fragment.content) < 30_000
        text = record_text(fragment.text)
        assert f'data-page="{expect}" data-pages="100"' in fragment.text
        assert text.startswith(f"line {(expect - 1) * 200:05d} ")
        assert len(text) == 20_000
    # without script, ?page= on the item page shows that page
    assert record_text(app_client.get(f"/a/{aid}?page=7").text).startswith("line 01200 ")


def test_the_chart_comes_as_an_escaped_fragment_of_the_callers_own_item(
    app_client: TestClient, engine: Engine
) -> None:
    """The item page stays small (the chart is fetched after it); the fragment is the whole record
    as a chart, every byte of it escaped, and only for an assignment of the caller."""
    login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r1")
    page = app_client.get(f"/a/{aid}")
    assert f'data-src="/a/{aid}/chart"' in page.text and 'class="chart"' not in page.text
    chart = app_client.get(f"/a/{aid}/chart")
    assert chart.status_code == 200 and 'id="chart" data-kind="text"' in chart.text
    assert "line 00000 " in chart.text and "final line zebrafinch" in chart.text  # the whole record
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in chart.text and "<script>alert" not in chart.text
    assert app_client.get(f"/a/{aid + 10_000}/chart").status_code == 404
    assert app_client.get("/static/chart/chart.js").headers["content-type"].startswith("text/javascript")
    assert app_client.get("/static/chart/other.js").status_code == 404


def test_search_finds_every_page_holding_the_term(app_client: TestClient, engine: Engine) -> None:
    login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r1")
    found = app_client.get(f"/a/{aid}/search?q=ZEBRAFINCH")
    assert found.status_code == 200
    assert [int(p) for p in re.findall(r'<li class="search-hit" data-page="(\d+)"', found.text)] == [7, 100]
    assert "2 matches on 2 pages." in found.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; <mark>ZebraFinch</mark> seen" in found.text
    assert "<script>alert" not in found.text
    page7 = app_client.get(f"/a/{aid}/context?page=7")
    assert "ZebraFinch" in record_text(page7.text) and "&lt;script&gt;" in page7.text
    none = app_client.get(f"/a/{aid}/search?q=okapi")
    assert 'id="search-none"' in none.text and "okapi" in none.text
    assert 'id="search-problem"' in app_client.get(f"/a/{aid}/search?q=%20").text
    assert "too long" in app_client.get(f"/a/{aid}/search?q={'x' * 201}").text


def test_record_paging_rules() -> None:
    assert record.page_starts("") == [0]
    assert record.page_starts("x" * 50_000) == [0, 20_000, 40_000]  # no break: hard cuts
    words = "word " * 10_000  # 50,000 characters; a cut lands after the last space in the window
    assert record.page_starts(words) == [0, 20_000, 40_000]
    text = "a" * 15_000 + "\n" + "b" * 10_000  # the break in the second half of the window wins
    starts = record.page_starts(text)
    assert starts == [0, 15_001] and record.page_text(text, starts, 2) == "b" * 10_000
    early = "a" * 5_000 + "\n" + "b" * 30_000  # a break in the first half is too early: hard cut
    assert record.page_starts(early) == [0, 20_000]
    turkish = "İ" * 10 + " zebra"  # "İ".lower() is two characters: offsets from lower() would drift
    hits = record.search(turkish, [0], "ZEBRA")
    assert [(h.page, h.count) for h in hits] == [(1, 1)]
    assert hits[0].snippets[0] == record.Snippet(before="İ" * 10 + " ", match="zebra", after="")


# --- the app's envelope ---------------------------------------------------------------------------


def test_security_headers_and_escaping(app_client: TestClient, engine: Engine) -> None:
    login(app_client, "ann")
    aid = assignment_of(engine, "ann", "rank-study", "r1")
    page = app_client.get(f"/a/{aid}")
    assert page.headers["cache-control"] == "no-store"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert "Summarise the &lt;b&gt;record&lt;/b&gt;" in page.text
    assert "<script>" not in page.text.replace('<script src="/static/review.js" defer></script>', "")
    static = app_client.get("/static/review.js")
    assert static.status_code == 200 and "beforeunload" in static.text
    assert "http://" not in static.text and "https://" not in static.text  # nothing fetched from elsewhere
    assert app_client.get("/static/review.css").status_code == 200


def test_check_host_keeps_the_app_on_loopback() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        check_host(host, allow_remote=False)
    with pytest.raises(UserError, match="loopback"):
        check_host("0.0.0.0", allow_remote=False)
    check_host("0.0.0.0", allow_remote=True)


def test_access_log_drops_the_query_string() -> None:
    """A record search term (patient text) must not reach uvicorn's access log."""
    import logging

    from clinieval.review.app import _NoQuery

    line = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/a/3/search?q=metastatic+carcinoma", "1.1", 200),
        None,
    )
    assert _NoQuery().filter(line)
    assert line.getMessage() == '127.0.0.1:5 - "GET /a/3/search HTTP/1.1" 200'


def test_admin_pages_name_a_correctness_study_by_what_reviewers_do(
    app_client: TestClient, engine: Engine
) -> None:
    """A rank study that asks no ranking (``suite sample``'s correctness studies) is "Mark answers
    correct" on the admin pages as in the reviewer's queue; they said "Rank answers"."""
    answers = (AnswerIn("a1", SOURCES[0], "only answer"),)
    importing.import_items(
        engine, "right-or-wrong", "rank", {"rank": False}, [ReviewItem("c1", "Q?", answers=answers)]
    )
    login(app_client, "admin")
    listing = app_client.get("/admin").text
    row = re.search(r'<tr class="study-row" data-study="right-or-wrong">.*?</tr>', listing, re.S)
    assert row and "Mark answers correct" in row.group(0) and "Rank answers" not in row.group(0)
    ranked = re.search(r'<tr class="study-row" data-study="rank-study">.*?</tr>', listing, re.S)
    assert ranked and "Rank answers" in ranked.group(0)
    page = app_client.get("/admin/studies/right-or-wrong").text
    assert '<span class="kind">Mark answers correct</span>' in page
