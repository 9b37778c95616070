"""OMOP -> MedAlign XML throughput (what ``clinieval ehr omop2xml`` does), at several sizes in one run.

For each source the timed section is the whole pipeline of the CLI command:
``open_omop(folder)`` -> ``iter_timelines()`` -> ``write_xml(tl, out/f"{pid}.xml")`` for every
patient. Time spent inside the reader (opening, DuckDB staging, fetching, building timelines) is
reported as *read*; time inside ``write_xml`` (rendering, writing, fsync, rename) as *write*.

Sources: the real Synthea27Nj OMOP folder (28 patients, read in place; skipped with a note when
absent) and synthetic patients from ``clinieval.ehr.synth.writer.write_omop`` at each ``--sizes``
N. The synthetic CSVs are generated into a temporary folder first; that generation is timed
separately and is not part of the pipeline time. Each size runs in a fresh child process, so
"peak RSS" (from ``resource.getrusage``: the process-wide peak, Python + DuckDB) belongs to that
size alone.

The issue asks for a cost linear in events: events/s should stay roughly constant as N grows, so
the script prints events/s at the largest synthetic size divided by events/s at the smallest.

    .venv/bin/python bench/omop_throughput.py --sizes 1000 10000
    .venv/bin/python bench/omop_throughput.py --sizes 1000 100000
    .venv/bin/python bench/omop_throughput.py --sizes 20000 --dir /tmp/omop20k   # keeps the folder
    .venv/bin/python bench/omop_throughput.py --sizes 2000 --reader-only --memory-limit 1GB

JSON goes to bench/out/omop_throughput-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REAL = HERE.parent.parent / "shared" / "data" / "omop-synthea27nj"  # the shared/ folder beside the repo


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def dir_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def run_one(
    folder: Path, out: Path, memory_limit: str | None, chunk: int, reader_only: bool
) -> dict[str, Any]:
    """The timed pipeline for one OMOP folder; runs in a child process (see ``--one``)."""
    from clinieval.cli.ehr import _safe_name
    from clinieval.ehr.medalign_xml import write_xml
    from clinieval.ehr.omop.source import open_omop

    rss_start = peak_rss_mib()
    events = notes = patients = 0
    read_s = write_s = 0.0
    t0 = time.perf_counter()
    with open_omop(folder, memory_limit=memory_limit, chunk=chunk) as src:
        open_s = time.perf_counter() - t0
        it = src.iter_timelines()
        while True:
            t = time.perf_counter()
            tl = next(it, None)
            t1 = time.perf_counter()
            read_s += t1 - t
            if tl is None:
                break
            patients += 1
            events += len(tl.events)
            notes += len(tl.notes)
            if not reader_only:
                write_xml(tl, out / f"{_safe_name(tl.person.person_id)}.xml")
                write_s += time.perf_counter() - t1
        summary = src.summary()
    total_s = time.perf_counter() - t0  # includes open and close
    return {
        "patients": patients,
        "events": events,
        "notes": notes,
        "open_s": open_s,
        "read_s": open_s + read_s,
        "write_s": write_s,
        "total_s": total_s,
        "peak_rss_mib_at_start": rss_start,
        "peak_rss_mib": peak_rss_mib(),
        "xml_bytes": dir_bytes(out),
        "xml_files": sum(1 for _ in out.glob("*.xml")),
        "rows": summary["rows"],
        "issues": summary["issues"],
        "orphans": summary["orphans"],
        "missing_tables": summary["missing_tables"],
    }


def measure(label: str, folder: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / f"xml-{label}"
    out.mkdir()
    cmd = [sys.executable, __file__, "--one", str(folder), str(out), "--chunk", str(args.chunk)]
    cmd += ["--memory-limit", args.memory_limit] + (["--reader-only"] if args.reader_only else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # the child's stderr shows as is
    if proc.returncode:
        shutil.rmtree(out, ignore_errors=True)
        raise SystemExit(f"{label}: the pipeline failed (exit status {proc.returncode}); see above")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    shutil.rmtree(out, ignore_errors=True)
    items = res["events"] + res["notes"]
    res.update(
        source=label,
        folder=str(folder),
        csv_mb=dir_bytes(folder) / 1e6,
        items=items,
        events_per_s=items / res["total_s"],
        events_per_s_after_open=items / (res["total_s"] - res["open_s"]),
        patients_per_s=res["patients"] / res["total_s"],
        xml_mb=res["xml_bytes"] / 1e6,
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10_000], help="synthetic patient counts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real", type=Path, help="real OMOP folder (default: shared/data/omop-synthea27nj)")
    ap.add_argument("--no-real", action="store_true", help="skip the real 28-patient folder")
    ap.add_argument("--dir", type=Path, help="keep synthetic folders here as DIR/n<N> and reuse them")
    ap.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit (default 2GB, as the CLI)")
    ap.add_argument("--chunk", type=int, default=1000, help="people per chunk (default 1000, as the CLI)")
    ap.add_argument("--reader-only", action="store_true", help="read timelines, write no XML")
    ap.add_argument("--one", nargs=2, type=Path, metavar=("OMOP", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.one:
        res = run_one(args.one[0], args.one[1], args.memory_limit, args.chunk, args.reader_only)
        print(json.dumps(res))
        return 0

    from clinieval.ehr.synth.writer import write_omop

    results: list[dict[str, Any]] = []
    gen: dict[int, float] = {}
    head = (
        "source", "patients", "events+notes", "read s", "write s", "total s",
        "events/s", "pat/s", "RSS MB", "XML MB",
    )  # fmt: skip
    widths = (11, 8, 12, 8, 8, 8, 9, 7, 7, 8)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)), flush=True)

    def show(r: dict[str, Any]) -> None:
        cells = (
            r["source"], r["patients"], r["items"], f"{r['read_s']:.2f}", f"{r['write_s']:.2f}",
            f"{r['total_s']:.2f}", f"{r['events_per_s']:.0f}", f"{r['patients_per_s']:.1f}",
            f"{r['peak_rss_mib']:.0f}", f"{r['xml_mb']:.1f}",
        )  # fmt: skip
        print(" ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)), flush=True)

    with tempfile.TemporaryDirectory(prefix="omop-bench-") as tmp:
        work = Path(tmp)
        real = args.real or REAL
        if not args.no_real:
            if (real / "PERSON.csv").exists() or (real / "person.csv").exists():
                results.append(measure("synthea27nj", real, args, work))
                show(results[-1])
            else:
                print(f"(real OMOP folder {real} not found; skipped)", flush=True)
        for n in args.sizes:
            folder = (args.dir / f"n{n}") if args.dir else work / f"omop-{n}"
            if not (folder / "PERSON.csv").exists():
                t = time.perf_counter()
                write_omop(n, args.seed, folder)
                gen[n] = time.perf_counter() - t
            r = measure(f"synth-{n}", folder, args, work)
            r["generate_s"] = gen.get(n)
            results.append(r)
            show(r)
            if not args.dir:
                shutil.rmtree(folder, ignore_errors=True)

    synth_rs = [r for r in results if r["source"].startswith("synth-")]
    ratio = ratio2 = None
    if len(synth_rs) >= 2:
        lo, hi = min(synth_rs, key=lambda r: r["patients"]), max(synth_rs, key=lambda r: r["patients"])
        ratio = hi["events_per_s"] / lo["events_per_s"]
        print(
            f"\nlinearity: events/s at {hi['source']} / events/s at {lo['source']} = {ratio:.2f} "
            "(1.0 = cost exactly linear in events)"
        )
        ratio2 = hi["events_per_s_after_open"] / lo["events_per_s_after_open"]
        print(f"           the same, leaving out open_omop (fixed cost): {ratio2:.2f}")
    for n, s in gen.items():
        print(f"generation (not timed above): {n} synthetic patients -> OMOP CSV in {s:.1f} s")
    print("peak RSS = getrusage ru_maxrss of the child process that ran that size (Python + DuckDB)")

    report = {
        "command": "bench/omop_throughput.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "results": results,
        "linearity_events_per_s_ratio": ratio,
        "linearity_after_open_ratio": ratio2,
        "memory_limit": args.memory_limit,
        "chunk": args.chunk,
        "reader_only": args.reader_only,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    out_dir = HERE / "out"
    out_dir.mkdir(exist_ok=True)
    path = out_dir / f"omop_throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
