"""An OpenAI-compatible server on 127.0.0.1 that answers chat completions in the shapes of the
issue-28 table, byte for byte: the transport matrix's rows for malformed and unusual answers.

Why a raw socket server: ``http.server`` (and tests/fault_server.py on top of it) always writes
well-formed HTTP, so it cannot send two conflicting ``Content-Length`` headers, a body shorter than
its length, a head over 64 KiB, or bare ``\\n`` line endings; a real server or gateway sometimes
does, and the client must then say what was wrong instead of "cannot reach". ``GET /v1/models``
answers normally, so a run starts; the last user message names the shape of its answer
(``SHAPE:<name>`` anywhere in it), and every chat request is counted by shape so a test can tell
what a rerun asked again.
"""

from __future__ import annotations

import gzip
import json
import re
import socketserver
import threading
import zlib
from collections import Counter
from typing import Any

MODEL = "shapes"
HANG_S = 20.0
_SHAPE = re.compile(r"SHAPE:([a-z0-9_]+)")


def answer_text(shape: str) -> str:
    """The answer a well-formed reply of ``shape`` carries (a test compares records with it)."""
    return f"answer in shape {shape}"


def _completion(text: str) -> bytes:
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
    }
    return json.dumps(body).encode()


def _ok(body: bytes, *extra: str, eol: str = "\r\n") -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return (eol.join(head) + eol + eol).encode() + body


def reply(shape: str) -> tuple[bytes, bool]:
    """The bytes answering a chat request of ``shape``, and whether the connection may stay open."""
    body = _completion(answer_text(shape))
    if shape == "gzip":
        return _ok(gzip.compress(body), "Content-Encoding: gzip"), True
    if shape == "deflate":
        return _ok(zlib.compress(body), "Content-Encoding: deflate"), True
    if shape == "bare_lf":
        return _ok(body, eol="\n"), True
    if shape == "two_lengths":
        return _ok(body, f"Content-Length: {len(body) + 7}"), False
    if shape == "short_body":
        return _ok(body)[: -len(body) // 2], False  # the head promises more than is sent, then close
    if shape == "huge_head":
        return _ok(body, "X-Padding: " + "a" * (70 * 1024)), False
    if shape == "brotli":  # labelled br, but not brotli: an answer no decoder can read
        return _ok(body, "Content-Encoding: br"), False
    if shape == "chunked_ext":  # chunk extensions, a trailer, lower-case header names
        half = len(body) // 2
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        chunks = b"%x;name=value\r\n%s\r\n%x\r\n%s\r\n" % (half, body[:half], len(body) - half, body[half:])
        return head + chunks + b"0\r\nx-trailer: 1\r\n\r\n", True
    if shape == "http10":  # no length: the body ends when the connection closes
        return b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + body, False
    if shape == "continue_first":  # an interim 100 Continue before the answer
        return b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(body), True
    if shape == "refused":  # what an Azure-style gateway says without ?api-version
        message = (
            b'{"error": {"code": "BadRequest", "message": "Missing required query parameter: api-version"}}'
        )
        return _refusal(message), True
    return _ok(body), True


def _refusal(body: bytes) -> bytes:
    return b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


class ShapeServer:
    """Start with ``with ShapeServer() as server:``; ``server.url`` is its /v1 URL."""

    def __init__(self, *, plain_shape: str = "plain", models_shape: str | None = None) -> None:
        """``plain_shape``: how a chat request without a ``SHAPE:`` marker is answered (the check
        before a run sends one); ``models_shape``: answer ``GET /v1/models`` in that shape too
        (None: a proper model list)."""
        self.plain_shape = plain_shape
        self.models_shape = models_shape
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while not outer._stop.is_set():
                    request = _read_request(self.rfile)
                    if request is None:
                        return
                    data, keep = outer._answer(*request)
                    if data is None:  # the hang: answer nothing until the server stops
                        outer._stop.wait(HANG_S)
                        return
                    self.wfile.write(data)
                    self.wfile.flush()
                    if not keep:
                        return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def _answer(self, method: str, path: str, body: bytes) -> tuple[bytes | None, bool]:
        if method == "GET" and path.startswith("/v1/models"):
            if self.models_shape is not None:
                return _models_in(self.models_shape)
            return _ok(
                json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
            ), True
        if method != "POST" or not path.startswith("/v1/chat/completions"):
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", True
        payload: dict[str, Any] = json.loads(body)
        found = _SHAPE.search(str(payload["messages"][-1]["content"]))
        shape = found.group(1) if found else self.plain_shape
        with self._lock:
            self.asked[shape] += 1
        return (None, False) if shape == "hang" else reply(shape)

    def __enter__(self) -> ShapeServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


def _models_in(shape: str) -> tuple[bytes, bool]:
    listing = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
    if shape == "two_lengths":
        return _ok(listing, f"Content-Length: {len(listing) + 3}"), False
    return reply(shape)


def _read_request(rfile: Any) -> tuple[str, str, bytes] | None:
    """Method, path and body of the next request on the connection; None once it is closed."""
    try:
        line = rfile.readline(65536)
        if not line.strip():
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        length = 0
        while (header := rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        return method, path, rfile.read(length)
    except (OSError, ValueError):
        return None
