"""Client throughput: how fast each evaluation client pushes chat requests through a free server.

One command starts a zero-latency OpenAI-compatible stub server (bench/_stub_server.py: a raw
asyncio HTTP/1.1 server that answers every chat completion with a pre-built "yes"), builds N
PubMedQA-sized chat items (~1.5 KB each, from the shared ori_pqal.json read in place, cycled with
unique ids and inputs) into a temp dir, and runs each client over the same items at the same
concurrency, each as a subprocess:

  bare       a minimal aiohttp client (.venv/bin/python bench/client_throughput.py --bare-client):
             C workers on one session, one POST per item, JSON parsed, answers written as JSONL
  clinieval  .venv/bin/clinieval run ITEMS.jsonl -m openai:URL@stub --concurrency C --no-progress
             --out RUN --max-tokens 16
  clinieval-before   (with --before TREE) the same clinieval command with PYTHONPATH=TREE/src, so an
             older source tree (a git worktree of an earlier commit) runs in the same sitting,
             rotated with the others: a before/after comparison on the same machine state.
             Each clinieval tool's environment is checked first: the run prints which
             clinieval/__init__.py it imports (and the tree's commit) and refuses a tool that
             would import another tree. (Setting PYTHONPATH on this script does nothing: every
             tool runs in a clean environment; issue 27's before/after rows measured one tree.)
  lmeval     bench/.venv-lmeval/bin/lm-eval run --model local-chat-completions (as bench/vs_lm_eval.py
             drives it: a custom task YAML over the JSONL, tokenizer_backend=None,
             tokenized_requests=False, num_concurrent=C, --apply_chat_template --log_samples, HF
             offline, a fresh HF_HOME per run)
  inspect    bench/.venv-inspect/bin/inspect eval TASK.py --model openai-api/stub/stub (STUB_BASE_URL,
             STUB_API_KEY) --max-connections C --max-tokens 16 --display none --no-log-realtime
             --log-dir LOGS; the task: json_dataset(ITEMS.jsonl), generate(), includes()

Why a zero-latency server: with a real model the server's compute dominates the wall time and
hides what the client itself costs per request (HTTP, JSON, bookkeeping, writing results). With
an instant server, items/s is the client's own ceiling, and CPU per item is its cost. The stub
shares the machine's cores with the client, so it is kept lean; its own CPU per request is
reported so readers can see it is not the bottleneck.

Per tool and size (median over --rounds) it reports: wall time of the whole command (start-up
included), items/s = N / wall, the tool's own in-loop rate where it prints one (bare, clinieval),
client CPU (user+sys from os.wait4 on the child, so it includes descendants it waited for) per
1,000 items, peak RSS, bytes the tool wrote in its output directory per item, requests the stub
saw (a row is valid only if that equals N and the tool exited 0), the stub's CPU per request, and
each clinieval tool's items/s relative to each other tool. Results also go to
bench/out/client_throughput-YYYYmmdd-HHMMSS.json.

Each tool first runs once untimed on a few items (--warmup-items) to warm the page cache and to
check it works; a tool that cannot run (venv missing, a failing warm-up) is shown in the table
with the reason and the others still run. The peer tools live in their own virtualenvs:

  python -m venv bench/.venv-lmeval && bench/.venv-lmeval/bin/pip install torch==2.13.0 &&
      bench/.venv-lmeval/bin/pip install "lm-eval[api]==0.4.13"   # torch (CPU) first; see Makefile
  python -m venv bench/.venv-inspect && bench/.venv-inspect/bin/pip install inspect_ai==0.3.285 openai &&
      echo '*' > bench/.venv-inspect/.gitignore   # keeps git and ruff out of it (not in .gitignore yet)

    .venv/bin/python bench/client_throughput.py --sizes 2000 20000 --concurrency 32 --rounds 1
    .venv/bin/python bench/client_throughput.py --sizes 2000 --tools bare,clinieval   # quick
    git worktree add /tmp/before COMMIT && .venv/bin/python bench/client_throughput.py \
        --sizes 2000 20000 --tools bare,clinieval --before /tmp/before --rounds 3   # before/after
    # --after /tmp/after (a worktree of the new commit): clinieval imports that tree instead of
    # this checkout's src, so uncommitted edits here are not measured
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from _stub_server import Stub, stub_server
from _throughput_report import CLINIEVAL_TOOLS, Measurement, report
from _throughput_tools import (
    BENCH,
    JOBS,
    MODEL,
    OUT_DIR,
    TOOLS,
    Ctx,
    Job,
    clinieval_source,
    missing,
    tool_version,
)

_CLINIEVAL_RATE = re.compile(r"\(([\d.]+)\s+items/s\)")  # rich may wrap the line
_BARE_RATE = re.compile(r"BARE-LOOP .* \(([\d.]+) items/s\)")


# --------------------------------------------------------------------------- the bare client


def bare_client(items_path: Path, out_dir: Path, base_url: str, concurrency: int, max_tokens: int) -> None:
    """The baseline: C aiohttp workers over one session, one request per item, answers to JSONL."""
    import asyncio

    import aiohttp

    rows = [json.loads(line) for line in items_path.read_text(encoding="utf-8").splitlines() if line]
    url = f"{base_url}/chat/completions"

    async def main() -> dict[str, str]:
        answers: dict[str, str] = {}
        queue = iter(rows)
        connector = aiohttp.TCPConnector(limit=concurrency)
        headers = {"Content-Type": "application/json", "Authorization": "Bearer stub"}
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

            async def worker() -> None:
                for row in queue:
                    body = {
                        "model": MODEL,
                        "messages": [{"role": "user", "content": row["input"]}],
                        "max_tokens": max_tokens,
                        "temperature": 0.0,
                    }
                    async with session.post(url, data=json.dumps(body)) as resp:
                        resp.raise_for_status()
                        reply = json.loads(await resp.read())
                    answers[row["id"]] = reply["choices"][0]["message"]["content"]

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return answers

    start = time.perf_counter()
    answers = asyncio.run(main())
    loop_s = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "answers.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": k, "output": v}) + "\n" for k, v in answers.items())
    print(f"BARE-LOOP {len(answers)} items in {loop_s:.3f}s ({len(answers) / loop_s:.2f} items/s)")


# --------------------------------------------------------------------------- running a command


@dataclass(slots=True)
class ProcResult:
    wall_s: float
    returncode: int
    user_s: float
    sys_s: float
    maxrss_mib: float
    timed_out: bool


def run_measured(job: Job, log: Path, timeout_s: float) -> ProcResult:
    """Run ``cmd``; wall time, exit status and the child's own rusage (``os.wait4``)."""
    with log.open("w", encoding="utf-8") as f:
        start = time.perf_counter()
        proc = subprocess.Popen(
            job.cmd,
            env=job.env,
            cwd=job.cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    return ProcResult(wall, proc.returncode, ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024, expired.is_set())


def dir_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def tail(path: Path, n: int = 1500) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-n:] if path.exists() else ""


def last_lines(path: Path, n: int = 3) -> str:
    """The last ``n`` non-blank lines of a log, joined on one line (for a table cell)."""
    lines = [line.strip() for line in tail(path, 20_000).splitlines() if line.strip()]
    return " / ".join(lines[-n:])[-500:]


def in_loop_rate(tool: str, log: Path) -> float | None:
    pattern = {"bare": _BARE_RATE, "clinieval": _CLINIEVAL_RATE, "clinieval-before": _CLINIEVAL_RATE}.get(
        tool
    )
    if pattern is None:
        return None
    found = pattern.findall(tail(log, 20_000))
    return float(found[-1]) if found else None


def measure(tool: str, ctx: Ctx, work: Path, rnd: int, timeout_s: float) -> Measurement:
    """One timed run of ``tool``; a failure is recorded in ``error``, never raised."""
    m = Measurement(tool, ctx.n, rnd, loadavg_before=os.getloadavg())
    try:
        work.mkdir(parents=True, exist_ok=True)
        _measure(m, JOBS[tool](ctx, work), ctx, timeout_s)
    except (OSError, ValueError, KeyError) as e:
        m.error = f"{type(e).__name__}: {e}"
    return m


def _measure(m: Measurement, job: Job, ctx: Ctx, timeout_s: float) -> None:
    log = job.scratch / "tool.log"
    m.command = job.cmd
    before = ctx.stub.stats(reset=True)
    res = run_measured(job, log, timeout_s)
    after = ctx.stub.stats()
    m.wall_s, m.returncode, m.user_s, m.sys_s, m.maxrss_mib = (
        res.wall_s, res.returncode, res.user_s, res.sys_s, res.maxrss_mib,
    )  # fmt: skip
    m.stub_requests = int(after["completions"])
    m.stub_cpu_s = after["cpu_s"] - before["cpu_s"]
    m.stub_connections = int(after["connections"])
    m.out_bytes = dir_bytes(job.out)
    m.scratch_bytes = dir_bytes(job.scratch) - m.out_bytes - log.stat().st_size
    m.in_loop_items_per_s = in_loop_rate(m.tool, log)
    if res.timed_out:
        m.error = f"timed out after {timeout_s:.0f}s"
    elif res.returncode != 0:
        m.error = f"exit {res.returncode}: {last_lines(log)}"
    elif m.stub_requests != ctx.n:
        m.error = f"stub saw {m.stub_requests} requests, expected {ctx.n}"


# --------------------------------------------------------------------------- the run


def rotated(tools: list[str], rnd: int) -> list[str]:
    """ABBA-style: the given order in odd rounds, reversed in even ones, so drift hits all alike."""
    return tools if rnd % 2 == 1 else tools[::-1]


def check_sources(tools: list[str], trees: dict[str, Path | None]) -> tuple[dict[str, str], dict[str, str]]:
    """Print and return which source tree each clinieval tool imports; tool -> why it is wrong."""
    sources: dict[str, str] = {}
    wrong: dict[str, str] = {}
    for tool in (t for t in tools if t in CLINIEVAL_TOOLS and not missing(t)):
        sources[tool], problem = clinieval_source(trees[tool])
        print(f"  {tool:16s} imports {sources[tool]}", flush=True)
        if problem:
            wrong[tool] = f"wrong source tree: {problem}"
            print(f"  {tool:16s} NOT RUN: {problem}", flush=True)
    return sources, wrong


def warm_up(
    tools: list[str], stub: Stub, tmp: Path, args: argparse.Namespace, broken: dict[str, str]
) -> dict[str, str]:
    """Untimed run of each tool on a few items; returns tool -> why it cannot run."""
    broken = broken | {t: why for t in tools if (why := missing(t))}
    if args.warmup_items <= 0:
        return broken
    from _throughput_items import write_items

    items = tmp / "warmup.jsonl"
    write_items(args.warmup_items, items)
    ctx = Ctx(stub, items, args.warmup_items, args.concurrency, args.max_tokens, args.before, args.after)
    for tool in tools:
        if tool in broken:
            continue
        m = measure(tool, ctx, tmp / f"warmup-{tool}", 0, args.timeout)
        status = "ok" if m.valid else f"FAILED: {m.error}"
        print(f"  warm-up {tool:16s} {m.n} items {m.wall_s:6.2f}s {status}", flush=True)
        if not m.valid:
            broken[tool] = f"warm-up failed: {m.error}"
    return broken


@dataclass(slots=True)
class Sitting:
    """Everything one command measured: the timed runs, the tools not run, the stub's final counts."""

    measurements: list[Measurement]
    broken: dict[str, str]
    stub_final: dict[str, float]
    sources: dict[str, str]


def run(args: argparse.Namespace) -> Sitting:
    from _throughput_items import data_file, write_items

    tools: list[str] = args.tools
    measurements: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bench-client-throughput-") as tmp_s, stub_server() as stub:
        tmp = Path(tmp_s)
        print(f"stub server: {stub.base_url} (pid {stub.proc.pid}); data: {data_file()}", flush=True)
        sources, wrong = check_sources(tools, {"clinieval": args.after, "clinieval-before": args.before})
        broken = warm_up(tools, stub, tmp, args, wrong)
        for n in args.sizes:
            items = tmp / f"items-{n}.jsonl"
            size = write_items(n, items)
            print(f"N={n}: {items.name} {size / n:.0f} bytes/item", flush=True)
            ctx = Ctx(stub, items, n, args.concurrency, args.max_tokens, args.before, args.after)
            for rnd in range(1, args.rounds + 1):
                for tool in rotated([t for t in tools if t not in broken], rnd):
                    m = measure(tool, ctx, tmp / f"{tool}-{n}-r{rnd}", rnd, args.timeout)
                    measurements.append(m)
                    print(f"  {progress_line(m)}", flush=True)
        final = stub.stats()
    return Sitting(measurements, broken, final, sources)


def progress_line(m: Measurement) -> str:
    loop = f", in-loop {m.in_loop_items_per_s:.1f}/s" if m.in_loop_items_per_s else ""
    status = "ok" if m.valid else f"INVALID: {m.error[:300]}"
    return (
        f"{m.tool:16s} N={m.n} round {m.round}: {m.wall_s:7.2f}s {m.items_per_s:8.1f} items/s{loop}, "
        f"CPU {m.user_s + m.sys_s:.2f}s, RSS {m.maxrss_mib:.0f} MiB, stub {m.stub_requests} req {status}"
    )


# --------------------------------------------------------------------------- main


def parse_tools(text: str) -> list[str]:
    tools = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown tool(s) {unknown}; choose from {','.join(TOOLS)} (clinieval-before: --before TREE)"
        )
    return tools


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000], help="item counts N")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight, every tool")
    p.add_argument("--rounds", type=int, default=1, help="timed runs per tool and size (median reported)")
    p.add_argument(
        "--tools", type=parse_tools, default=list(TOOLS), help=f"comma-separated: {','.join(TOOLS)}"
    )
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--warmup-items", type=int, default=64, help="untimed items per tool first (0: none)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds before one tool run is killed")
    p.add_argument("--json", type=Path, default=None, help="results file (default bench/out/...-TIME.json)")
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="TREE",
        help="also run tool clinieval-before: the same clinieval command importing TREE/src "
        "(e.g. a git worktree of an older commit), rotated with the others in this one sitting",
    )
    p.add_argument(
        "--after",
        type=Path,
        default=None,
        metavar="TREE",
        help="tool clinieval imports TREE/src instead of the installed tree (e.g. a worktree of a "
        "commit, so others' uncommitted edits in this checkout are not measured)",
    )
    args = p.parse_args(argv)
    for flag in ("before", "after"):
        tree = getattr(args, flag)
        if tree is not None:
            setattr(args, flag, tree.resolve())
            if not (tree / "src" / "clinieval" / "__init__.py").is_file():
                p.error(f"--{flag} {tree}: no src/clinieval/__init__.py there; expected a clinieval checkout")
    if args.before is not None:
        at = args.tools.index("clinieval") if "clinieval" in args.tools else len(args.tools)
        args.tools = [*args.tools[:at], "clinieval-before", *args.tools[at:]]
    return args


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--bare-client":
        items, out, url, conc, max_tokens = sys.argv[2:]
        bare_client(Path(items), Path(out), url, int(conc), int(max_tokens))
        return
    args = parse_args()
    sys.path.insert(0, str(BENCH))
    load_start = os.getloadavg()
    print(f"loadavg at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}", flush=True)
    versions = {t: tool_version(t) for t in args.tools if not missing(t)}
    sitting = run(args)
    load = (load_start, os.getloadavg())
    result = report(
        args, sitting.measurements, sitting.broken, load, versions, sitting.stub_final, sitting.sources
    )
    path = args.json or OUT_DIR / f"client_throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
