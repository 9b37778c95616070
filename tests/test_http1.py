"""The backend's own HTTP/1.1 client against real sockets that answer the ways servers do:
keep-alive, chunked bodies, bodies that end with the connection, idle connections the server
closed, garbage, silence, and TLS."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clinieval.models.http1 import Http1Client, TransportError
from clinieval.models.openai_http import OpenAIModel
from clinieval.types import ErrorKind, GenerationConfig, Message

OK = b'{"ok": true}'
Reply = Callable[[int], list[bytes]]
"""Given the request's number (0, 1, ...), the byte pieces to send back (sent one by one)."""


def length_reply(body: bytes = OK, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


class ScriptedServer:
    """A real TCP server on 127.0.0.1: reads each request (headers and Content-Length body) and
    sends ``reply(n)`` piece by piece; counts connections and requests."""

    def __init__(
        self, reply: Reply, *, close_idle_after: float | None = None, wrap: ssl.SSLContext | None = None
    ):
        self.reply, self.close_idle_after, self.wrap = reply, close_idle_after, wrap
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.wrap is not None:
            try:
                conn = self.wrap.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused our certificate
                conn.close()
                return
        conn.settimeout(self.close_idle_after or 30)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                with self._lock:
                    n = len(self.requests)
                    self.requests.append(head)
                for piece in self.reply(n):
                    if piece == b"<close>":
                        return
                    conn.sendall(piece)
                    time.sleep(0.002)
        except (TimeoutError, OSError):
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


@contextmanager
def serving(reply: Reply, **kw: object) -> Iterator[ScriptedServer]:
    server = ScriptedServer(reply, **kw)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.close()


def client(url: str, timeout_s: float = 5.0) -> Http1Client:
    headers = {"Content-Type": "application/json"}
    return Http1Client(url, timeout_s=timeout_s, connect_timeout_s=2.0, headers=headers, max_idle=4)


def ask(url: str, n: int = 1) -> list[bytes]:
    async def go() -> list[bytes]:
        http = client(url)
        try:
            return [
                (await http.request("POST", f"{url}/chat/completions", b'{"q": 1}')).body for _ in range(n)
            ]
        finally:
            http.close()

    return asyncio.run(go())


def test_keep_alive_connections_are_reused_for_every_request() -> None:
    with serving(lambda n: [length_reply(b'{"n": %d}' % n)]) as server:
        bodies = ask(server.url(), 20)
    assert bodies == [b'{"n": %d}' % i for i in range(20)]
    assert server.connections == 1 and len(server.requests) == 20
    first = server.requests[0].decode()
    assert first.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}" in first and "Content-Length: 8" in first


def test_headers_and_body_split_into_tiny_pieces_are_put_back_together() -> None:
    whole = length_reply(b'{"text": "' + b"x" * 5000 + b'"}', extra="X-Note: a\r\nx-note: b\r\n")
    pieces = [whole[i : i + 7] for i in range(0, 77, 7)] + [whole[77:3000], whole[3000:]]

    async def go(url: str) -> tuple[int, dict[str, str], bytes]:
        http = client(url)
        try:
            r = await http.request("GET", f"{url}/models")
            return r.status, r.headers, r.body
        finally:
            http.close()

    with serving(lambda n: pieces) as server:
        status, headers, body = asyncio.run(go(server.url()))
    assert status == 200 and body == whole.split(b"\r\n\r\n", 1)[1]
    assert headers["x-note"] == "a, b"  # repeated headers joined, names lower-cased


def test_a_chunked_answer_with_trailers_is_decoded_and_the_connection_kept() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n", b"6\r\n world\r\n", b"0\r\nX-Trailer: t\r\n\r\n",
    )  # fmt: skip
    with serving(lambda n: list(chunked)) as server:
        assert ask(server.url(), 3) == [b"hello world"] * 3
    assert server.connections == 1


def test_a_body_that_ends_with_the_connection_and_connection_close_are_honoured() -> None:
    def reply(n: int) -> list[bytes]:
        if n % 2 == 0:
            return [b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n", OK, b"<close>"]
        return [length_reply(extra="Connection: close\r\n"), b"<close>"]

    with serving(reply) as server:
        assert ask(server.url(), 4) == [OK] * 4
    assert server.connections == 4  # none of those answers let the connection be reused


def test_an_idle_connection_the_server_closed_is_replaced_without_losing_the_request() -> None:
    """vLLM and llama.cpp close idle keep-alive connections after a few seconds: the next
    request finds its connection dead before any answer and is sent once more, on a new one."""

    async def go(url: str) -> list[bytes]:
        http = client(url)
        try:
            first = (await http.request("POST", f"{url}/chat/completions", b"{}")).body
            await asyncio.sleep(0.4)  # the server has closed the idle connection by now
            second = (await http.request("POST", f"{url}/chat/completions", b"{}")).body
            return [first, second]
        finally:
            http.close()

    with serving(lambda n: [length_reply()], close_idle_after=0.1) as server:
        assert asyncio.run(go(server.url())) == [OK, OK]
    assert server.connections == 2 and len(server.requests) == 2  # the server saw each request once


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ([b"SSH-2.0-OpenSSH\r\n\r\n"], "not an HTTP answer"),
        ([b'HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"partial"', b"<close>"], "closed in the middle"),
        ([b"<close>"], "closed the connection before answering"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n"], "bad Content-Length"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], "bad chunk size"),
    ],
)
def test_a_broken_answer_is_a_transport_error(pieces: list[bytes], message: str) -> None:
    with serving(lambda n: pieces) as server, pytest.raises(TransportError, match=message):
        ask(server.url())


def test_silence_is_a_timeout_and_the_connection_is_not_reused() -> None:
    async def go(url: str) -> bytes:
        http = client(url, timeout_s=0.3)
        try:
            with pytest.raises(TimeoutError):
                await http.request("POST", f"{url}/chat/completions", b"{}")
            return (await http.request("POST", f"{url}/chat/completions", b"{}")).body
        finally:
            http.close()

    with serving(lambda n: [] if n == 0 else [length_reply()]) as server:
        assert asyncio.run(go(server.url())) == OK
    assert server.connections == 2


def test_nothing_listening_is_a_transport_error_naming_the_host() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(TransportError, match=f"cannot connect to 127.0.0.1:{port}"):
        ask(f"http://127.0.0.1:{port}/v1")


def test_the_backend_records_garbage_as_a_connection_failure_and_retries_it() -> None:
    """Through OpenAIModel: the first answer is garbage, the retry gets a real completion."""
    completion = b'{"choices": [{"message": {"content": "yes"}, "finish_reason": "stop"}]}'

    def reply(n: int) -> list[bytes]:
        return [b"garbage\r\n\r\n", b"<close>"] if n == 0 else [length_reply(completion)]

    async def go(url: str) -> tuple[str, ErrorKind | None]:
        from clinieval.models.openai_http import RetryPolicy

        model = OpenAIModel(url, "m", retry=RetryPolicy(max_retries=2, base_delay_s=0.01))
        try:
            out = await model.generate([Message("user", "q")], GenerationConfig(max_tokens=4))
            return out.text, out.error_kind
        finally:
            await model.aclose()

    with serving(reply) as server:
        assert asyncio.run(go(server.url())) == ("yes", None)
    assert len(server.requests) == 2


def test_https_to_a_trusted_local_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TLS (for an allowlisted host), checked against a certificate the system is told to trust."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with serving(lambda n: [length_reply()], wrap=server_side) as server:
        assert ask(server.url("https"), 3) == [OK] * 3
    assert server.connections == 1
    monkeypatch.delenv("SSL_CERT_FILE")
    untrusted = serving(lambda n: [length_reply()], wrap=server_side)  # no longer a known certificate
    with untrusted as server, pytest.raises(TransportError, match="cannot connect"):
        ask(server.url("https"))


def test_a_reused_connection_closed_before_any_answer_is_retried_once_on_a_new_one() -> None:
    """The race the idle check cannot see: the server closes as the request arrives. On a reused
    connection that is a keep-alive timeout, so the request goes again once on a fresh one."""
    with serving(lambda n: [b"<close>"] if n == 1 else [length_reply(b'{"n": %d}' % n)]) as server:
        assert ask(server.url(), 2) == [b'{"n": 0}', b'{"n": 2}']
    assert server.connections == 2 and len(server.requests) == 3
