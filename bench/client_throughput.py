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
clinieval's items/s relative to each other tool. Results also go to
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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT_DIR = BENCH / "out"
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"
CLINIEVAL_BIN = ROOT / ".venv" / "bin" / "clinieval"
LMEVAL_VENV = BENCH / ".venv-lmeval"
INSPECT_VENV = BENCH / ".venv-inspect"
MODEL = "stub"
TOOLS = ("bare", "clinieval", "lmeval", "inspect")
LMEVAL_TASK = "clinieval_client_throughput"
SETUP = {
    "lmeval": (
        "python -m venv bench/.venv-lmeval && bench/.venv-lmeval/bin/pip install torch==2.13.0 && "
        'bench/.venv-lmeval/bin/pip install "lm-eval[api]==0.4.13"  (or `make bench`)'
    ),
    "inspect": (
        "python -m venv bench/.venv-inspect && bench/.venv-inspect/bin/pip install inspect_ai==0.3.285 "
        "openai && echo '*' > bench/.venv-inspect/.gitignore"
    ),
}

LMEVAL_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{input}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: []
  max_gen_toks: {max_tokens}
  temperature: 0
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

INSPECT_TASK = """\
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def client_throughput():
    return Task(dataset=json_dataset({data!r}), solver=generate(), scorer=includes())
"""

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


# --------------------------------------------------------------------------- the stub server


@dataclass(slots=True)
class Stub:
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
def stub_server() -> Iterator[Stub]:
    """bench/_stub_server.py on a free loopback port, in its own process, for the block."""
    cmd = [sys.executable, str(BENCH / "_stub_server.py"), "--port", "0"]
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


# --------------------------------------------------------------------------- the tools


@dataclass(frozen=True, slots=True)
class Job:
    """One tool run: its command, environment, output dir (measured) and scratch dir (caches)."""

    cmd: list[str]
    env: dict[str, str] | None
    out: Path
    scratch: Path
    cwd: Path | None = None


@dataclass(frozen=True, slots=True)
class Ctx:
    stub: Stub
    items: Path
    n: int
    concurrency: int
    max_tokens: int


def clean_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **extra)
    return env


def bare_job(ctx: Ctx, work: Path) -> Job:
    out = work / "out"
    cmd = [
        str(MAIN_PYTHON), str(Path(__file__).resolve()), "--bare-client",
        str(ctx.items), str(out), ctx.stub.base_url, str(ctx.concurrency), str(ctx.max_tokens),
    ]  # fmt: skip
    return Job(cmd, clean_env(), out, work)


def clinieval_job(ctx: Ctx, work: Path) -> Job:
    out = work / "run"
    cmd = [
        str(CLINIEVAL_BIN), "run", str(ctx.items),
        "-m", f"openai:{ctx.stub.base_url}@{MODEL}",
        "--concurrency", str(ctx.concurrency),
        "--no-progress",
        "--out", str(out),
        "--max-tokens", str(ctx.max_tokens),
    ]  # fmt: skip
    return Job(cmd, clean_env(), out, work)


def lmeval_job(ctx: Ctx, work: Path) -> Job:
    tasks = work / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    yaml = LMEVAL_YAML.format(task=LMEVAL_TASK, data=json.dumps(str(ctx.items)), max_tokens=ctx.max_tokens)
    (tasks / f"{LMEVAL_TASK}.yaml").write_text(yaml, encoding="utf-8")
    model_args = ",".join(
        [
            f"model={MODEL}",
            f"base_url={ctx.stub.base_url}/chat/completions",
            f"num_concurrent={ctx.concurrency}",
            "tokenizer_backend=None",
            "tokenized_requests=False",
            "seed=0",
            "max_retries=3",
        ]
    )
    out = work / "out"
    cmd = [
        str(LMEVAL_VENV / "bin" / "lm-eval"), "run",
        "--model", "local-chat-completions",
        "--model_args", model_args,
        "--tasks", LMEVAL_TASK,
        "--include_path", str(tasks),
        "--apply_chat_template",
        "--batch_size", "1",
        "--output_path", str(out),
        "--log_samples",
    ]  # fmt: skip
    env = clean_env(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(work / "hf-home"),  # fresh datasets cache: lm-eval prepares the JSON each run
        TOKENIZERS_PARALLELISM="false",
    )
    return Job(cmd, env, out, work)


def inspect_job(ctx: Ctx, work: Path) -> Job:
    task_file = work / "client_throughput_task.py"
    task_file.write_text(INSPECT_TASK.format(data=str(ctx.items)), encoding="utf-8")
    out = work / "logs"
    cmd = [
        str(INSPECT_VENV / "bin" / "inspect"), "eval", task_file.name,  # relative: it globs the path
        "--model", f"openai-api/{MODEL}/{MODEL}",
        "--max-connections", str(ctx.concurrency),
        "--max-tokens", str(ctx.max_tokens),
        "--temperature", "0",
        "--display", "none",
        "--no-log-realtime",  # no live sample buffer (a side database for `inspect view`)
        "--log-dir", str(out),
    ]  # fmt: skip
    env = clean_env(
        STUB_BASE_URL=ctx.stub.base_url,
        STUB_API_KEY="stub",
        XDG_DATA_HOME=str(work / "xdg-data"),  # its trace logs etc. land in scratch, not in ~
        XDG_CACHE_HOME=str(work / "xdg-cache"),
        INSPECT_LOG_DIR=str(out),
    )
    return Job(cmd, env, out, work, cwd=work)


JOBS: dict[str, Callable[[Ctx, Path], Job]] = {
    "bare": bare_job,
    "clinieval": clinieval_job,
    "lmeval": lmeval_job,
    "inspect": inspect_job,
}


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot run here, or None."""
    need = {
        "bare": MAIN_PYTHON,
        "clinieval": CLINIEVAL_BIN,
        "lmeval": LMEVAL_VENV / "bin" / "lm-eval",
        "inspect": INSPECT_VENV / "bin" / "inspect",
    }[tool]
    if need.exists():
        return None
    how = f"; create it: {SETUP[tool]}" if tool in SETUP else "; run `make install`"
    shown = need.relative_to(ROOT) if need.is_relative_to(ROOT) else need
    return f"{shown} missing{how}"


def tool_version(tool: str) -> str:
    python, dist = {
        "bare": (MAIN_PYTHON, "aiohttp"),
        "clinieval": (MAIN_PYTHON, "clinieval"),
        "lmeval": (LMEVAL_VENV / "bin" / "python", "lm_eval"),
        "inspect": (INSPECT_VENV / "bin" / "python", "inspect_ai"),
    }[tool]
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip()


# --------------------------------------------------------------------------- one measurement


@dataclass(slots=True)
class Measurement:
    tool: str
    n: int
    round: int
    wall_s: float = 0.0
    returncode: int = 0
    user_s: float = 0.0
    sys_s: float = 0.0
    maxrss_mib: float = 0.0
    out_bytes: int = 0  # files the tool wrote in its output directory
    scratch_bytes: int = 0  # everything else in its scratch dir (caches it was pointed at; inputs excluded)
    stub_requests: int = 0  # completions the stub answered during this run
    stub_cpu_s: float = 0.0
    stub_connections: int = 0  # TCP connections the client opened to the stub
    in_loop_items_per_s: float | None = None
    loadavg_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    error: str = ""
    command: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.error and self.returncode == 0 and self.stub_requests == self.n

    @property
    def items_per_s(self) -> float:
        return self.n / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_s_per_1k(self) -> float:
        return (self.user_s + self.sys_s) / self.n * 1000

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {
            "valid": self.valid,
            "items_per_s": self.items_per_s,
            "cpu_s_per_1k_items": self.cpu_s_per_1k,
            "out_bytes_per_item": self.out_bytes / self.n,
            "stub_cpu_us_per_request": self.stub_cpu_s / self.stub_requests * 1e6
            if self.stub_requests
            else None,
        }


def in_loop_rate(tool: str, log: Path) -> float | None:
    pattern = {"bare": _BARE_RATE, "clinieval": _CLINIEVAL_RATE}.get(tool)
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


def warm_up(tools: list[str], stub: Stub, tmp: Path, args: argparse.Namespace) -> dict[str, str]:
    """Untimed run of each tool on a few items; returns tool -> why it cannot run."""
    broken = {t: why for t in tools if (why := missing(t))}
    if args.warmup_items <= 0:
        return broken
    from _throughput_items import write_items

    items = tmp / "warmup.jsonl"
    write_items(args.warmup_items, items)
    ctx = Ctx(stub, items, args.warmup_items, args.concurrency, args.max_tokens)
    for tool in tools:
        if tool in broken:
            continue
        m = measure(tool, ctx, tmp / f"warmup-{tool}", 0, args.timeout)
        status = "ok" if m.valid else f"FAILED: {m.error}"
        print(f"  warm-up {tool:9s} {m.n} items {m.wall_s:6.2f}s {status}", flush=True)
        if not m.valid:
            broken[tool] = f"warm-up failed: {m.error}"
    return broken


def run(args: argparse.Namespace) -> tuple[list[Measurement], dict[str, str], dict[str, float]]:
    from _throughput_items import data_file, write_items

    tools: list[str] = args.tools
    measurements: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="bench-client-throughput-") as tmp_s, stub_server() as stub:
        tmp = Path(tmp_s)
        print(f"stub server: {stub.base_url} (pid {stub.proc.pid}); data: {data_file()}", flush=True)
        broken = warm_up(tools, stub, tmp, args)
        for n in args.sizes:
            items = tmp / f"items-{n}.jsonl"
            size = write_items(n, items)
            print(f"N={n}: {items.name} {size / n:.0f} bytes/item", flush=True)
            ctx = Ctx(stub, items, n, args.concurrency, args.max_tokens)
            for rnd in range(1, args.rounds + 1):
                for tool in rotated([t for t in tools if t not in broken], rnd):
                    m = measure(tool, ctx, tmp / f"{tool}-{n}-r{rnd}", rnd, args.timeout)
                    measurements.append(m)
                    print(f"  {progress_line(m)}", flush=True)
        final = stub.stats()
    return measurements, broken, final


def progress_line(m: Measurement) -> str:
    loop = f", in-loop {m.in_loop_items_per_s:.1f}/s" if m.in_loop_items_per_s else ""
    status = "ok" if m.valid else f"INVALID: {m.error[:300]}"
    return (
        f"{m.tool:9s} N={m.n} round {m.round}: {m.wall_s:7.2f}s {m.items_per_s:8.1f} items/s{loop}, "
        f"CPU {m.user_s + m.sys_s:.2f}s, RSS {m.maxrss_mib:.0f} MiB, stub {m.stub_requests} req {status}"
    )


# --------------------------------------------------------------------------- the report


@dataclass(slots=True)
class Row:
    """The median round of one tool at one size."""

    tool: str
    n: int
    rounds: list[Measurement]

    @property
    def valid(self) -> bool:
        return bool(self.rounds) and all(m.valid for m in self.rounds)

    def median(self, get: Callable[[Measurement], float]) -> float:
        return statistics.median(get(m) for m in self.rounds)

    def to_json(self) -> dict[str, object]:
        loops = [m.in_loop_items_per_s for m in self.rounds if m.in_loop_items_per_s is not None]
        return {
            "tool": self.tool,
            "n": self.n,
            "valid": self.valid,
            "rounds": len(self.rounds),
            "wall_s": self.median(lambda m: m.wall_s),
            "items_per_s": self.median(lambda m: m.items_per_s),
            "in_loop_items_per_s": statistics.median(loops) if loops else None,
            "cpu_s_per_1k_items": self.median(lambda m: m.cpu_s_per_1k),
            "maxrss_mib": self.median(lambda m: m.maxrss_mib),
            "out_bytes_per_item": self.median(lambda m: m.out_bytes / m.n),
            "stub_requests": [m.stub_requests for m in self.rounds],
            "stub_cpu_us_per_request": self.median(lambda m: m.stub_cpu_s / max(m.stub_requests, 1) * 1e6),
        }


def rows(measurements: list[Measurement], tools: list[str], sizes: list[int]) -> list[Row]:
    return [
        Row(t, n, [m for m in measurements if m.tool == t and m.n == n])
        for n in sizes
        for t in tools
        if any(m.tool == t and m.n == n for m in measurements)
    ]


def ratios(table: list[Row]) -> dict[str, dict[str, float]]:
    """Per size: clinieval's items/s divided by each other tool's (valid rows only)."""
    out: dict[str, dict[str, float]] = {}
    for n in sorted({r.n for r in table}):
        by_tool = {r.tool: r.median(lambda m: m.items_per_s) for r in table if r.n == n and r.valid}
        if "clinieval" not in by_tool:
            continue
        out[str(n)] = {
            f"clinieval/{t}": by_tool["clinieval"] / v for t, v in by_tool.items() if t != "clinieval"
        }
    return out


HEADER = (
    "| tool | N | wall s | items/s | in-loop items/s | CPU s /1k items | peak RSS MiB | out bytes/item "
    "| stub requests | stub CPU µs/req | clinieval ÷ tool |"
)


def cell(text: str, limit: int = 400) -> str:
    """``text`` made safe for one markdown table cell."""
    return " ".join(text.split()).replace("|", "/")[:limit]


def table_lines(
    table: list[Row], broken: dict[str, str], sizes: list[int], ratio: dict[str, dict[str, float]]
) -> list[str]:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for r in table:
        j = r.to_json()
        loop = f"{j['in_loop_items_per_s']:.1f}" if j["in_loop_items_per_s"] is not None else "–"
        vs = ratio.get(str(r.n), {}).get(f"clinieval/{r.tool}")
        vs_s = f"{vs:.3f}" if vs is not None else ("1" if r.tool == "clinieval" and r.valid else "–")
        reqs = "/".join(map(str, j["stub_requests"])) if isinstance(j["stub_requests"], list) else ""
        flag = "" if r.valid else f" INVALID: {cell('; '.join(m.error for m in r.rounds if m.error))}"
        lines.append(
            f"| {r.tool} | {r.n} | {j['wall_s']:.2f} | {j['items_per_s']:.1f} | {loop} "
            f"| {j['cpu_s_per_1k_items']:.2f} | {j['maxrss_mib']:.0f} | {j['out_bytes_per_item']:.0f} "
            f"| {reqs}{flag} | {j['stub_cpu_us_per_request']:.0f} | {vs_s} |"
        )
    for tool, why in broken.items():
        for n in sizes:
            lines.append(f"| {tool} | {n} | not run: {cell(why)} |" + " |" * 8)
    return lines


def report(
    args: argparse.Namespace,
    measurements: list[Measurement],
    broken: dict[str, str],
    load_start: tuple[float, float, float],
    versions: dict[str, str],
    stub_final: dict[str, float],
) -> dict[str, object]:
    table = rows(measurements, args.tools, args.sizes)
    ratio = ratios(table)
    print()
    print(
        f"concurrency {args.concurrency}, max_tokens {args.max_tokens}, median of {args.rounds} round(s); "
        f"loadavg at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}; {os.cpu_count()} CPUs"
    )
    print("versions: " + ", ".join(f"{t} {v}" for t, v in versions.items()))
    print()
    print("\n".join(table_lines(table, broken, args.sizes, ratio)))
    print()
    for n, rs in ratio.items():
        if rs:
            print(f"N={n}: " + ", ".join(f"{k} = {v:.3f}" for k, v in rs.items()))
    return {
        **header(args),
        "loadavg_at_start": load_start,
        "cpu_count": os.cpu_count(),
        "versions": versions,
        "tools_not_run": broken,
        "rows": [r.to_json() for r in table],
        "ratios_items_per_s": ratio,
        "stub_final": stub_final,
        "measurements": [m.to_json() for m in measurements],
        "settings": {
            "inspect": "--display none --no-log-realtime --temperature 0; other options default",
            "lmeval": "as bench/vs_lm_eval.py: --apply_chat_template --batch_size 1 --log_samples",
            "clinieval": "--no-progress; other options default",
        },
    }


def header(args: argparse.Namespace) -> dict[str, object]:
    """bench/_server.py's result_header (benchmark, command, n, concurrency, ...) with n = sizes."""
    from _server import result_header

    ns = argparse.Namespace(**vars(args) | {"n": args.sizes})
    return result_header("client_throughput", ns) | {"sizes": args.sizes, "tools": args.tools}


# --------------------------------------------------------------------------- main


def parse_tools(text: str) -> list[str]:
    tools = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown tool(s) {unknown}; choose from {','.join(TOOLS)}")
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
    return p.parse_args(argv)


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
    measurements, broken, stub_final = run(args)
    result = report(args, measurements, broken, load_start, versions, stub_final)
    path = args.json or OUT_DIR / f"client_throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
