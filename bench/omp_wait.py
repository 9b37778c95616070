"""How llama.cpp's OpenMP wait policy changes the embedded model's speed, quiet and under load.

The llama.cpp wheel runs its threads with OpenMP, which waits at hundreds of barriers per token.
clinieval sets ``GOMP_SPINCOUNT=20000`` (spin briefly, then sleep) unless the user set a policy or
a spin count. This script times one embedded generation (a ~330-token prompt, 48 greedy tokens,
SmolLM2) in a fresh child process per setting, first on the quiet machine, then with ``--busy``
CPU-bound processes competing for the cores, and prints the median of ``--rounds`` runs per cell
and each setting's ratio against PASSIVE:

- ``PASSIVE``: sleep at once;
- ``unset``: libgomp's default (spin up to 300,000 times, then sleep);
- ``GOMP_SPINCOUNT=20000`` (what clinieval sets) and ``=5000``: a short spin, then sleep;
- ``ACTIVE``: spin without end.

    .venv/bin/python bench/omp_wait.py --rounds 3 --busy 3

JSON goes to bench/out/omp_wait-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SETTINGS: dict[str, dict[str, str]] = {
    "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "unset": {"OMP_WAIT_POLICY": ""},  # an empty policy is libgomp's default; clinieval keeps it
    "GOMP_SPINCOUNT=20000": {"GOMP_SPINCOUNT": "20000"},
    "GOMP_SPINCOUNT=5000": {"GOMP_SPINCOUNT": "5000"},
    "ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
}

CHILD = """
import asyncio, time
from clinieval.models.catalog import find_embedded
from clinieval.models.llamacpp import LlamaCppModel, PrefixStates
from clinieval.types import GenerationConfig, Message
path = find_embedded("smollm2-135m-instruct").locate()
m = LlamaCppModel(path, name="smol", n_ctx=2048, states=PrefixStates(0))
asyncio.run(m.check())
day = "Day {}: blood pressure {}/{}, pulse {}."
notes = " ".join(day.format(i, 120 + i % 17, 80 + i % 9, 70 + i % 13) for i in range(15))
t = time.perf_counter()
out = asyncio.run(m.generate([Message("user", f"Notes:\\n{notes}\\nSummarise the notes.")],
                             GenerationConfig(max_tokens=48, temperature=0.0)))
print(time.perf_counter() - t, out.completion_tokens)
"""


def spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def one(setting: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(SETTINGS[setting])
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{setting}: child failed: {done.stderr[-1000:]}")
    seconds, tokens = done.stdout.split()
    if int(tokens) != 48:
        raise SystemExit(f"{setting}: expected 48 tokens, got {tokens}")
    return float(seconds)


def cells(rounds: int) -> dict[str, float]:
    """Median seconds per setting; settings interleaved round by round so drift hits them alike."""
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for _ in range(rounds):
        for s in SETTINGS:
            times[s].append(one(s))
    return {s: statistics.median(v) for s, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--busy", type=int, default=3, help="CPU-bound processes competing in the loaded half")
    args = ap.parse_args(argv)
    quiet = cells(args.rounds)
    ctx = multiprocessing.get_context("fork")
    hogs = [ctx.Process(target=spin, args=(time.time() + 3600,), daemon=True) for _ in range(args.busy)]
    for h in hogs:
        h.start()
    try:
        loaded = cells(args.rounds)
    finally:
        for h in hogs:
            h.terminate()
    print(f"median of {args.rounds} (s for a 330-token prompt + 48 tokens, SmolLM2, {os.cpu_count()} CPUs)")
    print(f"{'setting':<22} {'quiet s':>8} {'÷ PASSIVE':>9} {'busy s':>8} {'÷ PASSIVE':>9}")
    for s in SETTINGS:
        print(
            f"{s:<22} {quiet[s]:8.2f} {quiet[s] / quiet['PASSIVE']:9.2f} "
            f"{loaded[s]:8.2f} {loaded[s] / loaded['PASSIVE']:9.2f}"
        )
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    path = out / f"omp_wait-{time.strftime('%Y%m%d-%H%M%S')}.json"
    result = {"rounds": args.rounds, "busy": args.busy, "quiet_s": quiet, "busy_s": loaded}
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
