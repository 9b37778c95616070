"""CSV tables that remember line numbers, atomic CSV writing, and where outputs go beside inputs.

Every file the build reads (instructions, the filled review, its key) is a hand-edited CSV, so every
problem in one must be reported as ``file:line:column``: this module is the one reader that keeps
those positions (and accepts Excel's byte-order mark), shared by :mod:`.instructions` and
:mod:`.review`. The writers of :mod:`.dedupe` and :mod:`.review` write with
:func:`clinieval.fsutil.atomic_write_csv`.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.errors import UserError, shown

__all__ = ["CsvRow", "CsvTable", "read_table", "refuse_overwrite", "sibling_path"]


@dataclass(frozen=True, slots=True)
class CsvRow:
    line: int  # the file line the record starts on (the header is line 1)
    cells: dict[str, str]


@dataclass(frozen=True, slots=True)
class CsvTable:
    path: Path
    header: tuple[str, ...]
    rows: list[CsvRow]

    def at(self, row: CsvRow, column: str) -> str:
        """``file:line:column`` for a cell, so an error message points at what to fix."""
        return f"{self.path}:{row.line}:{self.header.index(column) + 1} (column {column!r})"


def read_table(path: Path, required: Sequence[str], what: str) -> CsvTable:
    """A CSV file as rows of named cells; every problem is a UserError naming file and line."""
    if not path.is_file():
        state = "is not a file" if path.exists() else "not found"
        raise UserError(f"{what} file {path} {state}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return _parse_table(path, csv.reader(f), required, what)
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 CSV"
        ) from None


def _next_record(path: Path, reader: Any) -> list[str] | None:
    try:
        record: list[str] = next(reader)
    except StopIteration:
        return None
    except csv.Error as e:
        raise UserError(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None
    return record


def _parse_table(path: Path, reader: Any, required: Sequence[str], what: str) -> CsvTable:
    first = _next_record(path, reader)
    if first is None or not any(c.strip() for c in first):
        raise UserError(f"{path} is empty: the {what} CSV starts with a header naming {', '.join(required)}")
    header = tuple(c.strip() for c in first)
    repeated = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if repeated:
        raise UserError(f"{path}:1: column(s) {', '.join(map(repr, repeated))} appear more than once")
    missing = [c for c in required if c not in header]
    if missing:
        raise UserError(
            f"{path}: no column {', '.join(map(repr, missing))} (the {what} CSV needs "
            f"{', '.join(required)}); its header is: {', '.join(map(shown, header))}"
        )
    rows: list[CsvRow] = []
    while True:
        start = reader.line_num + 1
        record = _next_record(path, reader)
        if record is None:
            return CsvTable(path, header, rows)
        if not any(c.strip() for c in record):
            continue  # blank lines and Excel's all-empty rows
        if len(record) != len(header):
            raise UserError(f"{path}:{start}: {len(record)} fields, but the header has {len(header)}")
        rows.append(CsvRow(start, dict(zip(header, record, strict=True))))


def sibling_path(out: Path, tag: str) -> Path:
    """Where a companion output goes: ``kept.csv`` with tag ``removed`` → ``kept.removed.csv``."""
    stem = out.stem if out.suffix.lower() == ".csv" else out.name
    return out.with_name(f"{stem}.{tag}.csv")


def refuse_overwrite(source: Path, *outputs: Path) -> None:
    """A UserError when one of ``outputs`` is the ``source`` file it would be computed from."""
    for out in outputs:
        if out.exists() and out.resolve() == source.resolve():
            raise UserError(f"{out} is the input file; write the output somewhere else")
