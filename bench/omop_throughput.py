"""How fast does the OMOP reader turn CSV tables into timelines, and does its memory stay flat?

Writes N synthetic patients as OMOP CSV (clinieval.ehr.synth.write_omop) into a temporary folder
(or reuses ``--dir``), then reads them back with OmopSource and reports timelines/s, rows/s and the
process's peak RSS. Run it at two sizes: with streaming, peak RSS should barely move while N grows.

    .venv/bin/python bench/omop_throughput.py --n 2000
    .venv/bin/python bench/omop_throughput.py --n 20000 --dir /tmp/omop20k   # keeps the folder
    .venv/bin/python bench/omop_throughput.py --dir /tmp/omop20k --memory-limit 1GB
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from clinieval.ehr.omop import OmopSource
from clinieval.ehr.synth import write_omop


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="synthetic patients (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, help="OMOP folder to write once and reuse (default: a temp folder)")
    ap.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit (default 2GB)")
    ap.add_argument("--chunk", type=int, default=1000, help="people per chunk (default 1000)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp) / "omop"
        write_s = 0.0
        if not (folder / "PERSON.csv").exists():
            t = time.perf_counter()
            write_omop(args.n, args.seed, folder)
            write_s = time.perf_counter() - t
        rss_before = peak_rss_mib()
        t = time.perf_counter()
        with OmopSource.open(folder, memory_limit=args.memory_limit, chunk=args.chunk) as src:
            open_s = time.perf_counter() - t
            events = notes = 0
            for tl in src.iter_timelines():
                events += len(tl.events)
                notes += len(tl.notes)
            read_s = time.perf_counter() - t
            summary = src.summary()
        size_mib = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
        result = {
            "patients": summary["timelines"],
            "events": events,
            "notes": notes,
            "csv_mib": round(size_mib, 1),
            "write_s": round(write_s, 2),
            "open_s": round(open_s, 3),
            "read_s": round(read_s, 2),
            "timelines_per_s": round(summary["timelines"] / read_s, 1),
            "rows_per_s": round(sum(summary["rows"].values()) / read_s),
            "peak_rss_mib_before_read": round(rss_before),
            "peak_rss_mib": round(peak_rss_mib()),
            "issues": summary["issues"],
            "orphans": summary["orphans"],
            "memory_limit": args.memory_limit,
            "chunk": args.chunk,
            "python": sys.version.split()[0],
            "machine": platform.machine(),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
