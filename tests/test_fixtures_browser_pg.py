"""The real-browser and real-PostgreSQL fixtures themselves (tests/browser.py, tests/postgres.py):
Chromium reads a page a real server sends, the page guard stops a request to the network, and
PostgreSQL stores and returns rows through SQLAlchemy, in a per-test database that is dropped."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

pytest_plugins = ["tests.browser", "tests.postgres"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def tiny_app(scope: Scope, receive: Receive, send: Send) -> None:
    """A bare ASGI app: ``/`` is a page that writes its own text with a script; anything else 404."""
    if scope["type"] == "lifespan":
        for event in ("startup", "shutdown"):
            assert (await receive())["type"] == f"lifespan.{event}"
            await send({"type": f"lifespan.{event}.complete"})
        return
    found = scope["path"] == "/"
    body = (
        b"<!DOCTYPE html><title>tiny</title><p id='static'>served by uvicorn</p><p id='dyn'></p>"
        b"<script>document.getElementById('dyn').textContent = 'two plus two is ' + (2 + 2);</script>"
        if found
        else b"not here"
    )
    await send({"type": "http.response.start", "status": 200 if found else 404,
                "headers": [(b"content-type", b"text/html; charset=utf-8")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def test_browser_reads_a_page_from_a_real_server(page: Any, serve: Callable[[Any], str]) -> None:
    """The text a script writes is only there if a real browser ran the page the server sent."""
    url = serve(tiny_app)
    response = page.goto(url + "/")
    assert response is not None and response.status == 200
    assert page.text_content("#static") == "served by uvicorn"
    assert page.text_content("#dyn") == "two plus two is 4"
    assert page.goto(url + "/missing").status == 404


def test_the_server_stops_when_its_block_ends() -> None:
    import httpx

    from tests.browser import serve_asgi

    with serve_asgi(tiny_app) as url:
        assert httpx.get(url + "/").status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/", timeout=2)


def test_a_page_may_not_reach_the_network(browser: Any) -> None:
    """The page fixture's guard, used as the fixture uses it: an external image is aborted and
    recorded, while a data: URL (local) loads."""
    from tests.browser import guard_network, is_local

    context = browser.new_context()
    blocked = guard_network(context)
    try:
        p = context.new_page()
        p.set_content('<img src="https://cdn.example.org/x.png"><p>ok</p>')
        p.wait_for_load_state("load")
    finally:
        context.close()
    assert blocked == ["https://cdn.example.org/x.png"]
    assert (
        is_local("file:///tmp/x.html")
        and is_local("http://127.0.0.1:9/")
        and not is_local("http://10.0.0.1/")
    )


def test_postgres_stores_and_returns_rows(postgres_url: str) -> None:
    import sqlalchemy as sa

    assert postgres_url.startswith("postgresql+psycopg://clinieval:") and "@127.0.0.1:" in postgres_url
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL)"))
            conn.execute(
                sa.text("INSERT INTO notes VALUES (:id, :body)"),
                [{"id": 1, "body": "BP 150/95"}, {"id": 2, "body": "naïve <script>"}],
            )
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, body FROM notes ORDER BY id")).all()
            version = conn.execute(sa.text("SHOW server_version")).scalar_one()
            listen = conn.execute(sa.text("SHOW listen_addresses")).scalar_one()
        assert [tuple(r) for r in rows] == [(1, "BP 150/95"), (2, "naïve <script>")]
        assert int(str(version).split(".")[0]) >= 13 and listen == "127.0.0.1"
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE notes"))
    finally:
        engine.dispose()


def test_each_test_gets_its_own_empty_database(postgres_db_url: str, postgres_url: str) -> None:
    import sqlalchemy as sa

    assert postgres_db_url != postgres_url
    engine = sa.create_engine(postgres_db_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
            assert tables.scalar_one() == 0
            assert (
                conn.execute(sa.text("SELECT current_database()")).scalar_one()
                == postgres_db_url.rsplit("/")[-1]
            )
    finally:
        engine.dispose()


def test_a_wrong_password_is_refused(postgres_url: str) -> None:
    """TCP logins need the session's password: the server is not open to whoever reaches the port."""
    import sqlalchemy as sa

    user, rest = postgres_url.split("@", 1)
    wrong = user.rsplit(":", 1)[0] + ":not-the-password@" + rest
    engine = sa.create_engine(wrong)
    try:
        with pytest.raises(sa.exc.OperationalError, match="password authentication failed"):
            engine.connect()
    finally:
        engine.dispose()


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 error")])
def test_a_missing_browser_skips_except_under_ci(tmp_path: Any, ci: str, outcome: str) -> None:
    """Without Chromium a browser test is skipped with the reason; under CI=true it is an error."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "test_needs_browser.py").write_text(
        'pytest_plugins = ["tests.browser"]\n\ndef test_it(page):\n    assert False, "never reached"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "CLINIEVAL_CHROMIUM": str(tmp_path / "no-chromium"), "CI": ci,
           "PATH": str(REPO / ".venv" / "bin"), "PYTHONPATH": str(REPO)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path / "test_needs_browser.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert outcome in done.stdout, done.stdout + done.stderr
    assert "no-chromium is missing: install Debian's chromium" in done.stdout


def test_the_page_fixture_fails_a_test_whose_page_script_throws(tmp_path: Any) -> None:
    """An uncaught error in a page script fails the test at teardown, even when its asserts pass."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "test_throws.py").write_text(
        'pytest_plugins = ["tests.browser"]\n\n'
        "def test_it(page):\n"
        "    page.set_content('<p>fine</p><script>undefinedFunction()</script>')\n"
        "    assert page.text_content('p') == 'fine'\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path / "test_throws.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert "1 passed, 1 error" in done.stdout, done.stdout + done.stderr
    assert "a script on the page threw" in done.stdout and "undefinedFunction is not defined" in done.stdout
