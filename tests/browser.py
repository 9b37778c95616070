"""Real-browser fixtures: Debian's Chromium driven by Playwright, and a real server for an ASGI app.

Use them from a test module with ``pytest_plugins = ["tests.browser"]`` (or once for the whole
suite in ``tests/conftest.py``), then ask for ``browser``, ``page`` or ``serve``.

Why Debian's Chromium: ``playwright install`` downloads its own browser build, which cannot be
reached from these machines, so the Makefile installs Debian's ``chromium`` and the browser is
launched from it with ``executable_path`` (Playwright 1.65 drives Chromium 156 headless). The
path can be changed with ``CLINIEVAL_CHROMIUM``.

Offline: every page is opened in a context whose requests to anything but 127.0.0.1, localhost,
``file:`` and ``data:`` are aborted and recorded; a test whose page tried to reach the network
fails at teardown (no CDN, no telemetry), as does one whose page threw an uncaught script error.

Without Chromium (or Playwright) the tests that need it are skipped with the reason, and fail
instead under ``CI=true``, where a missing browser means a broken install, not a machine without
one.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import missing

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Route

CHROMIUM = Path(os.environ.get("CLINIEVAL_CHROMIUM", "/usr/bin/chromium"))
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
LOCAL_SCHEMES = frozenset({"file", "data", "blob", "about"})


def chromium_path() -> Path:
    """Debian's Chromium, or a skip (a failure under CI=true) naming what to install."""
    found = CHROMIUM if CHROMIUM.is_file() else None
    if found is None and (which := shutil.which("chromium")):
        found = Path(which)
    if found is None:
        missing(
            f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install chromium`, `make install`)"
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module (a launch costs about a second).

    Not per session: while Playwright's sync API is open it keeps an asyncio loop running in the
    main thread, so every later ``asyncio.run`` in the session (the runner's tests use it) failed
    with "cannot be called from a running event loop"."""
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed in the virtualenv (`make install`)")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(
            executable_path=str(path),
            headless=True,
            args=["--disable-background-networking", "--disable-component-update", "--no-first-run"],
        )
        try:
            yield launched
        finally:
            launched.close()


def is_local(url: str) -> bool:
    """Whether a request stays on this machine: a file, inline data, or a loopback server."""
    parts = urlsplit(url)
    return parts.scheme in LOCAL_SCHEMES or (parts.hostname or "") in LOCAL_HOSTS


def guard_network(context: BrowserContext) -> list[str]:
    """Abort every request of ``context`` that would leave this machine; the list fills with the
    URLs refused, so a test can assert that none was tried."""
    blocked: list[str] = []

    def guard(route: Route) -> None:
        if is_local(route.request.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", guard)
    return blocked


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page in its own context (no cookies or storage shared between tests), offline. The
    test fails at teardown if the page tried to reach the network or a script threw an uncaught
    error (a broken page whose assertions happened to pass)."""
    context = browser.new_context()
    blocked = guard_network(context)
    script_errors: list[str] = []
    opened = context.new_page()
    opened.on("pageerror", lambda error: script_errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not blocked, f"the page tried to reach the network: {blocked}"
    assert not script_errors, f"a script on the page threw: {script_errors}"


@contextmanager
def serve_asgi(app: Any, *, timeout: float = 15.0) -> Iterator[str]:
    """Run ``app`` with a real uvicorn server on a free 127.0.0.1 port, in a thread; yield its base
    URL (``http://127.0.0.1:PORT``) and stop the server when the block ends.

    The socket is bound here and handed to uvicorn, so no other process can take the port between
    choosing it and listening on it."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="auto"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"asgi:{port}")
    thread.start()
    try:
        _wait_started(server, thread, timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
        if thread.is_alive():
            raise RuntimeError(f"the server on port {port} did not stop within {timeout} s")


def _wait_started(server: Any, thread: threading.Thread, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the ASGI server exited while starting (see the log above)")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the ASGI server did not start within {timeout} s")
        time.sleep(0.02)


@pytest.fixture
def serve() -> Iterator[Callable[[Any], str]]:
    """``serve(app)`` starts a real server for ``app`` and returns its base URL; every server
    started in a test is stopped when the test ends."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serve_asgi(app))
