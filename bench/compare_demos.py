"""Do two demo output folders hold the same results? A leaf-by-leaf comparison for restructurings.

A change that claims "behaviour unchanged" (issue 12's move into packages, issue 27's
restructuring) is checked by running the demos from the tree before and the tree after, with the
same llama.cpp build and seeds, and comparing every JSON, JSONL, Markdown and CSV file of the two
output folders. Timestamps, durations, hosts, ports and absolute paths differ between any two
runs, so keys that name them are left out and the two roots are written as X in strings.

    python3 bench/compare_demos.py OLD_OUT NEW_OUT [--root OLD_ROOT --root NEW_ROOT]

Prints one line per file that differs, or is missing on either side, and a count; exits 1 when
any file differs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

VOLATILE = re.compile(
    r"(time|seconds|elapsed|wall|started|finished|created|date|duration|_s$|per_s|tokens_per|throughput"
    r"|_at$|path|dir|out$|host|port|url|pid|version|latency|speed)",
    re.I,
)
SUFFIXES = (".json", ".jsonl", ".md", ".csv")


def clean(value: Any, roots: list[str]) -> Any:
    """``value`` without volatile keys, with the output roots and loopback ports written as X."""
    if isinstance(value, dict):
        return {clean(k, roots): clean(v, roots) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [clean(v, roots) for v in value]
    if isinstance(value, str):
        for root in roots:
            value = value.replace(root, "X")
        return re.sub(r"127\.0\.0\.1:\d+", "X", value)
    return value


def same(a: Path, b: Path, roots: list[str]) -> bool:
    if a.suffix == ".json":
        return bool(clean(json.loads(a.read_text()), roots) == clean(json.loads(b.read_text()), roots))
    if a.suffix == ".jsonl":
        rows = [[json.loads(line) for line in f.read_text().splitlines() if line.strip()] for f in (a, b)]
        return bool(clean(rows[0], roots) == clean(rows[1], roots))
    texts = [re.sub(r"\d+(\.\d+)? ?(s|min|ms|seconds)\b", "T", clean(f.read_text(), roots)) for f in (a, b)]
    return texts[0] == texts[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--root", action="append", default=[], help="a path to write as X (repeatable)")
    args = parser.parse_args()
    roots = [str(args.old.resolve()), str(args.new.resolve()), *args.root]
    files = differ = 0
    for old in sorted(p for p in args.old.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        rel = old.relative_to(args.old)
        new = args.new / rel
        files += 1
        if not new.exists():
            print(f"missing in {args.new}: {rel}")
            differ += 1
        elif not same(old, new, roots):
            print(f"differs: {rel}")
            differ += 1
    for new in sorted(p for p in args.new.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        if not (args.old / new.relative_to(args.new)).exists():
            print(f"only in {args.new}: {new.relative_to(args.new)}")
    print(f"{files} files compared, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
