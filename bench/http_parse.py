"""CPU per answer of the HTTP client's parser alone: bytes in, a Response out, no sockets.

The whole-command and transport benchmarks (client_throughput.py, transport_cost.py) include the
event loop and the kernel; this isolates what the answer parser costs, which is where issue 28's
lenient line ends and compressed bodies added work. It feeds the same chat-completion answer to
``http1._Connection`` (a stand-in transport that discards writes) N times and reports µs per
answer for a CRLF head, a bare-LF head and a gzip body, for this tree and, with ``--before TREE``,
for TREE's ``http1.py`` (run in a child interpreter with ``PYTHONPATH=TREE/src``) in the same
sitting, alternating rounds. A tree before issue 28 cannot read the bare-LF head, and returns
the gzip body undecoded (so its gzip figure is only the parse).

    .venv/bin/python bench/http_parse.py --before /work/before --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BODY = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()
HEAD = (
    "HTTP/1.1 200 OK\r\nServer: stub\r\nContent-Type: application/json\r\n"
    "Date: Thu, 26 Nov 2026 10:00:00 GMT\r\n"
)
SHAPES = {
    "crlf": (HEAD + f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY,
    "bare_lf": (HEAD + f"Content-Length: {len(BODY)}\r\n\r\n").replace("\r\n", "\n").encode() + BODY,
    "gzip": (HEAD + f"Content-Encoding: gzip\r\nContent-Length: {len(gzip.compress(BODY))}\r\n\r\n").encode()
    + gzip.compress(BODY),
}


class _Discard:
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass


def measure(shape: str, n: int) -> float:
    """CPU µs per answer of ``shape`` through the importable tree's parser (a parser that cannot
    read the shape fails here, and :func:`child` reports it as such)."""
    from clinieval.models import http1

    answer = SHAPES[shape]

    async def go() -> float:
        labelled = "label" in inspect.signature(http1._Connection.__init__).parameters
        conn = http1._Connection("bench:1") if labelled else http1._Connection()  # type: ignore[call-arg]
        conn.transport = _Discard()  # type: ignore[assignment]
        start = time.process_time()
        for _ in range(n):
            waiter = conn.send(b"", expect_body=True)
            conn.data_received(answer)
            waiter.result()
        return (time.process_time() - start) / n * 1e6

    return asyncio.run(go())


def child(tree: Path | None, shape: str, n: int) -> float | None:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree / "src")
    here = str(Path(__file__).parent)
    code = (
        f"import sys; sys.path.insert(0, {here!r}); import http_parse as h; print(h.measure({shape!r}, {n}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return float(done.stdout) if done.returncode == 0 and done.stdout.strip() else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000, help="answers per measurement")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--before", type=Path, default=None, help="an older source tree, measured alongside")
    args = p.parse_args()
    trees: dict[str, Path | None] = {"this tree": None}
    if args.before is not None:
        trees["before"] = args.before.resolve()
    print(f"{args.n} answers per measurement, median of {args.rounds} rounds; loadavg {os.getloadavg()}")
    print("| tree | " + " | ".join(f"{s} µs/answer" for s in SHAPES) + " |")
    print("|---|" + "---:|" * len(SHAPES))
    results: dict[str, dict[str, list[float | None]]] = {t: {s: [] for s in SHAPES} for t in trees}
    for rnd in range(args.rounds):
        order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
        for name in order:
            for shape in SHAPES:
                results[name][shape].append(child(trees[name], shape, args.n))
    for name in trees:
        cells = []
        for shape in SHAPES:
            got = [v for v in results[name][shape] if v is not None]
            cells.append(f"{statistics.median(got):.2f}" if got else "cannot read it")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
