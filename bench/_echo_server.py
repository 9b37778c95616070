"""An OpenAI-compatible server that answers every request with its own prompt, in llama-2's wrapper.

A stand-in, named as one: a base model (no chat tuning) served behind a chat template answers by
continuing the template, which most often means repeating the prompt ("[INST]Read the abstract
and answer ... with yes, no or maybe ...[/INST]"). No base model ships inside a PyPI package, so
the first-hour benchmark's "base model behind chat" job uses this: a real HTTP server on
127.0.0.1, in a thread of the benchmark, with the answers such a model gives.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler that answers with JSON: the base of the benchmarks' scripted
    OpenAI-compatible servers (this one, bench/automedeval_judge.py's)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet: the benchmark prints what matters
        pass

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Handler(JsonHandler):
    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "base", "object": "model", "owned_by": "me"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
        text = f"[INST]{prompt or request.get('prompt', '')}[/INST]"
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "text": text, "finish_reason": "stop"}
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        usage["total_tokens"] = sum(usage.values())
        created = int(time.time())
        self._send({"id": "echo", "object": "chat.completion", "created": created, "model": "base",
                    "choices": [choice], "usage": usage})  # fmt: skip


def echo_server() -> contextlib.AbstractContextManager[str]:
    """The echoing server's base URL (``http://127.0.0.1:PORT/v1``) for the duration of the block."""
    return serving(_Handler)


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server on a free loopback port answering with ``handler``; yields its base
    URL (``http://127.0.0.1:PORT/v1``) and stops it after the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
