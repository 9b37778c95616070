"""Answers that once got the wrong diagnosis (issue 35, item 3), each from a real or raw server on
127.0.0.1: a proxy's 407 and tinyproxy's 401 (the proxy's credentials, not CLINIEVAL_API_KEY),
JSON in latin-1 or not valid UTF-8 (not "no JSON"), a gateway's HTML login page (not "no JSON",
and not past the check), a service that greets first (not "cut short ... did it restart"), an
Azure URL without ``api-version`` (not "ends in /v1"), redirects (followed for a GET on the same
origin, named with their Location otherwise), and a connection reset after a POST (not sent again
behind the run's back: 61 POSTs for 60 items)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clinieval.errors import UserError
from clinieval.models.openai_http import OpenAIModel, RetryPolicy
from clinieval.types import ErrorKind, GenerationConfig, Message, ModelOutput
from tests.conftest import free_port, missing
from tests.real_servers import TINYPROXY, Tinyproxy
from tests.test_http1 import ScriptedServer, length_reply, serving

MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
FAR = "10.77.0.1"
"""An endpoint host the tests allowlist but never reach: every request goes to a local proxy."""


def completion(text: str) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    return json.dumps(
        {"id": "x", "object": "chat.completion", "choices": [choice]}, ensure_ascii=False
    ).encode()


def answer(status: str, body: bytes = b"", *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in (*headers, f"Content-Length: {len(body)}"))
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def model(url: str, **kw: Any) -> OpenAIModel:
    return OpenAIModel(url, "m", retry=RetryPolicy(max_retries=0), **kw)


def check(url: str, **kw: Any) -> str:
    """The one-line error the check before a run stops with."""

    async def go() -> None:
        m = model(url, **kw)
        try:
            await m.check()
        finally:
            await m.aclose()

    with pytest.raises(UserError) as caught:
        asyncio.run(go())
    return str(caught.value)


def generate(url: str, n: int = 1, **kw: Any) -> list[ModelOutput]:
    async def go() -> list[ModelOutput]:
        m = model(url, **kw)
        try:
            cfg = GenerationConfig(max_tokens=4)
            return [await m.generate([Message("user", f"q {k}")], cfg) for k in range(n)]
        finally:
            await m.aclose()

    return asyncio.run(go())


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


# --- the proxy's credentials -------------------------------------------------------------------


def test_tinyproxy_asking_for_credentials_is_named_as_the_proxys(
    tmp_path: Path, proxy_env: pytest.MonkeyPatch
) -> None:
    """tinyproxy with BasicAuth: no credentials get its 407, wrong ones its own 401. Both once
    read "set CLINIEVAL_API_KEY" (the 407 "check the URL ... and CLINIEVAL_API_KEY")."""
    if not TINYPROXY.is_file():
        missing(f"{TINYPROXY} is missing: install Debian's tinyproxy-bin (`make install`)")
    port = free_port()
    proxy = Tinyproxy(tmp_path / "tp", port, [], basic_auth="clin:s3cret").start()
    endpoint = f"http://{FAR}:8080/v1"
    try:
        proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        none = check(endpoint, allow_hosts=[FAR])
        proxy_env.setenv("HTTP_PROXY", f"http://clin:wrong@127.0.0.1:{port}")
        wrong = check(endpoint, allow_hosts=[FAR])
    finally:
        proxy.stop()
    named = f"the proxy 127.0.0.1:{port} (from HTTP_PROXY) wants credentials"
    assert none.startswith(f"{endpoint}: {named} (HTTP 407 from 'tinyproxy/"), none
    assert "HTTP_PROXY carries none; put them in HTTP_PROXY: http://USER:PASSWORD@127.0.0.1:" in none
    assert wrong.startswith(f"{endpoint}: {named} (HTTP 401 from 'tinyproxy/"), wrong
    assert "the user:password in HTTP_PROXY were refused" in wrong
    for said in (none, wrong):
        assert "set CLINIEVAL_API_KEY" not in said and "check the URL" not in said
        assert "s3cret" not in said and "wrong" not in said.split("refused")[0]
    assert proxy.requests() == [f"GET http://{FAR}:8080/v1/models HTTP/1.1"] * 2  # nothing went further


def test_a_proxys_407_during_a_run_and_a_servers_401_through_it_are_told_apart(
    proxy_env: pytest.MonkeyPatch,
) -> None:
    """A raw forward proxy: its own 407 fails the item as the proxy's, not retried; a 401 it
    forwards from the server (with the Via header a proxy adds) is still the server's key."""

    def reply(n: int) -> list[bytes]:
        if n == 0:
            return [answer("407 Proxy Authentication Required", b"", 'Proxy-Authenticate: Basic realm="p"')]
        body = b'{"error": {"message": "Incorrect API key provided"}}'
        return [answer("401 Unauthorized", body, "Via: 1.1 proxy", "Content-Type: application/json")]

    with serving(reply) as proxy:
        proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        (out,) = generate(f"http://{FAR}:8080/v1", allow_hosts=[FAR])
        server_said = check(f"http://{FAR}:8080/v1", allow_hosts=[FAR])
    assert out.error_kind is ErrorKind.BAD_REQUEST
    assert out.error_message is not None
    assert out.error_message.startswith(
        f"the proxy 127.0.0.1:{proxy.port} (from HTTP_PROXY) wants credentials"
    )
    assert len(proxy.requests) == 2  # the POST once (a refusal is not retried), then the check's GET
    assert proxy.requests[0].startswith(f"POST http://{FAR}:8080/v1/chat/completions HTTP/1.1".encode())
    assert server_said.endswith("the server refused the credentials (HTTP 401); set CLINIEVAL_API_KEY")


# --- 200s that are not the API's JSON ----------------------------------------------------------


def test_json_in_a_declared_latin1_charset_is_read_and_bad_utf8_is_named() -> None:
    """Both once read "server answered 200 with no JSON"."""
    latin1 = completion("fièvre").decode().encode("latin-1")
    replies = [
        answer("200 OK", latin1, "Content-Type: application/json; charset=ISO-8859-1"),
        answer("200 OK", latin1, "Content-Type: application/json"),
    ]
    with serving(lambda n: [replies[n]]) as server:
        read, bad = generate(server.url(), 2)
    assert read.text == "fièvre" and read.error_kind is None
    assert bad.error_kind is ErrorKind.SERVER_ERROR
    offset = latin1.index(b"\xe8")
    assert bad.error_message == (
        f"server answered 200 with JSON that is not valid UTF-8 (byte 0xe8 at offset {offset}; "
        "Content-Type application/json); JSON must be UTF-8: fix the server's encoding, or have it "
        "declare its charset in Content-Type"
    )


LOGIN = b"<!DOCTYPE html><html><head><title>Sign in \xe2\x80\x93 Hospital Gateway</title></head><body>..."


def test_a_gateways_login_page_stops_the_check_and_fails_an_item_once() -> None:
    """An HTML page with 200 once passed the check and failed every item as "no JSON"."""
    page = answer("200 OK", LOGIN, "Content-Type: text/html; charset=utf-8")
    with serving(lambda n: [page]) as server:
        said = check(server.url())
        (out,) = generate(server.url())
    assert said == (
        f"{server.url()}: GET /models answered 200 with an HTML page ('Sign in – Hospital Gateway', "
        "Content-Type text/html; charset=utf-8), not the API's JSON: a gateway's login page or a "
        "proxy's notice is in the way, or the URL is a web page; check the URL (it usually ends in "
        "/v1) and that the gateway lets API clients through with CLINIEVAL_API_KEY"
    )
    assert out.error_kind is ErrorKind.BAD_REQUEST  # a login page does not go away on a retry
    assert out.error_message is not None and "an HTML page ('Sign in – Hospital Gateway'" in out.error_message
    assert len(server.requests) == 2


# --- a service that is not HTTP ----------------------------------------------------------------


class Greeter:
    """A raw server that greets first, as SSH and SMTP do; ``then``: "close" after reading the
    request (sshd), or "wait" (an SMTP server waiting for HELO)."""

    def __init__(self, banner: bytes, then: str) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.banner, self.then = banner, then
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.sendall(self.banner)
            conn.settimeout(5)
            try:
                conn.recv(65536)
                if self.then == "wait":
                    conn.recv(65536)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    ("banner", "then", "first"),
    [
        (b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", "close", "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"),
        (b"220 mail.hospital.org ESMTP Postfix\r\n", "wait", "220 mail.hospital.org ESMTP Postfix"),
    ],
)
def test_a_service_that_greets_first_is_not_http_not_a_restart(banner: bytes, then: str, first: str) -> None:
    """An SSH port once read "cut short: the connection closed in the middle of its headers; did
    it restart?", and an SMTP port waited for the whole timeout."""
    server = Greeter(banner, then)
    start = time.monotonic()
    try:
        said = check(f"http://127.0.0.1:{server.port}/v1")
    finally:
        server.close()
    assert time.monotonic() - start < 3  # at once, not after the check's 10 s
    assert f"not a valid HTTP answer from 127.0.0.1:{server.port}: " in said
    assert (f"it does not start with an HTTP status line: {first!r}" in said) or (
        f"it spoke first, before any request: {first!r}" in said
    ), said
    assert "is that an HTTP API server" in said and "restart" not in said and "cut short" not in said


# --- Azure without api-version -------------------------------------------------------------------


def test_an_azure_url_without_api_version_is_told_to_add_it() -> None:
    """Azure answers 404 "Resource not found" on every route without ``api-version``; that once
    read "no OpenAI-compatible API there ...: the URL usually ends in /v1"."""
    not_found = answer("404 Not Found", b'{"error": {"code": "404", "message": "Resource not found"}}')

    def reply(n: int) -> list[bytes]:
        return [not_found]

    with serving(reply) as server:
        url = f"http://127.0.0.1:{server.port}/openai/deployments/smol"
        said = check(url)
    assert said == (
        f"{url}: HTTP 404 on POST /chat/completions ('Resource not found'): an Azure OpenAI deployment "
        f"URL needs ?api-version= (Azure answers 404 without it); add it, e.g. "
        f"'{url}?api-version=2024-06-01' (quoted for the shell)"
    )
    assert "ends in /v1" not in said


# --- redirects -----------------------------------------------------------------------------------


def test_a_get_redirect_on_the_same_origin_is_followed() -> None:
    """``/v1/models`` moved to ``/v1/models/``: followed; the POST route then answers, so the
    check passes (it asks once whether POSTs are redirected too)."""

    def reply(n: int) -> list[bytes]:
        if n == 0:
            return [answer("301 Moved Permanently", b"", "Location: /v1/models/")]
        return [length_reply(MODELS if n == 1 else completion("pong"))]

    async def go(url: str) -> None:
        m = model(url)
        try:
            await m.check()
        finally:
            await m.aclose()

    with serving(reply) as server:
        asyncio.run(go(server.url()))
    asked = [r.split(b"\r\n", 1)[0] for r in server.requests[:3]]
    assert asked == [
        b"GET /v1/models HTTP/1.1",
        b"GET /v1/models/ HTTP/1.1",
        b"POST /v1/chat/completions HTTP/1.1",
    ]


def test_redirects_elsewhere_are_named_with_their_location() -> None:
    """Once a 302 was "HTTP 302: " and an empty body. A GET is not followed to another origin
    (it carries the key); a POST is never followed (it carries the prompt), nor retried."""
    to_https = answer("301 Moved Permanently", b"", "Location: https://api.hospital.org/v1/models")
    with serving(lambda n: [to_https]) as server:
        said = check(server.url())
    assert said == (
        f"{server.url()}: HTTP 301 on GET /models redirects to https://api.hospital.org/v1/models: "
        "not followed, since a GET follows redirects only on the same scheme, host and port (it "
        "carries the key); if that is the API, use https://api.hospital.org/v1 as the endpoint"
    )
    moved = answer("302 Found", b"", "Location: /v2/chat/completions")
    with serving(lambda n: [moved]) as server:
        (out,) = generate(server.url())
        asked = len(server.requests)
    assert out.error_kind is ErrorKind.BAD_REQUEST and asked == 1
    assert out.error_message == (
        f"HTTP 302 on POST /chat/completions redirects to http://127.0.0.1:{server.port}"
        "/v2/chat/completions: not followed, since a POST is never sent on to another URL (it "
        f"carries the prompt); if that is the API, use http://127.0.0.1:{server.port}/v2 as the endpoint"
    )


def test_a_redirect_to_a_login_page_stops_the_check() -> None:
    """A gateway sends GET /models to its sign-in page on the same host: followed, then named."""

    def reply(n: int) -> list[bytes]:
        if n == 0:
            return [answer("302 Found", b"", "Location: /login?next=/v1/models")]
        return [answer("200 OK", LOGIN, "Content-Type: text/html")]

    with serving(reply) as server:
        said = check(server.url())
    assert said.startswith(
        f"{server.url()}: GET /models (redirected to http://127.0.0.1:{server.port}/login?next=/v1/models) "
        "answered 200 with an HTML page ('Sign in – Hospital Gateway'"
    )


# --- a reset after the request -------------------------------------------------------------------


def reset_once(at: int) -> ScriptedServer:
    """A server that reads POST number ``at`` whole and resets the connection instead of answering."""
    return ScriptedServer(lambda n: [b"<reset>"] if n == at else [length_reply(completion("yes"))])


@pytest.mark.parametrize(("retries", "posts", "failed"), [(0, 60, 1), (1, 61, 0)])
def test_a_reset_after_a_post_is_the_runs_retry_to_make(retries: int, posts: int, failed: int) -> None:
    """60 items on one keep-alive connection, the 30th reset after the server read it. Once the
    transport sent it again on its own (61 POSTs whatever ``--retries`` said); now only the
    run's retry policy does: with no retries the item fails saying the server may have it."""

    async def go(url: str) -> list[ModelOutput]:
        m = OpenAIModel(
            url, "m", max_concurrency=1, retry=RetryPolicy(max_retries=retries, base_delay_s=0.01)
        )
        try:
            cfg = GenerationConfig(max_tokens=4)
            return [await m.generate([Message("user", f"q {k}")], cfg) for k in range(60)]
        finally:
            await m.aclose()

    server = reset_once(29)
    try:
        outs = asyncio.run(go(server.url()))
    finally:
        server.close()
    assert len(server.requests) == posts
    bad = [o for o in outs if o.error_kind is not None]
    assert len(bad) == failed
    if bad:
        assert bad[0].error_kind is ErrorKind.CONNECTION
        assert bad[0].error_message == (
            f"127.0.0.1:{server.port} reset the connection after the request was sent, before any "
            "answer (request 30 on that connection); the server may have received it, so it was not "
            "sent again"
        )
