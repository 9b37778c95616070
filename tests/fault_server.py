"""A small OpenAI-compatible HTTP server that misbehaves on request, for fault-injection tests.

The last user message decides what happens. A marker ``FAULT:<kind>x<n>`` makes the first n
requests carrying that prompt fail that way, then answers normally:
  429, 500      HTTP status (429 sends Retry-After: 0)
  HANG          sleeps longer than any client timeout in the tests
  DROP          closes the connection without answering
  CUT           starts a 200 answer, sends half its body, then closes the connection
  503           HTTP 503 (service unavailable)
  BADJSON       HTTP 200 whose body is not JSON
  NOCHOICES     HTTP 200 whose ``choices`` list is empty
  FILTER        HTTP 400 with Azure's content-filter error body (every time)
  FILTERFINISH  HTTP 200 whose finish_reason is content_filter (every time)
  NULL          HTTP 200 whose message content is null, as a reasoning model's (every time)
  LENGTH        HTTP 200 with the answer and finish_reason length (every time)
With ``hold_after``, requests past that count wait unanswered (see release()).
With ``responder``, a normal answer's text is ``responder(prompt)`` instead of ``answer``, so a
test can script realistic replies that depend on what was asked.
With ``slots``, at most that many requests are worked on at once and the rest wait in a queue, as
on a one-slot llama.cpp server; like that server, it finishes a request whose client gave up.
``routes`` adds GET answers outside /v1/ and ``model_fields`` fields to the /v1/models entry: a
stand-in for what vLLM, TGI, Ollama and llama-server say about themselves (they cannot run here).
Other paths outside /v1/ answer 404.
Every request is recorded (prompt, and whether it was answered) so tests can count repeats.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_EVERY_TIME = frozenset({"FILTERFINISH", "NULL", "LENGTH"})
_MARKER = re.compile(r"FAULT:([A-Z0-9]+)(?:x(\d+))?")


@dataclass
class Log:
    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every request body as sent


class _QuietServer(ThreadingHTTPServer):
    """A client killed mid-request (the kill tests do it on purpose) is not an error worth a trace."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FaultServer:
    def __init__(
        self,
        delay_s: float = 0.0,
        answer: str = "yes",
        hold_after: int | None = None,
        responder: Callable[[str], str] | None = None,
        slots: int | None = None,
        routes: dict[str, Any] | None = None,
        model_fields: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.log = Log()
        self.slots = None if slots is None else threading.Semaphore(slots)
        self.routes = routes or {}
        self.model_fields = model_fields or {}
        self.extra_headers = headers or {}
        self.responder = responder
        # After `hold_after` admitted requests, further ones are held unanswered until release():
        # a deterministic "requests in flight" moment for kill tests.
        self.hold_after = hold_after
        self.admitted = 0
        self.released = threading.Event()
        self.delay_s = delay_s
        self.answer = answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path in server.routes:
                    self._send(200, server.routes[self.path])
                    return
                if not self.path.startswith("/v1/"):
                    self._send(404, {"detail": "Not Found"})
                    return
                self._send(200, {"object": "list", "data": [{"id": "fault", **server.model_fields}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not self.path.startswith("/v1/"):
                    self._send(404, {"detail": "Not Found"})
                    return
                server.handle(self, body)

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> bool:
                return self._send_raw(status, json.dumps(payload).encode(), headers)

            def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> bool:
                """Whether the reply was written: a client killed mid-request (kill tests) is gone."""
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in {**server.extra_headers, **(headers or {})}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return False
                return True

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def release(self) -> None:
        """Stop holding: held requests are dropped unanswered, new ones are served."""
        self.hold_after = None
        self.released.set()

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, h: Any, body: dict[str, Any]) -> None:
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        with self.log.lock:
            self.log.received.append(prompt)
            self.log.bodies.append(body)
            self.log.seen[prompt] += 1
            attempt = self.log.seen[prompt]
        with self.log.lock:
            hold = self.hold_after is not None and self.admitted >= self.hold_after
            self.admitted += not hold
        if hold:
            self.released.wait()
            h.close_connection = True
            return
        m = _MARKER.search(prompt)
        kind, times = (m.group(1), int(m.group(2) or 1)) if m else (None, 0)
        if kind == "FILTER":
            h._send(
                400,
                {
                    "error": {
                        "code": "content_filter",
                        "message": "The response was filtered "
                        "due to the prompt triggering Azure OpenAI's content management policy.",
                    }
                },
            )
            return
        if kind is not None and kind not in _EVERY_TIME and attempt <= times:
            if kind == "429":
                h._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
            elif kind == "500":
                h._send(500, {"error": {"message": "boom"}})
            elif kind == "503":
                h._send(503, {"error": {"message": "overloaded"}})
            elif kind == "CUT":
                body = json.dumps({"id": "x", "choices": [{"message": {"content": self.answer}}]}).encode()
                h.send_response(200)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body[: len(body) // 2])
                h.wfile.flush()
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
            elif kind == "HANG":
                time.sleep(5)
            elif kind == "DROP":
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
            elif kind == "BADJSON":
                h._send_raw(200, b'{"choices": [{"message": ')
            elif kind == "NOCHOICES":
                h._send(200, {"id": "x", "object": "chat.completion", "choices": []})
            return
        if self.delay_s and self.slots is not None:
            with self.slots:
                time.sleep(self.delay_s)
        elif self.delay_s:
            time.sleep(self.delay_s)
        finish = {"FILTERFINISH": "content_filter", "LENGTH": "length"}.get(kind or "", "stop")
        text: str | None
        if kind == "FILTERFINISH":
            text = ""
        elif kind == "NULL":
            text = None
        else:
            text = self.answer if self.responder is None else self.responder(prompt)
        # Recorded before the write, so a client that has its answer always finds it counted (a
        # test reading ``answered`` right after a reply raced the server thread); taken back if the
        # client was gone and the write failed.
        with self.log.lock:
            self.log.answered.append(prompt)
        sent = h._send(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )
        if not sent:
            with self.log.lock:
                self.log.answered.remove(prompt)
