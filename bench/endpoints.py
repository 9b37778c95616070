"""Does spreading one run over two servers make it faster? Two llama.cpp servers vs one.

One command starts three local llama.cpp OpenAI-compatible servers of the embedded SmolLM2-135M
(Q4_1), warms them, then runs the same N PubMedQA test items through the real CLI,
``clinieval run pubmedqa --limit N --scorer choice_extract`` (generation only: the default
choice_loglik scorer would add three echo requests per item; a fresh --out each time, so no cache
hits), three ways:

  single     one server with 1 thread              -m openai:URL@smol
  pool       two servers with 1 thread each        -m openai:URL1,URL2@smol   (an EndpointPool)
  single-2t  one server with 2 threads             the same two cores given to one server

Sides rotate each round (ABC, then CBA, ...) so drift in the machine's load hits all of them. It
prints wall time (the whole CLI process) and the runner's own items/s for each side, the ratios
pool/single and pool/single-2t, how the pool spread its requests, and the load average
(the machine may be shared), and writes everything to bench/out/endpoints-<timestamp>.json.

    .venv/bin/python bench/endpoints.py --n 40 --max-tokens 16 --concurrency 4 --rounds 2
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
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import (
    ALIAS,
    MAIN_PYTHON,
    Server,
    _stop,
    _wait_ready,
    common_args,
    free_port,
    result_header,
    smollm2_path,
    warm_up,
)

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "bench" / "out"
CLI = ROOT / ".venv" / "bin" / "clinieval"
SIDES = ("single", "pool", "single-2t")
_RUNNER = re.compile(r"([\d.]+)s \(([\d.]+) items/s\)")
_POOL_LINE = re.compile(r"endpoint pool: (.*)")


@dataclass(slots=True)
class Measurement:
    side: str
    round: int
    items: int
    answered: int
    wall_s: float  # the whole `clinieval run` process: start-up, checks, run, scoring, summary
    runner_s: float  # the runner's own elapsed, as the CLI prints it
    runner_items_per_s: float
    load_before: tuple[float, float, float]
    pool_counters: str = ""

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s


@contextlib.contextmanager
def llama_server(threads: int, n_ctx: int) -> Iterator[Server]:
    """``smol_server`` with a thread count (it has no such option): the minimal start logic."""
    model = smollm2_path()
    fd, name = tempfile.mkstemp(prefix=f"clinieval-bench-endpoints-{threads}t-", suffix=".log")
    os.close(fd)
    server = Server(port=free_port(), alias=ALIAS, model_path=model, log_path=Path(name))
    cmd = [
        str(MAIN_PYTHON), "-m", "llama_cpp.server",
        "--model", str(model),
        "--host", "127.0.0.1",
        "--port", str(server.port),
        "--n_ctx", str(n_ctx),
        "--model_alias", ALIAS,
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
    ]  # fmt: skip
    with server.log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        _wait_ready(proc, f"{server.base_url}/models", server.log_path, 120.0)
        yield server
    finally:
        _stop(proc)
        server.log_path.unlink(missing_ok=True)


def warm_up_prompts(n: int, count: int = 2) -> list[str]:
    """Real-length PubMedQA prompts from outside the timed items, so each server has allocated its
    larger buffers before the first timed side, and no timed prompt follows an identical one."""
    from clinieval.benchmarks.pubmedqa.task import pubmedqa_task

    task = pubmedqa_task(split="test")
    samples = task.load()[n : n + count]
    return ["\n\n".join(m.content for m in task.prompt.messages(s, s.context)) for s in samples]


def run_side(side: str, spec: str, args: argparse.Namespace, rnd: int, workdir: Path) -> Measurement:
    """One `clinieval run`, exactly as a user types it (plus -v for the pool's counters)."""
    out = workdir / f"{side}-round{rnd}"
    cmd = [
        str(CLI), "run", "pubmedqa", "--split", "test", "--limit", str(args.n), "-m", spec,
        "--out", str(out), "--no-progress", "--max-tokens", str(args.max_tokens),
        "--concurrency", str(args.concurrency), "--scorer", "choice_extract", "-v",
    ]  # fmt: skip
    load = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{side} round {rnd}: clinieval exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    found = _RUNNER.search(" ".join(proc.stdout.split()))
    if found is None:
        raise SystemExit(f"{side} round {rnd}: no runner timing in the output:\n{proc.stdout[-2000:]}")
    counters = _POOL_LINE.search(proc.stderr)
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    answered = sum(1 for r in records if (r.get("output") or {}).get("error_kind") is None)
    return Measurement(
        side=side,
        round=rnd,
        items=len(records),
        answered=answered,
        wall_s=wall,
        runner_s=float(found.group(1)),
        runner_items_per_s=float(found.group(2)),
        load_before=load,
        pool_counters=counters.group(1) if counters else "",
    )


def order(rounds: int) -> list[tuple[int, str]]:
    """ABC, CBA, ABC, ...: each side meets the machine's drift from both ends."""
    out: list[tuple[int, str]] = []
    for i in range(rounds):
        out += [(i + 1, s) for s in (SIDES if i % 2 == 0 else SIDES[::-1])]
    return out


def measure(args: argparse.Namespace) -> list[Measurement]:
    with (
        llama_server(1, args.n_ctx) as one,
        llama_server(1, args.n_ctx) as two,
        llama_server(2, args.n_ctx) as both,
        tempfile.TemporaryDirectory(prefix="bench-endpoints-") as tmp,
    ):
        prompts = warm_up_prompts(args.n)
        for server in (one, two, both):
            warm_up(server, n=args.warmup, prompts=prompts)
        specs = {
            "single": f"openai:{one.base_url}@{ALIAS}",
            "pool": f"openai:{one.base_url},{two.base_url}@{ALIAS}",
            "single-2t": f"openai:{both.base_url}@{ALIAS}",
        }
        measurements = []
        for rnd, side in order(args.rounds):
            m = run_side(side, specs[side], args, rnd, Path(tmp))
            if m.answered != args.n:
                raise SystemExit(f"{side} round {rnd}: answered {m.answered} of {args.n} items")
            measurements.append(m)
            print(
                f"  {side:9s} round {rnd}: {m.items} items in {m.wall_s:.2f}s wall, runner "
                f"{m.runner_items_per_s:.2f} items/s (load {m.load_before[0]:.2f})",
                flush=True,
            )
    return measurements


def report(args: argparse.Namespace, ms: list[Measurement]) -> dict[str, object]:
    wall = {s: statistics.mean(m.items_per_s for m in ms if m.side == s) for s in SIDES}
    runner = {s: statistics.mean(m.runner_items_per_s for m in ms if m.side == s) for s in SIDES}
    print()
    print(f"N={args.n} PubMedQA items, max_tokens {args.max_tokens}, concurrency {args.concurrency},")
    print(f"{args.rounds} rounds per side, llama_cpp.server SmolLM2-135M Q4_1, {os.cpu_count()} CPUs")
    print()
    print("| side      | round | wall s | items/s (wall) | items/s (runner) | load 1m |")
    print("|-----------|-------|--------|----------------|------------------|---------|")
    for m in sorted(ms, key=lambda m: (SIDES.index(m.side), m.round)):
        print(
            f"| {m.side:9s} | {m.round:5d} | {m.wall_s:6.2f} | {m.items_per_s:14.3f} "
            f"| {m.runner_items_per_s:16.3f} | {m.load_before[0]:7.2f} |"
        )
    print()
    for s in SIDES:
        print(f"mean items/s {s:9s}: wall {wall[s]:.3f}, runner {runner[s]:.3f}")
    ratios = {
        f"pool_over_{base.replace('-', '_')}": {
            "wall": wall["pool"] / wall[base],
            "runner": runner["pool"] / runner[base],
        }
        for base in ("single", "single-2t")
    }
    for name, r in ratios.items():
        print(f"throughput ratio {name}: wall {r['wall']:.2f}x, runner {r['runner']:.2f}x")
    for m in ms:
        if m.pool_counters:
            print(f"pool round {m.round}: {m.pool_counters}")
    print(f"load average at the end: {os.getloadavg()}")
    return {
        **result_header("endpoints", args),
        "cpus": os.cpu_count(),
        "measurements": [asdict(m) | {"items_per_s": m.items_per_s} for m in ms],
        "mean_items_per_s_wall": wall,
        "mean_items_per_s_runner": runner,
        "ratios": ratios,
        "load_average_end": os.getloadavg(),
    }


def main() -> None:
    # A plain kill runs the servers' clean-up too (they live in their own process groups).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    p = common_args(__doc__, OUT_DIR / f"endpoints-{stamp}.json", "sides")
    p.set_defaults(max_tokens=16)
    args = p.parse_args()
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    result = report(args, measure(args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.json}")


if __name__ == "__main__":
    main()
