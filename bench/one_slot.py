"""A server that works on one request at a time, flooded: fixed vs adaptive requests in flight.

One command starts the test suite's scripted OpenAI-compatible server with one slot (each answer
takes --delay seconds; requests beyond the slot wait in its queue, and a request whose client gave
up is still worked on, as llama-cpp-python's server does), then runs the same N-question task
through the real CLI with 16 requests in flight and a --timeout shorter than the queue's wait:

  after    this checkout: the limit halves on timeouts and retries wait for a free place
  before   an older checkout given with --before DIR (run through PYTHONPATH=DIR/src), e.g. the
           commit before issue 23: a fixed 16 in flight

For each side it prints the wall time, the exit status, the items that failed after retries, and
the requests the server received (prompts worked on again and again show up here), and writes
bench/out/one-slot-<timestamp>.json.

    git worktree add /tmp/clinieval-before cc8843c
    .venv/bin/python bench/one_slot.py --before /tmp/clinieval-before
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fault_server import FaultServer  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "clinieval"


def side(name: str, task: Path, out: Path, args: argparse.Namespace, src: Path | None) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)} if src is not None else dict(os.environ)
    with FaultServer(delay_s=args.delay, slots=1) as server:
        start = time.perf_counter()
        p = subprocess.run(
            [str(CLI), "run", str(task), "-m", f"openai:{server.url}@fault", "--timeout", str(args.timeout),
             "--retries", str(args.retries), "--concurrency", "16", "--out", str(out), "--no-progress"],
            capture_output=True, text=True, env=env, timeout=1800,
        )  # fmt: skip
        wall = time.perf_counter() - start
        received = len(server.log.received)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    errors = summary.get("summaries", [{}])[0].get("errors", {}) if summary else {}
    row = {"side": name, "wall_s": wall, "exit": p.returncode, "failed": errors, "received": received}
    print(f"{name:<7} {wall:7.1f}s  exit {p.returncode}  failed {errors or '-'}  server received {received}")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=16, help="questions")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds the server takes per answer")
    parser.add_argument("--timeout", type=float, default=1.5, help="clinieval --timeout")
    parser.add_argument("--retries", type=int, default=4, help="clinieval --retries (its default)")
    parser.add_argument("--before", type=Path, help="an older checkout to run as the 'before' side")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="clinieval-one-slot-"))
    task = work / "q.jsonl"
    task.write_text("".join(json.dumps({"id": f"q{i}", "input": f"Question {i}", "target": "yes"}) + "\n"
                            for i in range(args.n)))  # fmt: skip
    rows = [side("after", task, work / "after", args, None)]
    if args.before is not None:
        rows.append(side("before", task, work / "before", args, args.before / "src"))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = ROOT / "bench" / "out" / f"one-slot-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"benchmark": "one_slot", "command": " ".join(["bench/one_slot.py", *sys.argv[1:]])}
    path.write_text(json.dumps({**header, "machine": platform.platform(), "rows": rows}, indent=2))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
