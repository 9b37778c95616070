"""Compare what ``duplicates --repo src`` lists with the pairs docs/duplicates.md has read and kept.

Why: ``duplicates`` (the team's tool library, not part of this repository) lists every pair of
places in ``src/`` that share six or more lines by shape. Most of what it lists here is a shape
and not a copy: two dataclasses with four fields, two keyword calls, two migrations written to stay
frozen. The tool has no way to mark such a pair, so docs/duplicates.md is the mark: each pair a
person has read and decided to keep, by its two files and why. This script runs the tool and
sorts its rows into three kinds:

- **unmarked**: a pair no one has read yet; fold it if it is a copy, or add it to the ledger
  with its reason;
- **marked**: a pair the ledger keeps;
- **gone**: a ledger entry the tool no longer lists; delete it from the ledger.

An unmarked pair or a gone entry makes the exit status 1: the ledger is a list of what the tool
lists now, not of what it once did.

Pairs the tool itself marks boilerplate are left out, as the ledger's count is of the others.
Line numbers move with every edit, so a pair is known by its two files; where the tool lists two
pairs between the same files, one ledger row covers both. Standard library only::

    python3 tools/duplicates_ledger.py             # run duplicates, compare, exit 1 on a difference
    python3 tools/duplicates_ledger.py --rows F    # compare a saved `duplicates --most 200` output
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "docs" / "duplicates.md"
CLASSES = ("data table", "schema", "dataclass", "keywords", "benchmark declaration", "imports", "markup")
"""The kinds of shape the ledger keeps; docs/duplicates.md says why each is kept."""

_ROW = re.compile(r"^D\d+ (?P<a>\S+?):\d+-\d+ ~ (?P<b>\S+?):\d+-\d+(?P<rest>.*)$")
_ENTRY = re.compile(r"^\| `(?P<a>[^`]+)` \| `(?P<b>[^`]+)` \| (?P<kind>[^|]+?) \|")

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Sorted:
    """The tool's rows against the ledger."""

    unmarked: list[Pair]
    marked: list[Pair]
    gone: list[Pair]


def pair(a: str, b: str) -> Pair:
    """Two files in a fixed order, so ``a ~ b`` and ``b ~ a`` are one pair."""
    return (a, b) if a <= b else (b, a)


def listed_pairs(rows: Iterable[str]) -> list[Pair]:
    """The pairs of ``duplicates`` rows that the tool does not mark boilerplate, each once."""
    found: dict[Pair, None] = {}
    for row in rows:
        m = _ROW.match(row.strip())
        if m and "boilerplate" not in m["rest"]:
            found[pair(m["a"], m["b"])] = None
    return list(found)


def ledger_pairs(text: str, where: str = "docs/duplicates.md") -> dict[Pair, str]:
    """The ledger's table rows ``| `a` | `b` | kind | why |``, by pair; a row of an unknown kind,
    or a pair given twice, is an error naming its line."""
    out: dict[Pair, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = _ENTRY.match(line)
        if not m:
            continue
        kind = m["kind"].strip()
        if kind not in CLASSES:
            raise ValueError(f"{where}:{n}: kind {kind!r} is not one of: {', '.join(CLASSES)}")
        key = pair(m["a"], m["b"])
        if key in out:
            raise ValueError(f"{where}:{n}: the pair {key[0]} ~ {key[1]} is listed twice")
        out[key] = kind
    return out


def compare(listed: Iterable[Pair], kept: dict[Pair, str]) -> Sorted:
    listed = list(listed)
    return Sorted(
        unmarked=[p for p in listed if p not in kept],
        marked=[p for p in listed if p in kept],
        gone=[p for p in kept if p not in listed],
    )


def run_duplicates() -> list[str]:
    """The tool's rows over ``src`` (all of them: ``--most 200``)."""
    tool = shutil.which("duplicates")
    if tool is None:
        raise SystemExit(
            "duplicates is not on PATH (it comes with the team's tool library, not with this repository)"
        )
    done = subprocess.run(
        [tool, "--repo", "src", "--most", "200", "--seconds", "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = done.stdout.splitlines()
    incomplete = [r for r in rows if r.startswith("incomplete:")]
    if incomplete:
        raise SystemExit(f"duplicates did not finish: {incomplete[0]}")
    return rows


def report(result: Sorted) -> str:
    lines = [
        f"{len(result.marked) + len(result.unmarked)} pairs not marked boilerplate by the tool: "
        f"{len(result.marked)} kept in {LEDGER.relative_to(ROOT)}, {len(result.unmarked)} unmarked"
    ]
    lines += [
        f"unmarked: {a} ~ {b}  (fold it, or add it to the ledger with its reason)" for a, b in result.unmarked
    ]
    lines += [f"gone: {a} ~ {b}  (no longer listed: delete its ledger row)" for a, b in result.gone]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, help="a saved `duplicates --repo src --most 200` output")
    args = parser.parse_args(argv)
    rows = args.rows.read_text(encoding="utf-8").splitlines() if args.rows else run_duplicates()
    try:
        kept = ledger_pairs(LEDGER.read_text(encoding="utf-8"))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    result = compare(listed_pairs(rows), kept)
    print(report(result))
    return 1 if result.unmarked or result.gone else 0


if __name__ == "__main__":
    sys.exit(main())
