"""What does multi-step refinement cost next to truncation? Model calls and tokens per sample.

Runs one embedded model over the synthetic MedAlign-shaped set (records of 1.7k-10k tokens) under
each context strategy, with the same context window, in the same process, and reports per
sample: model calls, prompt tokens, completion tokens and wall seconds, plus each strategy's
ratio to keep-recent truncation. Prompt tokens are the backend's own counts (llama.cpp), summed
over every refinement step.

    .venv/bin/python bench/medalign_refine_cost.py --patients 6 --n-ctx 2048 --max-tokens 64

Results go to docs/benchmarks.md by hand; JSON to bench/out/medalign_refine_cost-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from clinieval.benchmarks.medalign.synth import build_synthetic_set
from clinieval.benchmarks.medalign.task import MedAlignSettings, StrategyOptions, run_strategy_arm
from clinieval.models.spec import BackendOptions
from clinieval.records.runs import RunDir
from clinieval.types import GenerationConfig


def per_sample(run: Path) -> dict[str, float]:
    recs = RunDir.open(run).records()
    calls = [r.context_info.get("model_calls", 1) for r in recs]
    prompt = [(r.output.prompt_tokens or 0) if r.output else 0 for r in recs]
    completion = [(r.output.completion_tokens or 0) if r.output else 0 for r in recs]
    latency = [r.output.latency_s if r.output else 0.0 for r in recs]
    record = [r.context_info.get("original_tokens", 0) for r in recs]
    return {
        "samples": len(recs),
        "record_tokens": statistics.mean(record),
        "calls": statistics.mean(calls),
        "prompt_tokens": statistics.mean(prompt),
        "completion_tokens": statistics.mean(completion),
        "model_s": statistics.mean(latency),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patients", type=int, default=6)
    ap.add_argument("--per-patient", type=int, default=1)
    ap.add_argument("--model", default="llamacpp:smollm2-135m-instruct")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--strategies", nargs="+", default=["keep-recent", "retrieval", "refine"])
    args = ap.parse_args()
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        built = build_synthetic_set(Path(tmp) / "data", patients=args.patients, per_patient=args.per_patient)
        samples = built.load()
        settings = MedAlignSettings(
            strategy=StrategyOptions(answer_tokens=args.max_tokens),
            generation=GenerationConfig(temperature=0.0, max_tokens=args.max_tokens, seed=0),
            backend=BackendOptions(n_ctx=args.n_ctx),
            progress=False,
        )
        for strategy in args.strategies:
            out = Path(tmp) / strategy
            t = time.perf_counter()
            asyncio.run(run_strategy_arm(samples, args.model, strategy, out, settings))
            rows[strategy] = {**per_sample(out), "wall_s": (time.perf_counter() - t) / len(samples)}
    base = rows.get("keep-recent")
    cpu = platform.processor() or platform.machine()
    print(f"# {cpu}, {os.cpu_count()} cores; {args.model}, n_ctx {args.n_ctx}")
    print(f"# {len(samples)} instructions, max_tokens {args.max_tokens}")
    print(
        "| strategy | record tokens | calls | prompt tokens | completion tokens | wall s "
        "| x keep-recent (calls, prompt tok, wall) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        ratio = (
            f"{r['calls'] / base['calls']:.1f}, {r['prompt_tokens'] / base['prompt_tokens']:.1f}, "
            f"{r['wall_s'] / base['wall_s']:.1f}"
            if base
            else "-"
        )
        print(
            f"| {name} | {r['record_tokens']:,.0f} | {r['calls']:.2f} | {r['prompt_tokens']:,.0f} | "
            f"{r['completion_tokens']:.0f} | {r['wall_s']:.1f} | {ratio} |"
        )
    out_dir = Path(__file__).parent / "out"
    out_dir.mkdir(exist_ok=True)
    path = out_dir / f"medalign_refine_cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"command": " ".join(sys.argv), "args": vars(args), "rows": rows}, indent=2))
    print(f"written {path}")


if __name__ == "__main__":
    main()
