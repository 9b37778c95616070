"""How long does each MedAlign context strategy take to build a prompt, from 10k to 500k tokens?

MedAlign's records run from a few thousand to 496k tokens. For each record size and budget
tokenizer this builds the prompt of one instruction for a 32k-context model (256 tokens
reserved) with each strategy, in the same process, and compares it with one plain tokenisation
of the record (the floor every token-exact strategy pays at least once):

  keep-recent  drop the oldest tokens (one encode, a decode and a verifying re-encode)
  retrieval    BM25 over the record's visits, best visits that fit, back in time order
  refine       cut the record into time-ordered pieces for multi-step refinement (the plan;
               the model calls are measured by bench/medalign_refine_cost.py)
  whole        count the record and drop the sample when it does not fit

Records are the synthetic MedAlign-style XML of bench/truncate.py. Prints, per size, median
seconds, the ratio to one tokenisation, and microseconds per 1,000 record tokens (flat when
the cost is linear in length).

    .venv/bin/python bench/medalign_context.py --sizes 10000 50000 100000 250000 500000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from truncate import synthetic_record

from clinieval.benchmarks.medalign.task import STRATEGIES, StrategyOptions, context_policy
from clinieval.context.tokenizers import Tokenizer, tokenizer_from_spec
from clinieval.models.base import render_plain
from clinieval.types import Message, Sample

SPECS = ("tiktoken:cl100k_base", "llamacpp:smollm2-135m-instruct")
QUESTION = "Summarize the patient's strokes and the thrombolytic treatment given."


class PromptOnly:
    """What a context policy reads from a model: its name and how it renders a conversation
    (plain text, as for a base model). No model is loaded: only prompt building is timed."""

    name = "prompt-only"

    def render(self, messages: Sequence[Message]) -> str:
        return render_plain(messages)


def build(strategy: str, spec: str, sample: Sample) -> Callable[[], object]:
    policy = context_policy(strategy, StrategyOptions(tokenizer=spec, max_context=32_000))
    model = PromptOnly()
    plan = getattr(policy, "plan", None)
    if plan is not None:
        return lambda: asyncio.run(plan(sample, model))
    return lambda: asyncio.run(policy.fit(sample, model))  # type: ignore[arg-type]


def median_s(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000, 250_000, 500_000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--specs", nargs="+", default=list(SPECS))
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, rounds={args.rounds}")
    for spec in args.specs:
        tok: Tokenizer = tokenizer_from_spec(spec)
        print(f"\n## budget tokenizer {spec} (32k context, reserve 256)")
        heads = " | ".join(f"{s} s (x, us/1k tok)" for s in STRATEGIES)
        print(f"| record tokens | tokenise once s | {heads} |")
        print("|---|---|" + "---|" * len(STRATEGIES))
        for size in args.sizes:
            text = synthetic_record(size, tok)
            n = tok.count(text)
            sample = Sample(id=str(size), input=QUESTION, context=text)
            base = median_s(lambda text=text, tok=tok: tok.encode(text), args.rounds)
            cells = []
            for strategy in STRATEGIES:
                s = median_s(build(strategy, spec, sample), args.rounds)
                cells.append(f"{s:.3f} ({s / base:.1f}x, {s / n * 1e9:.0f})")
            print(f"| {n:,} | {base:.3f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
