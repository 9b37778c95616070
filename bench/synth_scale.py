"""Throughput of the synthetic patient generator: timelines in memory and OMOP CSV folders.

For each N: stream N timelines (patients/s, events + notes per second), then write an OMOP CDM
CSV folder (patients/s, CSV rows/s, MB written, peak RSS so far).

    .venv/bin/python bench/synth_scale.py --n 1000 10000
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import tempfile
import time
from pathlib import Path

from clinieval.ehr.synth.generator import generate
from clinieval.ehr.synth.writer import write_omop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    head = (
        ("N", 7),
        ("timelines/s", 12),
        ("items/s", 10),
        ("OMOP pat/s", 11),
        ("rows/s", 10),
        ("MB", 8),
        ("RSS MB", 7),
    )
    print(" ".join(f"{h:>{w}}" for h, w in head))
    for n in args.n:
        t0 = time.perf_counter()
        items = sum(len(t.events) + len(t.notes) for t in generate(n, args.seed))
        t_gen = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            out = write_omop(n, args.seed, Path(tmp) / "omop")
            t_omop = time.perf_counter() - t0
            rows = 0
            size = 0
            for f in out.iterdir():
                size += f.stat().st_size
                with f.open(encoding="utf-8", newline="") as fh:
                    rows += sum(1 for _ in csv.reader(fh)) - 1  # records, not lines: notes span several
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{n:7d} {n / t_gen:12.0f} {items / t_gen:10.0f} {n / t_omop:11.0f} {rows / t_omop:10.0f} "
            f"{size / 1e6:8.1f} {rss:7.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
