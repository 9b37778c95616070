"""How long does the MedAlign analysis take on a table the size of the paper's?

Builds a seeded random table of 303 instructions x 6 arms (the paper's size) with 8 metric
columns, a clinician rank with ties, correctness, and the four subgroup columns, then times, in
the same process: ``analyze()`` alone with the permutation test at 2,000 resamples (the default)
and at 10,000 (the fixed count it used before it followed ``--resamples``), and the whole MedAlign
analysis (both views). Median of ``--rounds``.

    .venv/bin/python bench/medalign_analysis.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.table import LongTable, Row
from clinieval.benchmarks.medalign.analysis.columns import MedAlignColumns
from clinieval.benchmarks.medalign.analysis.compute import medalign_analysis

METRICS = tuple(f"m{i}" for i in range(8))
GROUPS = {
    "age_group": ("<40", "40-64", ">=65"),
    "gender": ("F", "M"),
    "race": ("a", "b"),
    "ethnicity": ("x", "y"),
}


def table(items: int = 303, arms: int = 6, seed: int = 0) -> LongTable:
    rng = random.Random(seed)
    rows = []
    for i in range(items):
        ranks = [rng.randint(1, arms) for _ in range(arms)]  # ties, as clinicians give them
        patient = {g: rng.choice(levels) for g, levels in GROUPS.items()}
        for a in range(arms):
            cells: dict[str, object] = {"instruction_id": f"i{i}", "model": f"arm{a}", "rank": ranks[a]}
            cells["correct"] = int(rng.random() < 0.3 + 0.08 * a)
            cells.update({m: rng.random() + 0.05 * a for m in METRICS})
            cells.update(patient)
            cells["ehr_tokens"] = 1000 + 97 * i
            rows.append(Row(f"bench:{i}:{a}", cells))
    return LongTable(Path("bench.csv"), tuple(rows[0].cells), tuple(rows))


def median_s(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t = table()
    base = AnalyzeOptions(
        item="instruction_id", scores=(*METRICS, "correct"), human_rank="rank", correct="correct",
        groups=tuple(GROUPS),
    )  # fmt: skip
    cols = MedAlignColumns(metrics=METRICS)
    runs = {
        "analyze(), 2,000 resamples": lambda: analyze(t, base),
        "analyze(), 10,000 resamples": lambda: analyze(
            t, AnalyzeOptions(**{**base.__dict__, "resamples": 10_000})
        ),
        "medalign_analysis (both views)": lambda: medalign_analysis(t, cols),
    }
    cpu = platform.processor() or platform.machine()
    print(f"# {cpu}, {os.cpu_count()} cores; 303 x 6 x 8, rounds={args.rounds}")
    print("| what | median s |\n|---|---|")
    for name, fn in runs.items():
        print(f"| {name} | {median_s(fn, args.rounds):.2f} |", flush=True)


if __name__ == "__main__":
    main()
