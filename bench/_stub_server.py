"""A zero-latency OpenAI-compatible HTTP/1.1 stub server for client-throughput benchmarks.

    python bench/_stub_server.py --port 0 [--ready-file PATH] [--gzip asked|always]

It binds 127.0.0.1 (port 0: a free one), prints ``READY <port>`` on stdout once listening (and
writes the port to ``--ready-file`` if given), and answers, with pre-built bytes and no model:

  GET  /v1/models                      {"data": [{"id": "stub", ...}]}
  POST /v1/chat/completions            an OpenAI chat.completion, content "yes", finish "stop"
  POST /v1/completions                 an OpenAI text_completion, text "yes"
  GET  /stats                          {"requests": N, "completions": N, "cpu_s": ..., ...}
  POST /stats/reset                    zero the counters (answers the counts before the reset)

With ``--gzip asked`` the two completion answers are sent gzip-encoded (``Content-Encoding: gzip``,
pre-compressed once) to requests whose ``Accept-Encoding`` names gzip, as nginx's ``gzip on``
does; ``--gzip always`` sends them gzip-encoded whatever the request asked (a gateway that does
not look). Without ``--gzip`` nothing is ever compressed and request headers are not looked at
beyond the framing ones. ``/stats`` counts the gzip answers (``gzip``), so a benchmark can check
that its "gzip" runs really got gzip.

It is a raw ``asyncio.Protocol`` (uvloop when installed, never required): HTTP/1.1 keep-alive,
``Content-Length`` request bodies (``Transfer-Encoding: chunked`` bodies are also accepted),
headers and bodies split across any number of TCP segments. Pipelined requests are parsed in
order too. It does as little as it can per request so it costs the shared CPU little: no JSON
parsing of the request, one pre-built response per route. On SIGTERM/SIGINT it prints its final
counts as one JSON line on stdout and exits.

:func:`stub_server` runs it for a benchmark: in its own process (so its CPU is not the client's),
on a free port, stopped when the block exits; :class:`Stub` reads and resets its counters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_CHAT = {
    "id": "chatcmpl-stub",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "stub",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "yes"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 400, "completion_tokens": 1, "total_tokens": 401},
}
_TEXT = {
    "id": "cmpl-stub",
    "object": "text_completion",
    "created": 1700000000,
    "model": "stub",
    "choices": [{"index": 0, "text": "yes", "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 400, "completion_tokens": 1, "total_tokens": 401},
}
_MODELS = {
    "object": "list",
    "data": [{"id": "stub", "object": "model", "created": 1700000000, "owned_by": "stub"}],
}
_MAX_HEADER = 64 * 1024


def response(status: str, body: bytes, *, close: bool = False, encoding: str | None = None) -> bytes:
    coding = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    head = (
        f"HTTP/1.1 {status}\r\n"
        f"Content-Type: application/json\r\n{coding}"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode("ascii") + body


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


CHAT_RESPONSE = response("200 OK", _json(_CHAT))
TEXT_RESPONSE = response("200 OK", _json(_TEXT))
CHAT_GZIP = response("200 OK", gzip.compress(_json(_CHAT), mtime=0), encoding="gzip")
TEXT_GZIP = response("200 OK", gzip.compress(_json(_TEXT), mtime=0), encoding="gzip")
GZIP_MODES = ("asked", "always")
MODELS_RESPONSE = response("200 OK", _json(_MODELS))
NOT_FOUND = response("404 Not Found", b'{"error":{"message":"not found"}}')
BAD_REQUEST = response("400 Bad Request", b'{"error":{"message":"bad request"}}', close=True)


class Counters:
    """What the server has done since start (or the last reset)."""

    def __init__(self) -> None:
        self.requests = 0  # every HTTP request answered
        self.completions = 0  # POST /v1/chat/completions and /v1/completions
        self.connections = 0
        self.body_bytes = 0
        self.gzip = 0  # completion answers sent gzip-encoded
        self.gzip_mode = ""  # --gzip: "", "asked" or "always" (set once at start, never reset)

    def snapshot(self) -> dict[str, float | int]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "requests": self.requests,
            "completions": self.completions,
            "connections": self.connections,
            "body_bytes": self.body_bytes,
            "gzip": self.gzip,
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "maxrss_kib": ru.ru_maxrss,
            "pid": os.getpid(),
            "time": time.time(),
        }

    def reset(self) -> None:
        self.requests = self.completions = self.connections = self.body_bytes = self.gzip = 0


COUNTERS = Counters()


def _header(lower_head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case, with the colon) in a lower-cased header block."""
    i = lower_head.find(b"\r\n" + name)
    if i < 0:
        return None
    start = i + 2 + len(name)
    j = lower_head.find(b"\r\n", start)
    return lower_head[start : j if j >= 0 else None].strip()


def _content_length(head: bytes) -> tuple[int, bool]:
    """(Content-Length, chunked) from the raw header block, without a full parse."""
    lower = head.lower()
    encoding = _header(lower, b"transfer-encoding:")
    length = _header(lower, b"content-length:")
    return (int(length) if length else 0), (encoding is not None and b"chunked" in encoding)


def _chunked_end(buf: bytearray, start: int) -> int:
    """Index just past a complete chunked body starting at ``start``, or -1 while incomplete."""
    pos = start
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return -1
        size = int(bytes(buf[pos:eol]).split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            end = buf.find(b"\r\n\r\n", eol)  # optional trailers, then a blank line
            return -1 if end < 0 else end + 4
        pos = eol + 2 + size + 2
        if pos > len(buf):
            return -1


def _gzip_wanted(head: bytes) -> bool:
    """Whether this request's completion answer goes gzip-encoded (``--gzip``); never without it."""
    if not COUNTERS.gzip_mode:
        return False
    if COUNTERS.gzip_mode == "always":
        return True
    accept = _header(head.lower(), b"accept-encoding:")
    return accept is not None and b"gzip" in accept


def route(method: bytes, target: bytes, head: bytes) -> bytes:
    path = target.split(b"?", 1)[0]
    if method == b"POST" and path.endswith(b"/completions"):
        COUNTERS.completions += 1
        chat = path.endswith(b"/chat/completions")
        if _gzip_wanted(head):
            COUNTERS.gzip += 1
            return CHAT_GZIP if chat else TEXT_GZIP
        return CHAT_RESPONSE if chat else TEXT_RESPONSE
    if method == b"GET" and path.endswith(b"/models"):
        return MODELS_RESPONSE
    if path == b"/stats":
        snap = COUNTERS.snapshot()
        if method == b"POST":
            COUNTERS.reset()
        return response("200 OK", _json(snap))
    return NOT_FOUND


class StubProtocol(asyncio.Protocol):
    """One connection: buffer bytes, answer each complete request in order."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        COUNTERS.connections += 1

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        out: list[bytes] = []
        close = False
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                close = len(buf) > _MAX_HEADER
                if close:
                    out.append(BAD_REQUEST)
                break
            head = bytes(buf[:end])
            try:
                length, chunked = _content_length(head)
                stop = _chunked_end(buf, end + 4) if chunked else end + 4 + length
            except ValueError:
                out.append(BAD_REQUEST)
                close = True
                break
            if stop < 0 or stop > len(buf):
                break  # body not complete yet
            line = head.split(b"\r\n", 1)[0].split(b" ")
            if len(line) < 3:
                out.append(BAD_REQUEST)
                close = True
                break
            COUNTERS.requests += 1
            COUNTERS.body_bytes += stop - end - 4
            out.append(route(line[0], line[1], head))
            close = b"\r\nconnection: close" in head.lower()
            del buf[:stop]
            if close:
                break
        if out and self.transport is not None:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])
            if close:
                self.transport.close()


def _install_uvloop() -> str:
    try:
        import uvloop  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return "asyncio"
    uvloop.install()  # pragma: no cover - only where uvloop is installed
    return "uvloop"  # pragma: no cover


async def serve(port: int, ready_file: Path | None, loop_name: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(StubProtocol, "127.0.0.1", port, backlog=1024, reuse_address=True)
    bound: int = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready_file is not None:
        ready_file.write_text(f"{bound}\n", encoding="ascii")
    print(f"READY {bound} {loop_name}", flush=True)
    async with server:
        await stop.wait()
    print(json.dumps({"final": COUNTERS.snapshot()}), flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--ready-file", type=Path, default=None, help="write the bound port here when ready")
    p.add_argument(
        "--gzip",
        choices=GZIP_MODES,
        default="",
        help="gzip the completion answers: to requests whose Accept-Encoding names gzip, or always",
    )
    args = p.parse_args(argv)
    COUNTERS.gzip_mode = args.gzip
    loop_name = _install_uvloop()
    asyncio.run(serve(args.port, args.ready_file, loop_name))
    sys.stdout.flush()


# --------------------------------------------------------------------------- for the benchmarks


@dataclass(slots=True)
class Stub:
    """A running stub server: its process and port; :meth:`stats` reads (and resets) its counters."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, *, reset: bool = False) -> dict[str, float]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/stats", method="POST" if reset else "GET")
        with opener.open(req, timeout=10) as resp:
            data: dict[str, float] = json.loads(resp.read())
        return data


@contextlib.contextmanager
def stub_server(*options: str) -> Iterator[Stub]:
    """This server on a free loopback port, in its own process, for the block (``options``: --gzip ...)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--port", "0", *options]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise SystemExit(f"stub server did not start: {line!r}")
        yield Stub(proc, int(line.split()[1]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


if __name__ == "__main__":
    main()
