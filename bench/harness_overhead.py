"""How much does clinieval's runner cost over a bare HTTP client, against the same server?

One command starts a local llama.cpp OpenAI-compatible server (SmolLM2-135M), warms it, then
sends the same N PubMedQA chat requests (same messages, temperature 0, max_tokens, seed 0, same
number in flight) two ways, alternating the order (direct, clinieval, clinieval, direct, ...):

  direct     a minimal httpx.AsyncClient + asyncio.Semaphore(C) posting /v1/chat/completions
  clinieval  clinieval's run_evaluation (fresh run directory each time, so no cache hits):
             loads and hashes the dataset, writes the manifest, sends every request through the
             SQLite request cache, appends each record, scores, writes the summary

and prints items/s for each side and the ratio clinieval / direct (goal: >= 0.95).

    .venv/bin/python bench/harness_overhead.py --n 40 --concurrency 4 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import Server, common_args, log_offset, result_header, server_work, smol_server, warm_up

from clinieval.benchmarks.pubmedqa.task import pubmedqa_task
from clinieval.engine.session import RunRequest, run_evaluation
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.scoring.scorers import ChoiceExtraction
from clinieval.task import Task
from clinieval.types import GenerationConfig, Sample

OUT_DIR = Path(__file__).resolve().parent / "out"


@dataclass(slots=True)
class Measurement:
    side: str
    round: int
    items: int
    answered: int
    wall_s: float
    client_cpu_s: float = 0.0  # CPU this process spent on the side (the client's own cost)
    inner_s: float | None = None  # clinieval only: the runner's own elapsed (no load/setup/summary)
    server_requests: int = 0
    server_compute_s: float = 0.0  # llama.cpp prompt eval + generation, from the server log
    prompt_tokens: tuple[int, ...] = ()  # per-request prompt lengths the server saw, sorted
    texts: dict[str, str] | None = None

    @property
    def non_compute_s(self) -> float:
        """Wall time not spent in llama.cpp compute: HTTP, server Python, and client overhead."""
        return self.wall_s - self.server_compute_s

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s


def make_task(max_tokens: int) -> Task:
    return pubmedqa_task(
        split="test", scorers=[ChoiceExtraction()], generation=GenerationConfig(max_tokens=max_tokens)
    )


async def run_direct(
    server: Server, task: Task, samples: list[Sample], concurrency: int, rnd: int
) -> Measurement:
    """The baseline: post the same messages, read the answers. Nothing else.

    It gets its samples already loaded (clinieval's side loads and hashes the dataset in its
    timed region), so this is the strictest baseline.
    """
    gen = task.generation
    prompts = {
        s.id: [{"role": m.role, "content": m.content} for m in task.prompt.messages(s, s.context)]
        for s in samples
    }
    sem = asyncio.Semaphore(concurrency)
    texts: dict[str, str] = {}

    async def one(client: httpx.AsyncClient, sid: str) -> None:
        payload = {
            "model": server.alias,
            "messages": prompts[sid],
            "temperature": gen.temperature,
            "max_tokens": gen.max_tokens,
            "top_p": gen.top_p,
            "seed": gen.seed,
        }
        async with sem:
            r = await client.post(f"{server.base_url}/chat/completions", json=payload)
        r.raise_for_status()
        texts[sid] = r.json()["choices"][0]["message"]["content"] or ""

    cpu0, start = time.process_time(), time.perf_counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120.0, limits=limits, trust_env=False) as client:
        await asyncio.gather(*(one(client, s.id) for s in samples))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    return Measurement("direct", rnd, len(samples), len(texts), wall, client_cpu_s=cpu, texts=texts)


async def run_clinieval(
    server: Server, task: Task, n: int, concurrency: int, rnd: int, workdir: Path
) -> Measurement:
    """clinieval end to end, as the CLI would run it (minus interpreter start-up and arg parsing)."""
    spec = f"openai:{server.base_url}@{server.alias}"
    out = workdir / f"clinieval-round{rnd}"
    cpu0, start = time.process_time(), time.perf_counter()
    model = parse_model_spec(spec, BackendOptions(concurrency=concurrency))
    request = RunRequest(
        task=task,
        model=model,
        model_spec=spec,
        out=out,
        default_out=lambda _fp: out,
        limit=n,
        concurrency=concurrency,
        overwrite=True,
        progress=False,
    )
    result = await run_evaluation(request)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    stats = result.stats
    if stats.cache_hits:
        raise SystemExit(f"clinieval round {rnd}: {stats.cache_hits} cache hits; the run dir was not fresh")
    texts: dict[str, str] = {}
    with (out / "samples.jsonl").open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            output = rec.get("output") or {}
            if output.get("error_kind") is None:
                texts[str(rec["sample"]["id"])] = output.get("text", "")
    return Measurement(
        "clinieval",
        rnd,
        stats.finished,
        len(texts),
        wall,
        client_cpu_s=cpu,
        inner_s=stats.elapsed_s,
        texts=texts,
    )


def order(rounds: int) -> list[str]:
    """ABBA blocks: direct, clinieval, clinieval, direct, ... so drift hits both sides equally."""
    out: list[str] = []
    for i in range(rounds):
        out += ["direct", "clinieval"] if i % 2 == 0 else ["clinieval", "direct"]
    return out


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    task = make_task(args.max_tokens)
    with smol_server(n_ctx=args.n_ctx) as server, tempfile.TemporaryDirectory(prefix="bench-ovh-") as tmp:
        samples = task.load()
        warm_up(server, n=args.warmup)
        # Untimed: a one-item clinieval run (its lazy imports, SQLite, the dataset file in the page
        # cache), then direct requests for items *outside* the timed set (real-length prompts for the
        # server's buffers, and no timed prompt follows an identical one in llama.cpp's prefix cache).
        await run_clinieval(server, task, 1, args.concurrency, 0, Path(tmp))
        await run_direct(server, task, samples[args.n : args.n + 4], args.concurrency, rnd=0)
        measurements: list[Measurement] = []
        for i, side in enumerate(order(args.rounds)):
            rnd = i // 2 + 1
            before = log_offset(server)
            if side == "direct":
                m = await run_direct(server, task, samples[: args.n], args.concurrency, rnd)
            else:
                m = await run_clinieval(server, task, args.n, args.concurrency, rnd, Path(tmp))
            work = server_work(server, before, log_offset(server))
            m.server_requests, m.server_compute_s = work.requests, work.compute_s
            m.prompt_tokens = work.prompt_tokens
            if m.answered != args.n or work.requests != args.n:
                raise SystemExit(
                    f"{side} round {rnd}: answered {m.answered} of {args.n} items, "
                    f"server saw {work.requests} requests"
                )
            measurements.append(m)
            print(
                f"  {side:9s} round {rnd}: {m.items} items in {m.wall_s:.2f}s "
                f"(server compute {m.server_compute_s:.2f}s, client CPU {m.client_cpu_s:.2f}s)",
                flush=True,
            )
    return report(args, measurements)


def report(args: argparse.Namespace, ms: list[Measurement]) -> dict[str, object]:
    direct = [m for m in ms if m.side == "direct"]
    clin = [m for m in ms if m.side == "clinieval"]
    d_rate = statistics.mean(m.items_per_s for m in direct)
    c_rate = statistics.mean(m.items_per_s for m in clin)
    d_best = max(m.items_per_s for m in direct)
    c_best = max(m.items_per_s for m in clin)
    # Same prompts, temperature 0, seed 0: both sides should get the same answers.
    ref = direct[0].texts or {}
    same = sum(1 for m in clin for k, v in (m.texts or {}).items() if ref.get(k) == v)
    compared = sum(len(m.texts or {}) for m in clin)
    same_prompts = len({m.prompt_tokens for m in ms}) == 1 and len(ms[0].prompt_tokens) == args.n

    print()
    print(f"N={args.n} items, concurrency {args.concurrency}, max_tokens {args.max_tokens},")
    print(f"{args.rounds} rounds per side in ABBA order, server: llama_cpp.server SmolLM2-135M Q4_1")
    print()
    print("| side      | round | wall s | items/s | server compute s | wall - compute s | client CPU s |")
    print("|-----------|-------|--------|---------|------------------|------------------|--------------|")
    for m in sorted(ms, key=lambda m: (m.side != "direct", m.round)):
        print(
            f"| {m.side:9s} | {m.round:5d} | {m.wall_s:6.2f} | {m.items_per_s:7.3f} "
            f"| {m.server_compute_s:16.2f} | {m.non_compute_s:16.2f} | {m.client_cpu_s:12.2f} |"
        )
    d_gap = statistics.mean(m.non_compute_s for m in direct)
    c_gap = statistics.mean(m.non_compute_s for m in clin)
    d_cpu = statistics.mean(m.client_cpu_s for m in direct)
    # The server's speed drifts between runs by far more than the clients differ; holding it
    # equal isolates what each client adds.
    compute = statistics.mean(m.server_compute_s for m in ms)
    equal_speed = (compute + d_gap) / (compute + c_gap)
    c_cpu = statistics.mean(m.client_cpu_s for m in clin)
    print()
    print(f"mean items/s: direct {d_rate:.3f}, clinieval {c_rate:.3f}")
    print(f"ratio clinieval/direct (mean of rounds): {c_rate / d_rate:.3f}   (goal >= 0.95)")
    print(f"ratio clinieval/direct (best round each): {c_best / d_best:.3f}")
    print(
        f"ratio clinieval/direct at equal server speed: {equal_speed:.4f}   "
        "(mean server compute of all runs + each side's own wall - compute)"
    )
    print(
        f"wall - server compute per item: direct {1000 * d_gap / args.n:.1f} ms, "
        f"clinieval {1000 * c_gap / args.n:.1f} ms"
    )
    print(
        f"client CPU per item: direct {1000 * d_cpu / args.n:.1f} ms, "
        f"clinieval {1000 * c_cpu / args.n:.1f} ms"
    )
    print(f"answers identical to the direct client's: {same}/{compared}")
    print(f"server saw the same prompt token counts in every run: {same_prompts}")

    result: dict[str, object] = {
        **result_header("harness_overhead", args),
        "measurements": [
            {k: v for k, v in asdict(m).items() if k not in ("texts", "prompt_tokens")}
            | {"items_per_s": m.items_per_s, "non_compute_s": m.non_compute_s}
            for m in ms
        ],
        "mean_items_per_s": {"direct": d_rate, "clinieval": c_rate},
        "mean_non_compute_s": {"direct": d_gap, "clinieval": c_gap},
        "mean_client_cpu_s": {"direct": d_cpu, "clinieval": c_cpu},
        "ratio_mean": c_rate / d_rate,
        "ratio_best": c_best / d_best,
        "ratio_equal_server_speed": equal_speed,
        "identical_answers": [same, compared],
        "identical_prompt_token_counts": same_prompts,
    }
    return result


def main() -> None:
    p = common_args(__doc__, OUT_DIR / "harness_overhead.json", "sides")
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.json}")


if __name__ == "__main__":
    main()
