"""EHRNoteQA: what each scoring mode costs per scored item, and judge throughput with a warm cache.

One run, side by side, on the synthetic EHRNoteQA set (both levels):

1. The model under test (embedded SmolLM2, 8k window) answers every question in the multiple-
   choice format (generation plus one log-likelihood request over the 5 letters and 5 option
   texts) and in the free-text format.
2. A judge (SmolLM2 behind a real local llama.cpp OpenAI-compatible server) judges every answer
   5 times: the paper's yes/no prompt for multiple choice, the 0/1 prompt with the notes for free
   text. Then the same judging again: every request must come from the cache.

Per scoring mode it reports model calls, prompt and completion tokens and seconds per scored
item, and each mode's ratio to letter extraction (one generation, no further call); for the
judge, requests, cache hits, hit rate, wall time and judge calls per second, first pass vs rerun.

    .venv/bin/python bench/ehrnoteqa_cost.py --patients 6 --per-patient 2

Results go to docs/benchmarks.md by hand; JSON to bench/out/ehrnoteqa_cost-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import smol_server

from clinieval.benchmarks.ehrnoteqa.data import load_physionet
from clinieval.benchmarks.ehrnoteqa.prompts import GENERATION
from clinieval.benchmarks.ehrnoteqa.synth.writer import build_synthetic_set
from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings, judge_arm, run_format_arm
from clinieval.models.spec import BackendOptions
from clinieval.records.runs import RunDir


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else 0.0


def answer_costs(run: Path) -> dict[str, dict[str, float]]:
    """Per item: the generation request and the log-likelihood request, from the saved records."""
    recs = RunDir.open(run).records()
    gen = [r.output for r in recs if r.output is not None]
    out = {
        "generate": {
            "calls": 1.0,
            "prompt_tokens": _mean([float(o.prompt_tokens or 0) for o in gen]),
            "completion_tokens": _mean([float(o.completion_tokens or 0) for o in gen]),
            "seconds": _mean([o.latency_s for o in gen]),
        }
    }
    lls = [(r.loglik, r.output) for r in recs if r.loglik is not None]
    if lls:
        out["loglik"] = {
            "calls": 1.0,
            # the prompt is evaluated once; each of the 10 continuations adds its own tokens
            "prompt_tokens": _mean(
                [float((o.prompt_tokens if o else 0) or 0) + sum(ll.token_counts) for ll, o in lls]
            ),
            "completion_tokens": 0.0,
            "seconds": _mean([ll.latency_s for ll, _ in lls]),
        }
    return out


async def loglik_only(
    samples: list[Any], model: str, out: Path, settings: EHRNoteQASettings
) -> dict[str, float]:
    """The log-likelihood mode on its own (no generation first whose KV cache it could reuse)."""
    from clinieval.benchmarks.ehrnoteqa.scoring import OptionLoglik
    from clinieval.benchmarks.ehrnoteqa.task import ehrnoteqa_task
    from clinieval.engine.session import run_arm

    task = ehrnoteqa_task(samples, "mc", settings)
    task.scorers = [OptionLoglik("letter"), OptionLoglik("text")]
    await run_arm(task, model, out, dataclasses.replace(settings, progress=False))
    recs = RunDir.open(out).records()
    lls = [r.loglik for r in recs if r.loglik is not None]
    return {
        "calls": 1.0,
        "prompt_tokens": costs_prompt(recs),
        "completion_tokens": 0.0,
        "seconds": _mean([ll.latency_s for ll in lls]),
    }


def costs_prompt(recs: list[Any]) -> float:
    """Prompt plus the ten continuations' tokens (the prompt counted with the model's tokenizer)."""
    from clinieval.context.tokenizers import tokenizer_for_gguf
    from clinieval.models.catalog import find_embedded

    tok = tokenizer_for_gguf(find_embedded("smollm2-135m-instruct").locate())
    return _mean([float(tok.count(r.messages[-1].content)) + sum(r.loglik.token_counts) for r in recs])


async def judge_passes(arm: Path, spec: str, repeats: int, concurrency: int) -> list[dict[str, Any]]:
    passes = []
    for label in ("first pass", "rerun"):
        t = time.perf_counter()
        res = await judge_arm(arm, spec, repeats=repeats, concurrency=concurrency, progress=False)
        wall = time.perf_counter() - t
        s = res.summary
        passes.append(
            {
                "pass": label,
                "judge_calls": s.judge_calls,
                "requests": s.requests,
                "cache_hits": s.cache_hits,
                "hit_rate": s.cache_hits / s.judge_calls if s.judge_calls else 0.0,
                "wall_s": wall,
                "calls_per_s": s.judge_calls / wall if wall > 0 else 0.0,
                "items": s.items,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "parse_failures": s.parse_failures,
            }
        )
    return passes


def mode_rows(
    costs: dict[str, dict[str, dict[str, float]]], judged: dict[str, list[dict[str, Any]]]
) -> dict[str, dict[str, float]]:
    """Cost of one scored item under each mode (the answer's own generation included)."""
    mc_gen, free_gen = costs["mc"]["generate"], costs["free"]["generate"]
    rows = {
        "letter extraction (mc)": dict(mc_gen),
        "log-likelihood after generation (mc)": dict(costs["mc"]["loglik"]),
    }
    for name, fmt, gen in (("judge x5 (mc)", "mc", mc_gen), ("judge x5 (free text)", "free", free_gen)):
        first = judged[fmt][0]
        n = first["items"]
        rows[name] = {
            "calls": gen["calls"] + first["judge_calls"] / n,
            "prompt_tokens": gen["prompt_tokens"] + first["prompt_tokens"] / n,
            "completion_tokens": gen["completion_tokens"] + first["completion_tokens"] / n,
            "seconds": gen["seconds"] + first["wall_s"] / n,
        }
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patients", type=int, default=6)
    ap.add_argument("--per-patient", type=int, default=2)
    ap.add_argument("--model", default="llamacpp:smollm2-135m-instruct")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()
    costs: dict[str, dict[str, dict[str, float]]] = {}
    judged: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        build_synthetic_set(data, patients=args.patients, per_patient=args.per_patient)
        loaded = load_physionet(data / "qa.jsonl", data / "discharge.csv")
        settings = EHRNoteQASettings(
            generation=dataclasses.replace(GENERATION, max_tokens=args.max_tokens),
            backend=BackendOptions(n_ctx=8192),
            progress=False,
        )
        arms = {}
        for fmt in ("mc", "free"):
            arms[fmt] = Path(tmp) / fmt
            asyncio.run(run_format_arm(loaded.samples, args.model, fmt, arms[fmt], settings))
            costs[fmt] = answer_costs(arms[fmt])
        standalone = asyncio.run(loglik_only(loaded.samples, args.model, Path(tmp) / "loglik", settings))
        with smol_server(n_ctx=8192) as srv:
            spec = f"openai:{srv.base_url}@{srv.alias}"
            for fmt in ("mc", "free"):
                judged[fmt] = asyncio.run(judge_passes(arms[fmt], spec, args.repeats, args.concurrency))
    rows = mode_rows(costs, judged)
    rows["log-likelihood alone (mc)"] = standalone
    base = rows["letter extraction (mc)"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {args.model} under test,")
    print(f"# SmolLM2 judge on a local llama.cpp server; {loaded.describe()}; max_tokens {args.max_tokens}")
    print(
        "| mode | calls / item | prompt tokens / item | completion tokens / item | s / item "
        "| x letter extraction (tokens, s) |"
    )
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        tokens = (r["prompt_tokens"] + r["completion_tokens"]) / (
            base["prompt_tokens"] + base["completion_tokens"]
        )
        print(
            f"| {name} | {r['calls']:.1f} | {r['prompt_tokens']:,.0f} | {r['completion_tokens']:.1f} | "
            f"{r['seconds']:.2f} | {tokens:.1f}, {r['seconds'] / base['seconds']:.1f} |"
        )
    print()
    print(
        "| judge | pass | judge calls | requests | cache hits | hit rate | wall s | calls/s "
        "| x first pass (wall) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for fmt, passes in judged.items():
        for p in passes:
            print(
                f"| {fmt} | {p['pass']} | {p['judge_calls']} | {p['requests']} | {p['cache_hits']} | "
                f"{p['hit_rate']:.0%} | {p['wall_s']:.2f} | {p['calls_per_s']:,.1f} | "
                f"{p['wall_s'] / passes[0]['wall_s']:.3f} |"
            )
    out_dir = Path(__file__).parent / "out"
    out_dir.mkdir(exist_ok=True)
    path = out_dir / f"ehrnoteqa_cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    payload = {
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "args": vars(args),
        "modes": rows,
        "judge": judged,
    }
    path.write_text(json.dumps(payload, indent=2))
    print(f"written {path}")


if __name__ == "__main__":
    main()
