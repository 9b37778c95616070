"""Every answer shape of the issue-28 table, through the real command line.

A real socket server on 127.0.0.1 answers ``GET /v1/models`` properly and each chat completion
in one shape: compressed, with bare ``\\n`` line ends, chunked with extensions and trailers,
HTTP/1.0 read-to-close, ``100 Continue`` first, a 429 with ``Retry-After``, or broken
(Content-Length headers that disagree, a body cut short, 70 KiB of headers, silence). Each row
checks the command's exit code, what the records say (error kind and message), and for the
shapes that work that a second run asks the server nothing (every answer was recorded).
"""

from __future__ import annotations

import gzip
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

COMPLETION = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()


def plain(body: bytes, extra: str = "", status: str = "200 OK", version: str = "HTTP/1.1") -> bytes:
    head = f"{version} {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return f"{head}{extra}\r\n".encode() + body


def encoded(coding: str, data: bytes) -> bytes:
    return plain(data, f"Content-Encoding: {coding}\r\n")


def chunked_with_trailers(body: bytes) -> bytes:
    half = len(body) // 2
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"%x;name=value\r\n" % half + body[:half] + b"\r\n"
        + b"%x\r\n" % (len(body) - half) + body[half:] + b"\r\n0\r\nx-trailer: 1\r\n\r\n"
    )  # fmt: skip


Shape = Callable[[int], bytes | None]
"""Given how many chat requests came before, the bytes to answer with (None: say nothing)."""

WORKING: dict[str, Shape] = {
    "gzip": lambda n: encoded("gzip", gzip.compress(COMPLETION)),
    "deflate": lambda n: encoded("deflate", zlib.compress(COMPLETION)),
    "bare LF line ends": lambda n: plain(COMPLETION).replace(b"\r\n", b"\n"),
    "chunked, extensions, trailers, lower-case headers": lambda n: chunked_with_trailers(COMPLETION),
    "HTTP/1.0 read to close": lambda n: (
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + COMPLETION
    ),
    "100 Continue first": lambda n: b"HTTP/1.1 100 Continue\r\n\r\n" + plain(COMPLETION),
    "429 with Retry-After, then an answer": lambda n: (
        plain(b'{"error": {"message": "busy"}}', "Retry-After: 0\r\n", "429 Too Many Requests")
        if n % 2 == 0
        else plain(COMPLETION)
    ),
}

BROKEN: dict[str, tuple[Shape, str, str]] = {
    "Content-Length headers that disagree": (
        lambda n: plain(COMPLETION).replace(b"Content-Length:", b"Content-Length: 7\r\nContent-Length:", 1),
        "server_error",
        r"not a valid HTTP answer from 127\.0\.0\.1:\d+: Content-Length headers that disagree \(\d+, 7\)",
    ),
    "a body shorter than its length": (
        lambda n: plain(COMPLETION)[:-20],
        "connection",
        r"the answer from 127\.0\.0\.1:\d+ was cut short: the connection closed after \d+ of the \d+ "
        "body bytes its Content-Length announced",
    ),
    "headers over 64 KiB": (
        lambda n: plain(COMPLETION, "X-Big: " + "a" * 70_000 + "\r\n"),
        "server_error",
        r"not a valid HTTP answer from 127\.0\.0\.1:\d+: headers longer than 64 KiB",
    ),
    "an encoding nobody asked for": (
        lambda n: encoded("br", COMPLETION),
        "server_error",
        r"a body encoded as 'br', which clinieval does not decode",
    ),
    "silence": (
        lambda n: None,
        "timeout",
        r"^timed out after 1\.5 s waiting for the answer's headers from 127\.0\.0\.1:\d+$",
    ),
}


@dataclass
class ShapeServer:
    """A TCP server on 127.0.0.1: ``/v1/models`` answered plainly, chat completions in ``shape``,
    anything else 404; counts the chat requests."""

    shape: Shape
    keep_alive: bool = True
    """Whether the connection stays open after a chat answer (not after a read-to-close or broken one)."""
    models: bytes = field(default_factory=lambda: plain(MODELS))
    chats: int = 0

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(m.group(1)) if (m := re.search(rb"(?i)content-length: *(\d+)", head)) else 0
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                if not self._answer(conn, head.split(b" ")[1].decode()):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, path: str) -> bool:
        """Send the answer for ``path``; False when the connection must end (read-to-close, broken)."""
        if path.endswith("/chat/completions"):
            with self.lock:
                n, self.chats = self.chats, self.chats + 1
            reply = self.shape(n)
            if reply is None:
                time.sleep(5)
                return False
            conn.sendall(reply)
            return self.keep_alive and not reply.startswith(b"HTTP/1.0")
        conn.sendall(
            self.models if path.endswith("/models") else plain(b'{"error": "no"}', status="404 Not Found")
        )
        return True

    def close(self) -> None:
        self.sock.close()


def items(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"i{k}", "input": f"q {k}", "target": "yes"}) + "\n" for k in range(n))
    )
    return path


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


def run(server: ShapeServer, data: Path, out: Path, *extra: str) -> Any:
    return run_cli(
        "run", str(data), "-m", f"openai:{server.url}@m", "--out", str(out), "--no-progress",
        "--server-kind", "generic", "--scorer", "answered", *extra,
    )  # fmt: skip


@pytest.mark.parametrize("name", list(WORKING))
def test_a_shape_real_servers_use_is_read_and_never_asked_again(name: str, tmp_path: Path) -> None:
    server = ShapeServer(WORKING[name])
    try:
        data, out = items(tmp_path, 3), tmp_path / "run"
        first = run(server, data, out, "--concurrency", "1")
        asked = server.chats
        second = run(server, data, out, "--concurrency", "1")
    finally:
        server.close()
    assert first.returncode == 0, first.stderr
    assert [r["output"]["text"] for r in records(out)] == ["yes"] * 3
    assert all(r["output"]["error_kind"] is None for r in records(out))
    assert second.returncode == 0, second.stderr
    assert "0 new, 3 resumed of 3" in " ".join(second.stdout.split())
    assert server.chats == asked  # the rerun asked nothing


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_answer_is_recorded_with_its_kind_and_what_was_wrong(name: str, tmp_path: Path) -> None:
    shape, kind, message = BROKEN[name]
    server = ShapeServer(shape, keep_alive=False)
    try:
        out = tmp_path / "run"
        proc = run(server, items(tmp_path, 2), out, "--retries", "0", "--timeout", "1.5")
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    assert f"every model call failed ({kind}=2)" in proc.stderr and "Traceback" not in proc.stderr
    outputs = [r["output"] for r in records(out)]
    assert [o["error_kind"] for o in outputs] == [kind, kind]
    assert all(re.search(message, o["error_message"]) for o in outputs), outputs[0]["error_message"]
    assert "cannot reach" not in proc.stderr and "is the server running" not in proc.stderr


def test_a_garbled_first_answer_is_not_called_unreachable(tmp_path: Path) -> None:
    """The check before a run: a server that answers ``/models`` with disagreeing lengths once read
    "cannot reach ...: is the server running and is the URL right?"."""
    server = ShapeServer(lambda n: plain(COMPLETION))
    server.models = plain(MODELS).replace(b"Content-Length:", b"Content-Length: 3\r\nContent-Length:", 1)
    try:
        proc = run(server, items(tmp_path, 1), tmp_path / "run")
    finally:
        server.close()
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{server.url} answered, but not a valid HTTP answer from 127.0.0.1:{server.port}: " in line
    assert "Content-Length headers that disagree" in line and "cannot reach" not in line
    assert not (tmp_path / "run").exists()


def test_nothing_listening_is_could_not_connect(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli(
        "run",
        str(items(tmp_path, 1)),
        "-m",
        f"openai:http://127.0.0.1:{port}/v1@m",
        "--out",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 2
    expected = (
        f"cannot reach http://127.0.0.1:{port}/v1: cannot connect to 127.0.0.1:{port}: Connection refused; "
        "is the server running and is the URL right?"
    )
    assert proc.stderr.strip().splitlines()[-1].endswith(expected)


def test_a_request_the_server_refuses_stops_the_command_with_its_words(tmp_path: Path) -> None:
    """An Azure-style URL without ``?api-version`` (or http:// sent to a TLS port) is answered
    with a 400 on every route: once "every model call failed (bad_request=N)", reason hidden in
    samples.jsonl; now one line at the start, quoting the server."""
    refusal = plain(
        b'{"error": {"code": "BadRequest", "message": "Missing required query parameter: api-version"}}',
        status="400 Bad Request",
    )
    server = ShapeServer(lambda n: refusal)
    server.models = refusal
    try:
        proc = run(server, items(tmp_path, 2), tmp_path / "run")
    finally:
        server.close()
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert (
        f"{server.url}: the server refuses requests (HTTP 400 on POST /chat/completions: "
        "'Missing required query parameter: api-version'; HTTP 400 on GET /models: "
        "'Missing required query parameter: api-version')"
    ) in line
    assert "?api-version=" in line and not (tmp_path / "run").exists()
    assert server.chats == 1  # the one probe, no item
