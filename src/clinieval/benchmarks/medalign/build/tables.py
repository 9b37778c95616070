"""CSV tables that remember line numbers, atomic CSV writing, and where outputs go beside inputs.

Every file the build reads (instructions, the filled review, its key) is a hand-edited CSV, so every
problem in one must be reported as ``file:line:column``: this module words those positions for
:mod:`.instructions` and :mod:`.review`, over :func:`clinieval.datasets.read_csv_rows` (the reader,
shared with EHRNoteQA's review file, that keeps them and accepts Excel's byte-order mark). The
writers of :mod:`.dedupe` and :mod:`.review` write with :func:`clinieval.fsutil.atomic_write_csv`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.datasets import CsvRow, read_csv_rows
from clinieval.errors import UserError, shown

__all__ = ["CsvRow", "CsvTable", "read_table", "refuse_overwrite", "sibling_path"]


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
    header, rows = read_csv_rows(path, what, required, _TableMessages(what, tuple(required)))
    return CsvTable(path, header, rows)


@dataclass(frozen=True, slots=True)
class _TableMessages:
    """A build table's faults, as ``file:line``."""

    what: str
    required: tuple[str, ...]

    def unreadable(self, path: Path, line: int, in_header: bool, error: csv.Error) -> str:
        return f"{path}:{line}: not readable as CSV ({error})"

    def empty(self, path: Path) -> str:
        return f"{path} is empty: the {self.what} CSV starts with a header naming {', '.join(self.required)}"

    def repeated(self, path: Path, columns: Sequence[str]) -> str:
        return f"{path}:1: column(s) {', '.join(map(repr, columns))} appear more than once"

    def missing(self, path: Path, columns: Sequence[str], header: tuple[str, ...]) -> str:
        return (
            f"{path}: no column {', '.join(map(repr, columns))} (the {self.what} CSV needs "
            f"{', '.join(self.required)}); its header is: {', '.join(map(shown, header))}"
        )

    def width(self, path: Path, number: int, line: int, cells: int, header: int) -> str:
        return f"{path}:{line}: {cells} fields, but the header has {header}"


def sibling_path(out: Path, tag: str) -> Path:
    """Where a companion output goes: ``kept.csv`` with tag ``removed`` → ``kept.removed.csv``."""
    stem = out.stem if out.suffix.lower() == ".csv" else out.name
    return out.with_name(f"{stem}.{tag}.csv")


def refuse_overwrite(source: Path, *outputs: Path) -> None:
    """A UserError when one of ``outputs`` is the ``source`` file it would be computed from."""
    for out in outputs:
        if out.exists() and out.resolve() == source.resolve():
            raise UserError(f"{out} is the input file; write the output somewhere else")
