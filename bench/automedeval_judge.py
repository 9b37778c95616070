"""AutoMedEval's judge: calls and tokens per verdict with and without the knowledge chain, and the
parse rate per judge.

The set is the synthetic judge-evaluation set (``automedeval.synth.synthetic_set``: a dozen
common conditions, three responses each). The knowledge base is built in the run from one small
document per condition (its patient question as a title, its key facts as text) with ``build_kb``.
Every judge judges the set twice through ``judging.judge_set``: without a knowledge base, then
with it (``JudgePlan(kb=...)``). The second pass starts from a copy of the first one's request
cache, so first-round calls whose prompt is the same are read back, not asked again; the tallies
count cached replies (calls and tokens) as the results rest on them.

Judges:

* the two embedded models, ``llamacpp:smollm2-135m-instruct`` and ``llamacpp:gemma3-270m``, with
  their real replies (answers capped at ``--max-tokens``): their parse rates are what they are;
* **scripted** (not a model): a local OpenAI-compatible server on 127.0.0.1 that, for each
  verdict, writes a ``[Question] ...`` line with probability ``--ask-rate`` (a hash of the prompt,
  the seed and the round, so reruns agree), again after each lookup with the same probability, at
  most 3 times, then scores each answer by word overlap with the reference
  (``automedeval.overlap_judge.overlap_reply``) in the paper's format. It stands in for a judge that
  uses the chain, to measure what the chain costs where it is used. Its token counts are SmolLM2's
  vocabulary over the messages' text (no chat-template tokens). It runs three ways: chain on,
  chain off (the same script: its questions go unanswered and those verdicts are unparsed), and a
  judge that never asks (the cost floor: one call per verdict).

    .venv/bin/python bench/automedeval_judge.py --items 4 --repeats 1 --max-tokens 256
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, JudgePlan, judge_set
from clinieval.benchmarks.automedeval.knowledge import MAX_ROUNDS, KnowledgeBase, build_kb
from clinieval.benchmarks.automedeval.overlap_judge import overlap_reply
from clinieval.benchmarks.automedeval.synth import CONDITIONS, synthetic_set
from clinieval.context.tokenizers import tokenizer_from_spec
from clinieval.models.spec import BackendOptions, parse_model_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _echo_server import JsonHandler, serving

OUT = Path(__file__).resolve().parent / "out"
EMBEDDED = ("llamacpp:smollm2-135m-instruct", "llamacpp:gemma3-270m")
KNOWLEDGE = "According to the Reference"
_DOCTOR = re.compile(r"^Doctor (\d+): (.*)$", re.MULTILINE)
_ASKS = ("first-line treatment", "warning signs", "follow-up")


def write_docs(folder: Path) -> Path:
    """One Markdown page per synthetic condition: the question as a title, the key facts as text."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, c in enumerate(CONDITIONS):
        (folder / f"condition{n:02d}.md").write_text(
            f"# {c.question}\n\n" + " ".join(c.facts) + "\n", encoding="utf-8"
        )
    return folder


# ---------------------------------------------------------------------------------------------
# The scripted judge
# ---------------------------------------------------------------------------------------------


def _uniform(*parts: object) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def scripted_reply(messages: list[dict[str, str]], seed: int, ask_rate: float) -> str:
    """Ask (``[Question]``) with probability ``ask_rate`` per round, at most 3 rounds, else score."""
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    rounds = sum(m["content"].startswith(KNOWLEDGE) for m in messages if m["role"] == "user")
    question = prompt.split("[Patient Question]\n", 1)[1].split("\n", 1)[0]
    if rounds < MAX_ROUNDS and _uniform(prompt, seed, rounds) < ask_rate:
        return f"Analyze: Step 1: I need to check one fact.\n[Question] {_ASKS[rounds]}: {question}"
    reference = prompt.split("[Reference Answer]\n", 1)[1].split("\n\n[Doctors' Answers]", 1)[0]
    answers = [a for _, a in _DOCTOR.findall(prompt.split("[Doctors' Answers]\n", 1)[1])]
    return overlap_reply(reference, answers)


@contextmanager
def scripted_server(ask_rate: float) -> Iterator[str]:
    """A local OpenAI-compatible server answering with :func:`scripted_reply`; yields its /v1 URL."""
    vocab = tokenizer_from_spec("llamacpp:smollm2-135m-instruct")

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "scripted"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            messages = body["messages"]
            text = scripted_reply(messages, int(body.get("seed") or 0), ask_rate)
            usage = {
                "prompt_tokens": vocab.count("\n".join(m["content"] for m in messages)),
                "completion_tokens": vocab.count(text),
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            self._send({
                "id": "scripted", "object": "chat.completion", "model": "scripted", "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
            })  # fmt: skip

    with serving(Handler) as url:
        yield url


# ---------------------------------------------------------------------------------------------
# Judging passes
# ---------------------------------------------------------------------------------------------


def judge_pass(
    spec: str, items: list[JudgeItem], out: Path, plan: JudgePlan, *, n_ctx: int = 4096
) -> dict[str, Any]:
    model = parse_model_spec(spec, BackendOptions(n_ctx=n_ctx, timeout_s=600.0))

    async def go() -> None:
        try:
            await model.check()
            await judge_set(items, model, out, plan)
        finally:
            await model.aclose()

    started = time.perf_counter()
    asyncio.run(go())
    seconds = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    verdicts = [json.loads(x) for x in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    return row(summary, verdicts, seconds)


def row(summary: dict[str, Any], verdicts: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    n = summary["verdicts"]
    calls = summary["calls"]
    why = Counter(v["error"][:80] for v in verdicts if v["error"] is not None)
    return {
        "verdicts": n,
        "parse_rate": summary["parse_rate"],
        "calls_per_verdict": (calls["requests"] + calls["cache_hits"]) / n,
        "new_requests": calls["requests"],
        "cache_hits": calls["cache_hits"],
        "prompt_tokens_per_verdict": calls["prompt_tokens"] / n,
        "completion_tokens_per_verdict": calls["completion_tokens"] / n,
        "lookups_per_verdict": summary["lookups"] / n,
        "wall_s": seconds,
        "unparsed_why": dict(why.most_common(4)),
        "asked_question": sum(
            any(x.lstrip().startswith("[Question]") for x in v["raw"].splitlines()) for v in verdicts
        ),
        "raw_samples": [v["raw"][:400] for v in verdicts[:2]],
        "agreement": summary.get("agreement"),
    }


def both_ways(
    spec: str, items: list[JudgeItem], root: Path, plan: JudgePlan, kb: KnowledgeBase
) -> dict[str, Any]:
    """Without the chain, then with it, the second pass seeded with the first one's cache."""
    plain = judge_pass(spec, items, root / "plain", plan)
    (root / "chain").mkdir(parents=True)
    shutil.copy(root / "plain" / "cache.sqlite", root / "chain" / "cache.sqlite")
    chain = judge_pass(spec, items, root / "chain", dataclasses.replace(plan, kb=kb))
    return {"without_chain": plain, "with_chain": chain}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=4, help="items for the embedded judges (default 4)")
    ap.add_argument("--repeats", type=int, default=1, help="repeats for the embedded judges (default 1)")
    ap.add_argument("--max-tokens", type=int, default=256, help="embedded judges' reply cap (default 256)")
    ap.add_argument("--scripted-items", type=int, default=48)
    ap.add_argument("--scripted-repeats", type=int, default=3)
    ap.add_argument("--ask-rate", type=float, default=0.5, help="scripted judge's [Question] rate per round")
    ap.add_argument("--kb-mode", choices=("bm25", "dense", "hybrid"), default="bm25")
    ap.add_argument("--judges", default=",".join(EMBEDDED), help="embedded judges ('' for none)")
    args = ap.parse_args(argv)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_start": os.getloadavg()}
    result: dict[str, Any] = {"args": vars(args), "machine": machine, "judges": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n_chunks = build_kb([write_docs(root / "docs")], root / "kb", dense=args.kb_mode != "bm25")
        kb = KnowledgeBase(root / "kb", mode=args.kb_mode)
        result["kb"] = {"chunks": n_chunks, "mode": args.kb_mode}
        plan = JudgePlan(
            repeats=args.scripted_repeats,
            generation=dataclasses.replace(JUDGE_GENERATION, max_tokens=args.max_tokens),
            progress=False,
        )
        scripted_items = synthetic_set(args.scripted_items)
        for label, rate in (("scripted", args.ask_rate), ("scripted, never asks", 0.0)):
            with scripted_server(rate) as url:
                out = both_ways(f"openai:{url}@scripted", scripted_items, root / label, plan, kb)
            if rate == 0.0:
                out = {"without_chain": out["without_chain"]}  # with the chain: identical, nothing asked
            result["judges"][label] = out
        items = synthetic_set(args.items)
        for spec in filter(None, args.judges.split(",")):
            embedded = dataclasses.replace(plan, repeats=args.repeats)
            result["judges"][spec] = both_ways(spec, items, root / spec.replace(":", "_"), embedded, kb)
    result["machine"]["load_avg_end"] = os.getloadavg()
    OUT.mkdir(exist_ok=True)
    path = OUT / f"automedeval_judge-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print_table(result)
    print(f"written: {path}")
    return 0


def print_table(result: dict[str, Any]) -> None:
    head = f"{'judge':34} {'chain':5} {'verdicts':>8} {'parsed':>7} {'calls/v':>8} {'prompt tok/v':>12} "
    print(head + f"{'compl tok/v':>11} {'lookups/v':>9} {'wall s':>7}")
    for name, runs in result["judges"].items():
        for way, r in runs.items():
            chain = "on" if way == "with_chain" else "off"
            print(
                f"{name:34} {chain:5} {r['verdicts']:8d} {r['parse_rate']:7.1%} "
                f"{r['calls_per_verdict']:8.2f} "
                f"{r['prompt_tokens_per_verdict']:12.1f} {r['completion_tokens_per_verdict']:11.1f} "
                f"{r['lookups_per_verdict']:9.2f} {r['wall_s']:7.1f}"
            )
        if "with_chain" in runs:
            on, off = runs["with_chain"], runs["without_chain"]
            print(
                f"{'':34} chain/off: calls {on['calls_per_verdict'] / off['calls_per_verdict']:.2f}x, "
                f"prompt tokens {on['prompt_tokens_per_verdict'] / off['prompt_tokens_per_verdict']:.2f}x"
            )
        for way, r in runs.items():
            if r["unparsed_why"]:
                print(f"{'':34} unparsed ({way}): {r['unparsed_why']}")
    judges = result["judges"]
    if "scripted" in judges and "scripted, never asks" in judges:
        on, floor = judges["scripted"]["with_chain"], judges["scripted, never asks"]["without_chain"]
        ratios = {
            k: on[f"{k}_per_verdict"] / floor[f"{k}_per_verdict"]
            for k in ("calls", "prompt_tokens", "completion_tokens")
        }
        print("scripted chain on / never asks: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    raise SystemExit(main())
