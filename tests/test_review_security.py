"""The review app's security envelope (issue 26, items 1-5): server-side sessions that logout,
password resets, user removal, revokes and a secret rotation end; the signing secret out of the
database, in a 0600 file beside it; database files 0600; login throttling per user and per
address; the ``Secure`` cookie flag over HTTPS and with ``--allow-remote``; an audit trail of every
write that no cascade deletes, exportable; and the commands that do all this.

Each test drives the real app (FastAPI's TestClient, or a real server) over a real SQLite file.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, inspect, select, text, update
from typer.testing import CliRunner

from clinieval.cli.review import review_app
from clinieval.errors import UserError
from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.app import create_app
from clinieval.review.db import Assignment, User, read_session, write_session
from clinieval.review.items import AnswerIn, ReviewItem
from tests.conftest import free_port, run_cli, wait_http

PASSWORDS = {"admin": "admin-pass-1", "ann": "ann-pass-123", "bob": "bob-pass-123"}
pytest_plugins = ["tests.postgres"]

COOKIE = "clinieval_review"
THROTTLED = "Too many failed sign-ins; try again in 15 minutes."


def items() -> list[ReviewItem]:
    answers = tuple(AnswerIn(f"a{i}", f"model-{m}", f"answer {m}") for i, m in enumerate("xyz", 1))
    return [
        ReviewItem(item=k, prompt=f"instruction {k}", context="note", answers=answers) for k in ("q1", "q2")
    ]


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("review") / "template.sqlite"
    engine = store.init_db(path)
    for name, password in PASSWORDS.items():
        accounts.add_user(engine, name, "admin" if name == "admin" else "reviewer", password)
    importing.import_items(engine, "med", "rank", {}, items())
    assigning.assign(engine, "med", per_item=2, seed=3)
    engine.dispose()
    return path


@pytest.fixture
def db(template_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "review.sqlite"
    shutil.copy(template_db, copy)
    return copy


@pytest.fixture
def engine(db: Path) -> Iterator[Engine]:
    engine = store.connect(db)
    yield engine
    engine.dispose()


def client(
    engine: Engine, *, address: str = "10.0.0.1", base: str = "http://127.0.0.1", **kw: Any
) -> TestClient:
    return TestClient(create_app(engine, **kw), base_url=base, client=(address, 40000))


def token(page: str) -> str:
    import re

    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found.group(1)


def try_login(c: TestClient, name: str, password: str) -> Any:  # the TestClient's own httpx response
    form = c.get("/login")
    return c.post(
        "/login",
        data={"name": name, "password": password, "csrf_token": token(form.text)},
        follow_redirects=False,
    )


def login(c: TestClient, name: str) -> str:
    """Log in; the CSRF token of the new session (read off the queue page)."""
    response = try_login(c, name, PASSWORDS[name])
    assert response.status_code == 303, response.text
    return token(c.get("/").text)


def logged_in_as(c: TestClient) -> str | None:
    """Whose queue ``/`` shows, or None when it sends the browser to the login form."""
    import re

    response = c.get("/", follow_redirects=False)
    if response.status_code == 303:
        assert response.headers["location"].startswith("/login")
        return None
    found = re.search(r'<span id="user-name">([^<]+)</span>', response.text)
    assert response.status_code == 200 and found
    return found.group(1)


def copy_cookie(source: TestClient, target: TestClient) -> None:
    target.cookies.set(COOKIE, source.cookies[COOKIE])


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(review_app, list(args), input=input)


# --- 1. server-side sessions --------------------------------------------------------------------------


def test_a_copied_cookie_stops_working_after_logout(engine: Engine) -> None:
    first, thief = client(engine), client(engine, address="10.0.0.66")
    csrf = login(first, "ann")
    copy_cookie(first, thief)
    assert logged_in_as(thief) == "ann"  # a copy works while the session lives (as any bearer token)
    assert first.post("/logout", data={"csrf_token": csrf}, follow_redirects=False).status_code == 303
    assert logged_in_as(first) is None
    assert logged_in_as(thief) is None
    aid = reviewing.reviewer_queue(engine, uid(engine, "ann"))[0].id
    refused = thief.post(f"/a/{aid}", data={"csrf_token": csrf, "version": "0", "action": "save"})
    assert refused.status_code in (401, 403)
    assert stored_version(engine, aid) == 0


def test_the_cookie_is_a_random_id_and_the_server_keeps_only_its_keyed_hash(engine: Engine, db: Path) -> None:
    from clinieval.review.db import LoginSession

    c = client(engine)
    login(c, "ann")
    value = c.cookies[COOKIE]
    assert len(value) >= 43 and set(value) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )
    with read_session(engine) as s:
        rows = s.scalars(select(LoginSession)).all()
    assert [r.user_id for r in rows] == [uid(engine, "ann")]
    assert value not in rows[0].id_hash and value not in db.read_bytes().decode("latin-1")
    # a second login is a second session; logging one out leaves the other
    other = client(engine)
    login(other, "ann")
    assert other.cookies[COOKIE] != value
    csrf = token(c.get("/").text)
    c.post("/logout", data={"csrf_token": csrf})
    assert logged_in_as(other) == "ann" and logged_in_as(c) is None


def test_password_reset_removal_and_revoke_end_sessions(engine: Engine) -> None:
    from clinieval.review import accounts, sessions

    ann, ann2, bob, admin = client(engine), client(engine), client(engine), client(engine)
    for c, name in ((ann, "ann"), (ann2, "ann"), (bob, "bob"), (admin, "admin")):
        login(c, name)
    assert accounts.reset_password(engine, "ann", "ann-new-pass-1") == 2
    assert logged_in_as(ann) is None and logged_in_as(ann2) is None and logged_in_as(bob) == "bob"
    assert try_login(ann, "ann", PASSWORDS["ann"]).status_code == 401
    assert try_login(ann, "ann", "ann-new-pass-1").status_code == 303

    assert sessions.revoke(engine, "bob") == 1
    assert logged_in_as(bob) is None and logged_in_as(ann) == "ann"
    login(bob, "bob")
    accounts.remove_user(engine, "bob")
    assert logged_in_as(bob) is None
    assert try_login(bob, "bob", PASSWORDS["bob"]).status_code == 401  # cannot log in again

    assert sessions.revoke(engine, None) == 2  # everyone: ann and admin
    assert logged_in_as(ann) is None and logged_in_as(admin) is None

    with pytest.raises(UserError, match="no user named 'zed'"):
        sessions.revoke(engine, "zed")
    with pytest.raises(UserError, match="no user named 'zed'"):
        accounts.reset_password(engine, "zed", "long-enough-1")
    with pytest.raises(UserError, match="at least 8 characters"):
        accounts.reset_password(engine, "ann", "short")


def test_sessions_end_after_idle_and_absolute_limits(engine: Engine) -> None:
    from clinieval.review.db import LoginSession
    from clinieval.review.sessions import SessionPolicy

    assert SessionPolicy() == SessionPolicy(idle=dt.timedelta(minutes=30), absolute=dt.timedelta(hours=12))
    c = client(engine)
    login(c, "ann")
    now = dt.datetime.now(dt.UTC)

    def shift(**values: dt.datetime) -> None:
        with write_session(engine) as s:
            s.execute(update(LoginSession).values(**values))

    shift(last_seen=now - dt.timedelta(minutes=29))
    assert logged_in_as(c) == "ann"  # and the request renews it
    with read_session(engine) as s:
        seen = s.scalars(select(LoginSession.last_seen)).one()
    assert seen > now - dt.timedelta(seconds=30)
    shift(last_seen=now - dt.timedelta(minutes=31))
    assert logged_in_as(c) is None
    with read_session(engine) as s:
        assert s.scalars(select(LoginSession)).all() == []  # the expired row is gone

    login(c, "ann")
    shift(created_at=now - dt.timedelta(hours=12, minutes=1))  # active all along, but 12 h old
    assert logged_in_as(c) is None

    short = client(
        engine, session_policy=SessionPolicy(idle=dt.timedelta(minutes=5), absolute=dt.timedelta(hours=1))
    )
    login(short, "bob")
    shift(last_seen=now - dt.timedelta(minutes=6))
    assert logged_in_as(short) is None
    set_cookie = try_login(short, "bob", PASSWORDS["bob"]).headers["set-cookie"]
    assert "Max-Age=3600" in set_cookie  # the browser's copy lasts no longer than the server's


def test_a_keepalive_while_editing_renews_the_idle_timer_but_not_the_absolute_limit(engine: Engine) -> None:
    from clinieval.review.db import LoginSession

    c = client(engine)
    csrf = login(c, "ann")
    [entry, *_] = reviewing.reviewer_queue(engine, uid(engine, "ann"))
    header = c.get(f"/a/{entry.id}").text
    assert 'data-status="pending">Not started</span>' in header  # the queue's words, not "pending"
    now = dt.datetime.now(dt.UTC)
    with write_session(engine) as s:  # 25 minutes of typing without a request
        s.execute(update(LoginSession).values(last_seen=now - dt.timedelta(minutes=25)))
    assert c.post("/keepalive", headers={"X-CSRF-Token": csrf}).status_code == 204
    with read_session(engine) as s:
        seen = s.scalar(select(LoginSession.last_seen))
    assert seen is not None and now - seen.replace(tzinfo=dt.UTC) < dt.timedelta(minutes=1)
    assert c.post("/keepalive").status_code == 403  # a POST like any other: the CSRF token is needed
    with write_session(engine) as s:  # past the absolute lifetime, a keep-alive does not help
        s.execute(update(LoginSession).values(created_at=now - dt.timedelta(hours=12, minutes=1)))
    assert c.post("/keepalive", headers={"X-CSRF-Token": csrf}).status_code == 401
    assert logged_in_as(c) is None


def test_rotating_the_secret_ends_every_session_on_a_running_app(engine: Engine, db: Path) -> None:
    from clinieval.review.sessions import rotate_secret, secret_path

    c, d = client(engine), client(engine)
    login(c, "ann")
    login(d, "admin")
    before = secret_path(engine.url).read_text()
    assert rotate_secret(engine) == 2
    assert secret_path(engine.url).read_text() != before
    assert logged_in_as(c) is None and logged_in_as(d) is None
    login(c, "ann")  # the running app picked up the new secret: new sessions work
    assert logged_in_as(c) == "ann"


# --- 2. the secret is never in the database; files 0600 -----------------------------------------------


def forged_cookies(values: list[str], uid_: int) -> list[str]:
    """What today's (Starlette) session cookie for ``uid_`` looks like, signed with each value."""
    import itsdangerous

    data = base64.b64encode(json.dumps({"uid": uid_, "csrf": "x"}).encode())
    return [itsdangerous.TimestampSigner(str(v)).sign(data).decode() for v in values]


def test_reading_the_database_alone_does_not_let_one_log_in(engine: Engine, db: Path) -> None:
    c = client(engine)
    login(c, "admin")  # a live session, so its row is in the file too
    with sqlite3.connect(db) as raw:
        tables = [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        values = [
            str(v)
            for t in tables
            for row in raw.execute(f'SELECT * FROM "{t}"')
            for v in row
            if v is not None
        ]
        settings = dict(raw.execute("SELECT key, value FROM settings").fetchall())
    assert "session_secret" not in settings
    admin_id = uid(engine, "admin")
    thief = client(engine, address="10.0.0.66")
    for cookie in [*forged_cookies(values, admin_id), *values]:
        thief.cookies.set(COOKIE, cookie)
        response = thief.get("/admin", follow_redirects=False)
        assert response.status_code == 303, cookie


def test_the_secret_lives_in_a_0600_file_beside_the_database(tmp_path: Path) -> None:
    from clinieval.review.sessions import secret_path

    path = tmp_path / "new" / "review.sqlite"
    old = os.umask(0)  # the most permissive umask: the files must still be private
    try:
        engine = store.init_db(path)
        accounts.add_user(engine, "ann", "reviewer", PASSWORDS["ann"])  # a write: -wal and -shm exist now
        secret = secret_path(engine.url)
        assert secret == path.with_name("review.sqlite.secret")
        for f in (path, secret, path.with_name("review.sqlite-wal"), path.with_name("review.sqlite-shm")):
            assert f.exists(), f
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert len(bytes.fromhex(secret.read_text().strip())) >= 32
        first = secret.read_text()
        store.init_db(path)  # again: the secret is kept
        assert secret.read_text() == first
        engine.dispose()
    finally:
        os.umask(old)


def test_an_older_database_is_upgraded_the_secret_moved_out_and_its_files_tightened(tmp_path: Path) -> None:
    from alembic import command

    from clinieval.review.db import SCHEMA_REVISION, database_url, make_engine
    from clinieval.review.sessions import secret_path

    path = tmp_path / "old.sqlite"
    engine = make_engine(database_url(path))
    with engine.begin() as conn:
        command.upgrade(store._migrations_config(conn), "0001")
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO settings (key, value) VALUES ('session_secret', 'leaked-secret-value')")
        )
        conn.execute(
            text(
                "INSERT INTO users (id, name, role, password_hash, created_at)"
                " VALUES (1, 'ann', 'reviewer', 'h', :t)"
            ),
            {"t": dt.datetime(2026, 1, 1)},
        )
        conn.execute(
            text(
                "INSERT INTO studies (id, name, kind, config, created_at) VALUES (1, 'med', 'rank', '{}', :t)"
            ),
            {"t": dt.datetime(2026, 1, 1)},
        )
        conn.execute(
            text(
                "INSERT INTO items (id, study_id, key, prompt, context, fields, meta)"
                " VALUES (1, 1, 'q1', 'p', 'c', '{}', '{}')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO assignments"
                " (id, study_id, item_id, user_id, answer_order, status, version, updated_at)"
                " VALUES (1, 1, 1, 1, '[]', 'draft', 1, :t)"
            ),
            {"t": dt.datetime(2026, 1, 1)},
        )
        conn.execute(
            text(
                "INSERT INTO audit (assignment_id, user_id, at, action, old, new, old_version, new_version)"
                " VALUES (1, 1, :t, 'save', NULL, '{}', 0, 1)"
            ),
            {"t": dt.datetime(2026, 1, 1)},
        )
    engine.dispose()
    path.chmod(0o644)

    upgraded = store.init_db(path)
    assert store.current_revision(upgraded) == SCHEMA_REVISION
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = secret_path(upgraded.url)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert "leaked-secret-value" not in secret.read_text()  # a secret that sat in the database is not reused
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM settings WHERE key = 'session_secret'").fetchone()[0] == 0
        row = raw.execute("SELECT user_name, study, item, action FROM audit").fetchone()
    assert row == ("ann", "med", "q1", "save")  # the history now names who and what by itself
    upgraded.dispose()


# --- 3. login throttling ---------------------------------------------------------------------------------


def test_failed_logins_are_throttled_per_user_and_a_success_resets_the_count(engine: Engine) -> None:
    c = client(engine)
    for _ in range(4):
        assert try_login(c, "ann", "wrong-password").status_code == 401
    assert try_login(c, "ann", PASSWORDS["ann"]).status_code == 303  # the count starts again
    c.cookies.clear()
    for _ in range(5):
        assert try_login(c, "ann", "wrong-password").status_code == 401
    refused = try_login(c, "ann", PASSWORDS["ann"])  # even the right password, now
    assert refused.status_code == 429
    assert THROTTLED in refused.text and 'id="login-error"' in refused.text
    assert refused.headers["retry-after"] == "900"
    assert logged_in_as(c) is None
    # from another address, and after a restart (the count is in the database), ann is still refused
    restarted = client(engine, address="10.9.9.9")
    assert try_login(restarted, "ann", PASSWORDS["ann"]).status_code == 429
    assert try_login(restarted, "ANN", "whatever-1").status_code == 429  # names are compared without case
    # bob, from the same address, is not
    assert try_login(c, "bob", PASSWORDS["bob"]).status_code == 303

    from clinieval.review.db import LoginFailure

    with write_session(engine) as s:  # 15 minutes later
        s.execute(
            update(LoginFailure).values(at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=15, seconds=1))
        )
    assert try_login(restarted, "ann", PASSWORDS["ann"]).status_code == 303


def test_failed_logins_are_throttled_per_address(engine: Engine) -> None:
    from clinieval.review.sessions import ThrottlePolicy

    assert ThrottlePolicy() == ThrottlePolicy(per_user=5, per_address=20, window=dt.timedelta(minutes=15))
    spray = client(engine, address="10.6.6.6")
    for i in range(20):  # a different name each time: no user reaches 5
        assert try_login(spray, f"guess-{i}", "password-1").status_code == 401
    refused = try_login(spray, "ann", PASSWORDS["ann"])
    assert refused.status_code == 429 and THROTTLED in refused.text
    assert try_login(client(engine, address="10.7.7.7"), "ann", PASSWORDS["ann"]).status_code == 303

    strict = client(engine, address="10.8.8.8", throttle=ThrottlePolicy(per_user=2, per_address=3))
    for name in ("x1", "x2", "x3"):
        try_login(strict, name, "password-1")
    message = try_login(strict, "bob", PASSWORDS["bob"])
    assert message.status_code == 429 and THROTTLED in message.text


def test_a_bad_csrf_token_on_the_login_form_is_no_failed_sign_in(engine: Engine) -> None:
    c = client(engine)
    for _ in range(6):
        assert (
            c.post("/login", data={"name": "ann", "password": "x" * 9, "csrf_token": "forged"}).status_code
            == 403
        )
    assert try_login(c, "ann", PASSWORDS["ann"]).status_code == 303


# --- 4. the Secure flag ---------------------------------------------------------------------------------


def cookie_header(c: TestClient) -> str:
    response = try_login(c, "ann", PASSWORDS["ann"])
    assert response.status_code == 303
    headers: list[str] = [
        v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith(COOKIE + "=")
    ]
    assert len(headers) == 1
    return headers[0]


def test_the_cookie_is_secure_over_https_and_when_told(engine: Engine) -> None:
    def flags(header: str) -> set[str]:
        return {f.strip().lower() for f in header.split(";")[1:]}

    plain = client(engine)
    for header in (plain.get("/login").headers["set-cookie"], cookie_header(plain)):
        assert {"httponly", "samesite=strict", "path=/"} <= flags(header) and "secure" not in flags(header)
    https = client(engine, base="https://review.example")
    for header in (https.get("/login").headers["set-cookie"], cookie_header(https)):
        assert {"secure", "httponly", "samesite=strict"} <= flags(header)
    # told (behind an HTTPS proxy, the app itself sees plain HTTP): a browser would send it back only
    # over HTTPS, so this client, speaking HTTP, can only read the header
    told = client(engine, secure_cookies=True)
    assert {"secure", "httponly", "samesite=strict"} <= flags(told.get("/login").headers["set-cookie"])


def test_serve_with_allow_remote_sets_the_secure_flag(db: Path, tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    code = "from clinieval.cli.review import review_app; review_app()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--db", str(db), "--port", str(port), "--allow-remote"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/login", timeout=60, proc=proc)
        response = httpx.get(f"http://127.0.0.1:{port}/login", timeout=10)
        flags = [f.strip().lower() for f in response.headers["set-cookie"].split(";")]
        assert {"secure", "httponly", "samesite=strict"} <= set(flags)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_a_secure_cookie_over_plain_http_says_sign_in_needs_https(engine: Engine) -> None:
    remote = client(engine, secure_cookies=True, address="10.2.3.4")
    form = remote.get("/login")
    assert "secure" in form.headers["set-cookie"].lower()
    remote.cookies.clear()  # what a browser does with a Secure cookie sent over plain HTTP
    refused = remote.post(
        "/login", data={"name": "ann", "password": PASSWORDS["ann"], "csrf_token": token(form.text)}
    )
    assert refused.status_code == 403
    assert "this page was opened over plain HTTP; sign-in needs HTTPS" in refused.text
    assert "--trusted-proxy" in refused.text
    stale = client(engine, address="10.2.3.4")  # without the Secure cause, the usual message
    assert "security token is missing" in stale.post("/login", data={"name": "ann", "csrf_token": "x"}).text


def nginx_tls_front(folder: Path, upstream_port: int) -> tuple[Any, int, Path]:
    """Debian's nginx terminating TLS on 127.0.0.1 in front of the app, setting the forwarded
    headers the way a hospital's proxy does."""
    from tests.conftest import missing
    from tests.real_servers import NGINX, Nginx, make_certs

    if not NGINX.is_file() or shutil.which("openssl") is None:
        missing(f"{NGINX} or openssl is missing: install Debian's nginx and openssl (`make install`)")
    certs = make_certs(folder / "certs")
    port = free_port()
    temp = " ".join(
        f"{n}_temp_path {folder}/{n};" for n in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = f"""daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
  {temp}
  access_log off;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {certs.cert}; ssl_certificate_key {certs.key};
    location / {{
      proxy_pass http://127.0.0.1:{upstream_port};
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }}
  }}
}}
"""
    return Nginx(folder, conf).start(ready=[("127.0.0.1", port)]), port, certs.ca


def test_behind_a_real_tls_proxy_the_cookie_is_secure_and_the_throttle_sees_each_client(
    db: Path, tmp_path: Path
) -> None:
    from clinieval.review.audit import audit_rows

    app_port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    code = "from clinieval.cli.review import review_app; review_app()"
    args = ["serve", "--db", str(db), "--port", str(app_port), "--trusted-proxy", "127.0.0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    nginx = None
    try:
        wait_http(f"http://127.0.0.1:{app_port}/login", timeout=60, proc=proc)
        nginx, port, ca = nginx_tls_front(tmp_path / "nginx", app_port)

        def browser(source: str, *, direct: bool = False) -> httpx.Client:
            """A client on its own loopback address (127.0.0.x), through nginx or straight to the app."""
            import ssl

            trust = ssl.create_default_context(cafile=str(ca))
            transport = httpx.HTTPTransport(local_address=source, verify=trust)
            base = f"http://127.0.0.1:{app_port}" if direct else f"https://127.0.0.1:{port}"
            return httpx.Client(transport=transport, base_url=base, timeout=30)

        def attempt(c: httpx.Client, name: str, password: str, **headers: str) -> httpx.Response:
            form = c.get("/login", headers=headers)
            data = {"name": name, "password": password, "csrf_token": token(form.text)}
            return c.post("/login", data=data, headers=headers, follow_redirects=False)

        ann = browser("127.0.0.2")
        page = ann.get("/login")
        flags = {f.strip().lower() for f in page.headers["set-cookie"].split(";")}
        assert {"secure", "httponly", "samesite=strict"} <= flags  # the browser is on HTTPS
        assert attempt(ann, "ann", PASSWORDS["ann"]).status_code == 303

        # a password sprayer behind the proxy, forging X-Forwarded-For: throttled by its own address
        spray = browser("127.0.0.3")
        for i in range(20):
            assert attempt(spray, f"guess-{i}", "pw-1", **{"X-Forwarded-For": "10.6.6.6"}).status_code == 401
        assert attempt(spray, "bob", PASSWORDS["bob"]).status_code == 429
        assert attempt(browser("127.0.0.4"), "bob", PASSWORDS["bob"]).status_code == 303  # others are not

        # straight to the app, not through the trusted proxy: the forwarded headers are ignored
        forged = {"X-Forwarded-For": "10.9.9.9", "X-Forwarded-Proto": "https"}
        direct = browser("127.0.0.5", direct=True)
        assert "secure" not in direct.get("/login", headers=forged).headers["set-cookie"].lower()
        assert attempt(direct, "cat", "pw-2", **forged).status_code == 401

        engine = store.connect(db)
        seen = {(r["action"], (r["detail"] or {}).get("address")) for r in audit_rows(engine)}
        engine.dispose()
        assert {
            ("login", "127.0.0.2"),
            ("login-failed", "127.0.0.3"),
            ("login-throttled", "127.0.0.3"),
        } <= seen
        assert {("login", "127.0.0.4"), ("login-failed", "127.0.0.5")} <= seen
        assert not [a for _, a in seen if a in ("10.6.6.6", "10.9.9.9", "127.0.0.1")]
    finally:
        if nginx is not None:
            nginx.stop()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


# --- 5. the audit trail -----------------------------------------------------------------------------------


def test_audit_rows_are_never_deleted_by_a_cascade(engine: Engine) -> None:
    foreign = inspect(engine).get_foreign_keys("audit")
    assert foreign and all((fk.get("options") or {}).get("ondelete") != "CASCADE" for fk in foreign)
    ann = accounts.verify_user(engine, "ann", PASSWORDS["ann"])
    assert ann is not None
    entry = reviewing.reviewer_queue(engine, ann)[0]
    aid = entry.id
    payload = {"answers": {"a1": {"rank": 1}}}
    reviewing.save(engine, aid, ann, payload, 0, submit=False)
    with write_session(engine) as s:  # what removing a study or an item one day would do
        s.execute(delete(Assignment).where(Assignment.id == aid))
    with write_session(engine) as s:
        s.execute(delete(User).where(User.name == "ann"))
    from clinieval.review.audit import audit_rows

    saves = [r for r in audit_rows(engine) if r["action"] == "save"]
    assert len(saves) == 1
    row = saves[0]
    assert (row["actor"], row["study"], row["item"], row["old_version"], row["new_version"]) == (
        "ann", "med", entry.item, 0, 1
    )  # fmt: skip


def test_every_admin_action_and_save_is_audited_and_exported(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite")
    assert invoke("init", "--db", db).exit_code == 0
    for name in ("ann", "bob", "cat"):
        assert invoke("user", "add", name, "--db", db, input=f"{name}-secret-1\n").exit_code == 0, name
    assert invoke("add-user", "boss", "--role", "admin", "--db", db, input="boss-secret-1\n").exit_code == 0
    items_file = tmp_path / "items.jsonl"
    items_file.write_text("".join(json.dumps(x.to_json()) + "\n" for x in items()))
    done = invoke("import", str(items_file), "--study", "med", "--kind", "rank", "--db", db)
    assert done.exit_code == 0, done.output
    assert invoke("assign", "--study", "med", "--per-item", "2", "--db", db).exit_code == 0

    engine = store.connect(db)
    ann = accounts.verify_user(engine, "ann", "ann-secret-1")
    assert ann is not None
    entry = reviewing.reviewer_queue(engine, ann)[0]
    reviewing.save(engine, entry.id, ann, {"answers": {"a1": {"rank": 1}}}, 0, submit=False)
    c = client(engine)
    assert try_login(c, "bob", "bob-secret-1").status_code == 303

    reset = invoke("user", "reset-password", "ann", "--db", db, input="ann-secret-2\n")
    assert reset.exit_code == 0 and "ann" in reset.output
    assert invoke("revoke", "bob", "--db", db).exit_code == 0
    assert invoke("revoke", "--all", "--db", db).exit_code == 0
    assert invoke("rotate-secret", "--db", db).exit_code == 0
    removed = invoke("user", "remove", "ann", "--db", db)
    assert removed.exit_code == 0 and "ann" in removed.output

    out = tmp_path / "audit.csv"
    assert invoke("audit", "--db", db, "--out", str(out)).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # it holds reviewers' text
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    actions = [r["action"] for r in rows]
    wanted_actions = ("user-add", "import", "assign", "save", "login", "password-reset", "revoke")
    for wanted in (*wanted_actions, "rotate-secret", "user-remove"):
        assert wanted in actions, (wanted, actions)
    assert all(r["at"] and r["actor"] for r in rows)
    save = next(r for r in rows if r["action"] == "save")
    assert (save["actor"], save["study"], save["item"], save["new_version"]) == (
        "ann",
        "med",
        entry.item,
        "1",
    )
    adds = [json.loads(r["detail"]) for r in rows if r["action"] == "user-add"]
    assert [a["user"] for a in adds] == ["ann", "bob", "cat", "boss"] and adds[3]["role"] == "admin"
    assert next(r for r in rows if r["action"] == "user-remove")["actor"].startswith("cli:")
    text_ = out.read_text()
    for secret in ("ann-secret-1", "ann-secret-2", "argon2"):
        assert secret not in text_

    jsonl = tmp_path / "audit.jsonl"
    assert invoke("audit", "--db", db, "--out", str(jsonl)).exit_code == 0
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert [x["action"] for x in lines] == actions
    assert next(x for x in lines if x["action"] == "save")["new"]["answers"]["a1"]["rank"] == 1
    engine.dispose()


def test_every_sign_in_attempt_is_audited_for_good_and_never_its_password(
    engine: Engine, db: Path, tmp_path: Path
) -> None:
    from clinieval.review.db import LoginFailure
    from clinieval.review.sessions import ThrottlePolicy

    wrong = "Wrong-Pw-7f3e91"  # a password string that must appear nowhere
    c = client(engine, address="10.4.4.4", throttle=ThrottlePolicy(per_user=3))
    for _ in range(3):
        assert try_login(c, "Ann ", wrong).status_code == 401
    assert try_login(c, "ann", wrong).status_code == 429
    assert try_login(c, "nobody-here", wrong).status_code == 401  # an unknown name, audited the same
    assert try_login(client(engine, address="10.5.5.5"), "bob", PASSWORDS["bob"]).status_code == 303
    with write_session(engine) as s:  # the throttle's rows age out; the audit's do not
        s.execute(delete(LoginFailure))

    out = tmp_path / "audit.jsonl"
    assert invoke("audit", "--db", str(db), "--out", str(out)).exit_code == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    attempts = [(r["action"], r["actor"], r["detail"]) for r in rows if r["action"].startswith("login")]
    failed = {"address": "10.4.4.4", "outcome": "wrong name or password"}
    assert attempts == [
        *[("login-failed", "Ann", failed)] * 3,
        ("login-throttled", "ann", {"address": "10.4.4.4", "outcome": "throttled"}),
        ("login-failed", "nobody-here", failed),
        ("login", "bob", {"address": "10.5.5.5", "outcome": "signed in"}),
    ]
    csv_out = tmp_path / "audit.csv"
    assert invoke("audit", "--db", str(db), "--out", str(csv_out)).exit_code == 0
    engine.dispose()
    with sqlite3.connect(db) as raw:  # fold the write-ahead log into the file before reading it
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    for where in (stored, out.read_bytes(), csv_out.read_bytes()):
        assert wrong.encode() not in where
    assert b"nobody-here" in stored  # the name typed is there: the check above reads the right file


def test_import_masks_model_names_in_answer_text_and_the_admin_sees_what(tmp_path: Path) -> None:
    from clinieval.review.blinding import masker, name_variants

    assert {"Llama-3-70B", "Llama-3-70B-Instruct"} <= name_variants("meta-llama/Llama-3-70B-Instruct")
    hide = masker(["gpt"])
    assert hide("GPT said; gptq did not") == "[model hidden] said; gptq did not"  # word-bounded

    db = str(tmp_path / "mask.sqlite")
    assert invoke("init", "--db", db).exit_code == 0
    for name, role in (("boss", "admin"), ("ann", "reviewer"), ("bob", "reviewer")):
        added = invoke("user", "add", name, "--role", role, "--db", db, input=f"{name}-secret-1\n")
        assert added.exit_code == 0
    texts = {
        "a1": "I am llama 3 70b, trained by Meta. The INR is high.",  # served name, other separators
        "a2": "As Qwen2-7B-Instruct I would stop warfarin. Ask Dr Orion.",  # after the last /, any case
        "a3": "Hold the dose.",
    }
    sources = {"a1": "openai:http://gpu1:8000/v1@llama-3-70b", "a2": "hf:Qwen/qwen2-7b-instruct", "a3": "m3"}
    item = {"item": "q1", "prompt": "What now?", "context": "INR 5.2",
            "answers": [{"id": k, "source": sources[k], "text": v} for k, v in texts.items()]}  # fmt: skip
    items_file = tmp_path / "items.jsonl"
    items_file.write_text(json.dumps(item) + "\n")
    args = ("import", str(items_file), "--study", "med", "--kind", "rank", "--db", db, "--mask", r"Dr \w+")
    done = invoke(*args)
    assert done.exit_code == 0, done.output
    assert "masked 3 mention(s) of model names in 2 answer(s)" in done.output
    again = invoke(*args)  # the same file again: the masked item is the one already there
    assert again.exit_code == 0 and "0 item(s) added, 1 already there" in again.output, again.output
    assert invoke("assign", "--study", "med", "--per-item", "2", "--db", db).exit_code == 0

    engine = store.connect(db)
    c = client(engine)
    assert try_login(c, "ann", "ann-secret-1").status_code == 303
    [entry] = reviewing.reviewer_queue(engine, uid(engine, "ann"))
    page = c.get(f"/a/{entry.id}").text
    for leaked in ("llama", "Llama", "Qwen", "qwen", "Orion"):
        assert leaked not in page, leaked
    assert "I am [model hidden], trained by Meta." in page and "As [model hidden] I would" in page
    assert "Ask [model hidden]." in page and "Hold the dose." in page

    admin = client(engine)
    assert try_login(admin, "boss", "boss-secret-1").status_code == 303
    study = admin.get("/admin/studies/med").text
    assert "Import masked 3 mentions" in study and "in 2 answers" in study
    assert 'data-item="q1"><td>q1</td><td>3</td>' in study
    assert "<code>Dr \\w+</code>" in study
    assert "llama" not in study.lower() and "qwen" not in study.lower()
    engine.dispose()


# --- 6. the commands ----------------------------------------------------------------------------------------


def test_user_commands_and_their_errors(db: Path, engine: Engine) -> None:
    ann = client(engine)
    login(ann, "ann")
    bad = invoke("user", "remove", "zed", "--db", str(db))
    assert isinstance(bad.exception, UserError) and "no user named 'zed'" in str(bad.exception)
    assert "ann" in str(bad.exception)  # the error lists who there is
    for args in (("revoke", "--db", str(db)), ("revoke", "ann", "--all", "--db", str(db))):
        wrong = invoke(*args)
        assert isinstance(wrong.exception, UserError) and "--all" in str(wrong.exception)

    done = invoke("user", "reset-password", "ann", "--db", str(db), input="short\n")
    assert isinstance(done.exception, UserError) and "at least 8" in str(done.exception)
    assert logged_in_as(ann) == "ann"  # nothing happened
    done = invoke("user", "reset-password", "ann", "--db", str(db), input="ann-brand-new-1\n")
    assert done.exit_code == 0 and "1 session" in done.output
    assert logged_in_as(ann) is None

    # removing a reviewer keeps what they saved and frees what they never opened
    bob = accounts.verify_user(engine, "bob", PASSWORDS["bob"])
    assert bob is not None
    first, _ = reviewing.reviewer_queue(engine, bob)
    reviewing.save(engine, first.id, bob, {"answers": {"a1": {"rank": 1}}}, 0, submit=False)
    removed = invoke("user", "remove", "bob", "--db", str(db))
    assert removed.exit_code == 0, removed.output
    with read_session(engine) as s:
        left = s.scalars(select(Assignment.id).where(Assignment.user_id == bob.id)).all()
    assert list(left) == [first.id]
    assert "bob" not in [u.name for u in accounts.list_users(engine)]
    again = invoke("user", "add", "bob", "--db", str(db), input="bob-pass-999\n")
    assert isinstance(again.exception, UserError) and "removed" in str(again.exception)
    twice = invoke("user", "remove", "bob", "--db", str(db))
    assert isinstance(twice.exception, UserError) and "no user named 'bob'" in str(twice.exception)


def test_command_errors_are_one_line_and_exit_2(db: Path) -> None:
    for args, message in (
        (("review", "user", "remove", "zed"), "error: no user named 'zed'"),
        (("review", "revoke", "zed"), "error: no user named 'zed'"),
        (("review", "revoke"), "error: name a user to revoke, or pass --all"),
    ):
        done = run_cli(*args, "--db", str(db), timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr


# --- helpers -----------------------------------------------------------------------------------------------


def uid(engine: Engine, name: str) -> int:
    with read_session(engine) as s:
        return s.scalars(select(User.id).where(User.name == name)).one()


def stored_version(engine: Engine, aid: int) -> int:
    with read_session(engine) as s:
        a = s.get(Assignment, aid)
        assert a is not None
        return a.version


# --- PostgreSQL ------------------------------------------------------------------------------------------


def test_sessions_throttling_and_audit_on_postgres(
    postgres_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clinieval.review import accounts
    from clinieval.review.audit import audit_rows
    from clinieval.review.sessions import ThrottlePolicy, secret_path

    monkeypatch.setenv("CLINIEVAL_REVIEW_SECRET_FILE", str(tmp_path / "pg.secret"))
    engine = store.init_db(postgres_db_url)
    assert secret_path(engine.url) == tmp_path / "pg.secret"
    assert stat.S_IMODE((tmp_path / "pg.secret").stat().st_mode) == 0o600
    for name in ("ann", "bob"):
        accounts.add_user(engine, name, "reviewer", PASSWORDS[name])
    importing.import_items(engine, "med", "rank", {}, items())
    assigning.assign(engine, "med", per_item=2, seed=3)
    first, copy = client(engine), client(engine)
    csrf = login(first, "ann")
    copy_cookie(first, copy)
    assert logged_in_as(copy) == "ann"
    first.post("/logout", data={"csrf_token": csrf})
    assert logged_in_as(copy) is None

    strict = client(engine, throttle=ThrottlePolicy(per_user=2))
    for _ in range(2):
        assert try_login(strict, "bob", "wrong-password").status_code == 401
    assert try_login(strict, "bob", PASSWORDS["bob"]).status_code == 429
    login(first, "ann")
    assert accounts.reset_password(engine, "ann", "ann-new-pass-1") == 1
    assert logged_in_as(first) is None
    accounts.remove_user(engine, "bob")
    with engine.begin() as conn:  # no cascade from the audit trail on PostgreSQL either
        conn.execute(text("DELETE FROM assignments"))
        conn.execute(text("DELETE FROM users"))
    actions = [r["action"] for r in audit_rows(engine)]
    assert actions[:2] == ["user-add", "user-add"]
    assert {"login", "login-failed", "login-throttled", "logout", "password-reset", "user-remove"} <= set(
        actions
    )
    engine.dispose()
