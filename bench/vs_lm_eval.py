"""clinieval vs lm-evaluation-harness: same items, same server, same requests, wall time.

One command starts a local llama.cpp OpenAI-compatible server (SmolLM2-135M), warms it, then
runs the first N PubMedQA test items through each tool as a subprocess, timing each tool's whole
command (interpreter start-up, imports, dataset loading, requests, scoring, writing results):

  clinieval  .venv/bin/clinieval run pubmedqa --model openai:URL@smol ... (fresh run directory)
  lm-eval    bench/.venv-lmeval/bin/lm-eval run --model local-chat-completions ... with a custom
             task generated into a temp dir: a local JSONL of the same items (dataset_path: json),
             doc_to_text = clinieval's exact user message, generate_until with the same max
             tokens, temperature 0, seed 0, no stop sequences, num_concurrent = concurrency,
             no tokenizer (tokenizer_backend=None, tokenized_requests=False), HF hub offline

Both send one chat-completions request per item with identical messages; the script checks that
each tool answered all N items (by counting its per-item outputs) and how many answers agree,
then prints the ratio lm-eval time / clinieval time (goal: > 1, clinieval faster).

lm-eval lives in its own virtualenv (bench/.venv-lmeval: torch==2.13.0 CPU first, then
lm-eval[api]==0.4.13; `make bench` creates it) so it cannot disturb clinieval's. Items are read
in place from the shared dataset; only the temp dir holds a copy.

    .venv/bin/python bench/vs_lm_eval.py --n 40 --concurrency 4 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import ROOT, Server, common_args, log_offset, result_header, server_work, smol_server, warm_up

from clinieval.benchmarks.pubmedqa.task import pubmedqa_task
from clinieval.scoring.scorers import ChoiceExtraction

OUT_DIR = Path(__file__).resolve().parent / "out"
LMEVAL_VENV = Path(__file__).resolve().parent / ".venv-lmeval"
CLINIEVAL_BIN = ROOT / ".venv" / "bin" / "clinieval"
TASK_NAME = "clinieval_bench_pubmedqa"

TASK_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{answer}}}}"
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


@dataclass(slots=True)
class Measurement:
    tool: str
    round: int
    wall_s: float
    answered: int
    returncode: int
    cpu_s: float = 0.0  # user + system CPU of the tool's process tree
    server_requests: int = 0
    server_compute_s: float = 0.0  # llama.cpp's own time, from the server log
    prompt_tokens: tuple[int, ...] = ()  # per-request prompt lengths the server saw, sorted

    def items_per_s(self, n: int) -> float:
        return n / self.wall_s


def write_items(tmp: Path, n: int, max_tokens: int) -> tuple[dict[str, str], list[str]]:
    """The first N items as lm-eval sees them: clinieval's exact user message, plus the target.

    Returns id -> prompt text for those items, and the prompts of the next 4 (for warm-up).
    """
    task = pubmedqa_task(split="test", scorers=[ChoiceExtraction()])
    samples = task.load()
    prompts: dict[str, str] = {}
    for s in samples[: n + 4]:
        messages = task.prompt.messages(s, s.context)
        if len(messages) != 1 or messages[0].role != "user":
            raise SystemExit("expected one user message per PubMedQA item; update this benchmark")
        prompts[s.id] = messages[0].content
    data = tmp / "items.jsonl"
    with data.open("w", encoding="utf-8") as f:
        for s in samples[:n]:
            row = {"id": s.id, "prompt": prompts[s.id], "answer": s.target}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    (tmp / "tasks").mkdir()
    (tmp / "tasks" / f"{TASK_NAME}.yaml").write_text(
        TASK_YAML.format(task=TASK_NAME, data=json.dumps(str(data)), max_tokens=max_tokens),
        encoding="utf-8",
    )
    extra = [prompts.pop(s.id) for s in samples[n : n + 4]]
    return prompts, extra


def clinieval_cmd(server: Server, args: argparse.Namespace, out: Path) -> list[str]:
    return [
        str(CLINIEVAL_BIN), "run", "pubmedqa",
        "--model", f"openai:{server.base_url}@{server.alias}",
        "--limit", str(args.n),
        "--out", str(out),
        "--overwrite", "--no-progress",
        "--concurrency", str(args.concurrency),
        "--max-tokens", str(args.max_tokens),
        "--scorer", "choice_extract",
    ]  # fmt: skip


def lmeval_cmd(server: Server, args: argparse.Namespace, tmp: Path, out: Path) -> list[str]:
    model_args = ",".join(
        [
            f"model={server.alias}",
            f"base_url={server.base_url}/chat/completions",
            f"num_concurrent={args.concurrency}",
            "tokenizer_backend=None",
            "tokenized_requests=False",
            "seed=0",
            "max_retries=3",
        ]
    )
    return [
        str(LMEVAL_VENV / "bin" / "lm-eval"), "run",
        "--model", "local-chat-completions",
        "--model_args", model_args,
        "--tasks", TASK_NAME,
        "--include_path", str(tmp / "tasks"),
        "--apply_chat_template",
        "--batch_size", "1",
        "--output_path", str(out),
        "--log_samples",
    ]  # fmt: skip


def lmeval_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    env.update(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        # A fresh datasets cache each run: lm-eval pays for preparing the JSON like a first run,
        # and the shared user cache is left alone.
        HF_HOME=str(tmp / "hf-home"),
        TOKENIZERS_PARALLELISM="false",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], env: dict[str, str] | None, log: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit status of one whole command."""
    with log.open("w", encoding="utf-8") as f:
        cpu0, start = _children_cpu(), time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    return wall, cpu, proc.returncode


def clinieval_answers(out: Path) -> dict[str, str]:
    answers: dict[str, str] = {}
    path = out / "samples.jsonl"
    if not path.exists():
        return answers
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        output = rec.get("output") or {}
        if output.get("error_kind") is None:
            answers[str(rec["sample"]["id"])] = output.get("text", "")
    return answers


def lmeval_answers(out: Path) -> dict[str, str]:
    answers: dict[str, str] = {}
    for path in out.rglob(f"samples_{TASK_NAME}_*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            resps = rec.get("resps") or []
            if resps and resps[0] and isinstance(resps[0][0], str):
                answers[str(rec["doc"]["id"])] = resps[0][0]
    return answers


def order(rounds: int) -> list[str]:
    """ABBA blocks (clinieval, lm-eval, lm-eval, clinieval, ...) so drift hits both tools alike."""
    out: list[str] = []
    for i in range(rounds):
        out += ["clinieval", "lm-eval"] if i % 2 == 0 else ["lm-eval", "clinieval"]
    return out


def tail(path: Path, n: int = 3000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-n:]


def run(args: argparse.Namespace) -> dict[str, object]:
    lm_eval_bin = LMEVAL_VENV / "bin" / "lm-eval"
    if not lm_eval_bin.exists():
        raise SystemExit(f"{lm_eval_bin} missing; create it with `make bench` (see Makefile)")
    measurements: list[Measurement] = []
    answers: dict[str, list[dict[str, str]]] = {"clinieval": [], "lm-eval": []}
    commands: dict[str, str] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-vs-lmeval-") as tmp_s,
        smol_server(n_ctx=args.n_ctx) as srv,
    ):
        tmp = Path(tmp_s)
        prompts, extra = write_items(tmp, args.n, args.max_tokens)
        ids = list(prompts)
        # Untimed: two tiny requests, then real-length prompts of items outside the timed set, so
        # neither tool pays for the server's warm-up (and no timed prompt is already cached).
        warm_up(srv, n=args.warmup, prompts=extra, max_tokens=args.max_tokens)
        for i, tool in enumerate(order(args.rounds)):
            rnd = i // 2 + 1
            out = tmp / f"{tool}-round{rnd}"
            log = tmp / f"{tool}-round{rnd}.log"
            before = log_offset(srv)
            if tool == "clinieval":
                cmd = clinieval_cmd(srv, args, out)
                wall, cpu, rc = timed(cmd, None, log)
                got = clinieval_answers(out)
            else:
                cmd = lmeval_cmd(srv, args, tmp, out)
                wall, cpu, rc = timed(cmd, lmeval_env(tmp), log)
                got = lmeval_answers(out)
            work = server_work(srv, before, log_offset(srv))
            commands[tool] = " ".join(cmd)
            m = Measurement(
                tool, rnd, wall, len(got), rc, cpu, work.requests, work.compute_s, work.prompt_tokens
            )
            measurements.append(m)
            answers[tool].append(got)
            print(
                f"  {tool:9s} round {rnd}: {m.answered}/{args.n} answered in {wall:.2f}s "
                f"(rc {rc}, server compute {work.compute_s:.2f}s for {work.requests} requests, "
                f"CPU {cpu:.2f}s)",
                flush=True,
            )
            if rc != 0 or m.answered != args.n or set(got) != set(ids) or work.requests != args.n:
                print(tail(log), file=sys.stderr)
                raise SystemExit(f"{tool} round {rnd}: rc {rc}, answered {m.answered} of {args.n} items")
            if args.keep_logs:
                OUT_DIR.mkdir(parents=True, exist_ok=True)
                (OUT_DIR / f"vs_lm_eval-{tool}-round{rnd}.log").write_text(tail(log, 200_000))
    return report(args, measurements, answers, commands)


def report(
    args: argparse.Namespace,
    ms: list[Measurement],
    answers: dict[str, list[dict[str, str]]],
    commands: dict[str, str],
) -> dict[str, object]:
    clin = [m.wall_s for m in ms if m.tool == "clinieval"]
    lme = [m.wall_s for m in ms if m.tool == "lm-eval"]
    c_mean, l_mean = statistics.mean(clin), statistics.mean(lme)
    ref = answers["clinieval"][0]
    same_prompts = len({m.prompt_tokens for m in ms}) == 1 and len(ms[0].prompt_tokens) == args.n
    agree = sum(1 for k, v in answers["lm-eval"][0].items() if ref.get(k, "").strip() == v.strip())

    print()
    print(f"N={args.n} PubMedQA test items, concurrency {args.concurrency}, max_tokens {args.max_tokens},")
    print(f"{args.rounds} round(s) per tool in ABBA order, server: llama_cpp.server SmolLM2-135M Q4_1")
    print()
    print("| tool      | round | wall s | items/s | answered | server compute s | wall - compute s | CPU s |")
    print("|-----------|-------|--------|---------|----------|------------------|------------------|-------|")
    for m in sorted(ms, key=lambda m: (m.tool, m.round)):
        print(
            f"| {m.tool:9s} | {m.round:5d} | {m.wall_s:6.2f} | {m.items_per_s(args.n):7.3f} "
            f"| {m.answered:8d} | {m.server_compute_s:16.2f} | {m.wall_s - m.server_compute_s:16.2f} "
            f"| {m.cpu_s:5.1f} |"
        )
    c_gap = statistics.mean(m.wall_s - m.server_compute_s for m in ms if m.tool == "clinieval")
    l_gap = statistics.mean(m.wall_s - m.server_compute_s for m in ms if m.tool == "lm-eval")
    # The server's speed drifts between runs; holding it equal isolates what each tool adds.
    compute = statistics.mean(m.server_compute_s for m in ms)
    equal_speed = (compute + l_gap) / (compute + c_gap)
    print()
    print(f"mean wall: clinieval {c_mean:.2f}s, lm-eval {l_mean:.2f}s")
    print(f"mean wall - server compute: clinieval {c_gap:.2f}s, lm-eval {l_gap:.2f}s")
    print(f"ratio lm-eval / clinieval (mean): {l_mean / c_mean:.3f}   (> 1: clinieval faster)")
    print(f"ratio lm-eval / clinieval (best round each): {min(lme) / min(clin):.3f}")
    print(
        f"ratio lm-eval / clinieval at equal server speed: {equal_speed:.3f}   "
        "(mean server compute of all runs + each tool's own wall - compute)"
    )
    print(f"lm-eval answers identical to clinieval's (round 1): {agree}/{args.n}")
    print(f"server saw the same prompt token counts in every run: {same_prompts}")
    return {
        **result_header("vs_lm_eval", args),
        "tool_commands": commands,
        "measurements": [
            {k: v for k, v in asdict(m).items() if k != "prompt_tokens"}
            | {"items_per_s": m.items_per_s(args.n), "non_compute_s": m.wall_s - m.server_compute_s}
            for m in ms
        ],
        "mean_wall_s": {"clinieval": c_mean, "lm-eval": l_mean},
        "mean_non_compute_s": {"clinieval": c_gap, "lm-eval": l_gap},
        "ratio_mean": l_mean / c_mean,
        "ratio_best": min(lme) / min(clin),
        "ratio_equal_server_speed": equal_speed,
        "identical_answers": [agree, args.n],
        "identical_prompt_token_counts": same_prompts,
    }


def main() -> None:
    p = common_args(__doc__, OUT_DIR / "vs_lm_eval.json", "tools")
    p.add_argument("--keep-logs", action="store_true", help="copy each tool's output under bench/out/")
    args = p.parse_args()
    result = run(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.json}")


if __name__ == "__main__":
    main()
