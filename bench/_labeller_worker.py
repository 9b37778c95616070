"""The worker behind ``bench/medeval_labeller.py --dev [--before DIR]``: label the development set
with the clinieval found on ``sys.path`` and print labels and timings as one JSON line.

A file of its own, importing only :class:`Labeller` from ``clinieval.benchmarks.medeval.labeller``
(its name since the labeller was written): it runs under ``PYTHONPATH=<older checkout>/src``, and
once ran as part of the bench script, whose imports of renamed modules
(``medeval.records`` -> ``medeval.items``) broke every comparison with an older commit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import clinieval
from clinieval.benchmarks.medeval.labeller import Labeller

NUMBERS = {"positive": "1.0", "negative": "0.0", "unknown": "-1.0", "absent": ""}
"""How the CheXpert labeler's CSV writes each value (a property of its file format)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev-set", type=Path, required=True)
    parser.add_argument("--chexpert", type=Path, required=True)
    parser.add_argument("--dev-repeat", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with args.dev_set.open(encoding="utf-8") as f:
        reports = [str(json.loads(line)["report"]) for line in f if line.strip()]
    t = time.perf_counter()
    labeller = Labeller("chest x-ray", chexpert=args.chexpert)
    build_s = time.perf_counter() - t
    labels = [[NUMBERS[row[c]] for c in labeller.codes] for row in labeller.label(reports)]
    timed_reports = reports * args.dev_repeat
    labeller.label(timed_reports[:20])  # warm-up, untimed
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        labeller.label(timed_reports)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(json.dumps({
        "clinieval": str(Path(clinieval.__file__).parent), "codes": list(labeller.codes), "labels": labels,
        "build_s": build_s, "timed_reports": len(timed_reports), "times_s": times, "median_s": median,
        "reports_per_s": len(timed_reports) / median,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
