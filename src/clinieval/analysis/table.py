"""Long-format tables of per-item results that users bring: CSV, TSV or JSON Lines.

``clinieval analyze`` works on numbers people already have (scores from another harness,
clinician rankings from a spreadsheet), so the reader keeps every row's file and line for error
messages and turns cells into numbers only when a statistic asks for a column, naming the cell
that is not a number.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.datasets import json_objects, utf8_lines
from clinieval.errors import UserError

_TRUE = frozenset({"true", "yes", "correct"})
_FALSE = frozenset({"false", "no", "incorrect"})
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})

ATTRIBUTE_PREFIX = "meta."
"""Columns named ``meta.*`` describe the item (a patient id, a year, a category): they can be a
``--group`` or ``--cluster`` but are never a score by default, even when every cell is a number
(``clinieval export`` writes a sample's metadata this way, and a year is not a metric)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One row: its cells as read, and where it came from (``file:line``)."""

    where: str
    cells: dict[str, object]


@dataclass(frozen=True)
class LongTable:
    """Rows of one table, with the columns every row may have."""

    path: Path
    columns: tuple[str, ...]
    rows: tuple[Row, ...]

    def require(self, *columns: str) -> None:
        """A UserError naming every requested column the table lacks, and the ones it has."""
        absent = [c for c in columns if c not in self.columns]
        if absent:
            raise UserError(
                f"{self.path}: no column {', '.join(repr(c) for c in absent)}; "
                f"the columns are {', '.join(map(repr, self.columns))}"
            )

    def text(self, row: Row, column: str) -> str | None:
        """A cell as a label (item, model, group): ``None`` when empty or missing."""
        value = row.cells.get(column)
        if value is None:
            return None
        text = str(value).strip()
        return None if text.lower() in _MISSING else text

    def number(self, row: Row, column: str) -> float | None:
        """A cell as a number: ``None`` when empty/NA; true/false read as 1/0; anything else names
        the row and column."""
        value = row.cells.get(column)
        if value is None or isinstance(value, bool):
            return None if value is None else float(value)
        if isinstance(value, int | float):
            try:
                number = float(value)
            except OverflowError:  # a JSON integer with hundreds of digits
                number = math.inf
        else:
            text = str(value).strip().lower()
            if text in _MISSING:
                return None
            if text in _TRUE or text in _FALSE:
                return 1.0 if text in _TRUE else 0.0
            try:
                number = float(text)
            except ValueError:
                raise UserError(f"{row.where}: column {column!r} is {value!r}, not a number") from None
        if not math.isfinite(number):
            raise UserError(f"{row.where}: column {column!r} is {value!r}; leave the cell empty if missing")
        return number

    def is_numeric(self, column: str) -> bool:
        """Whether every non-empty cell of ``column`` reads as a number (and at least one does)."""
        seen = False
        for row in self.rows:
            try:
                value = self.number(row, column)
            except UserError:
                return False
            seen |= value is not None
        return seen


def read_table(path: Path) -> LongTable:
    """Read ``.csv``, ``.tsv`` or ``.jsonl``/``.json`` (one object per line) into a LongTable."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        rows = list(_delimited(path, "\t" if suffix == ".tsv" else ","))
    elif suffix in (".jsonl", ".json", ".ndjson"):
        rows = list(_json_lines(path))
    else:
        raise UserError(f"{path}: expected a .csv, .tsv or .jsonl file, not {suffix or 'no extension'}")
    if not rows:
        raise UserError(f"{path}: no rows")
    columns = tuple(dict.fromkeys(c for r in rows for c in r.cells))
    return LongTable(path, columns, tuple(rows))


def _delimited(path: Path, delimiter: str) -> Iterator[Row]:
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        reader = csv.reader(utf8_lines(f, path), delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            return
        names = [h.strip() for h in header]
        _check_header(path, names)
        for record in reader:
            where = f"{path}:{reader.line_num}"
            if not any(cell.strip() for cell in record):
                continue
            if len(record) != len(names):
                raise UserError(f"{where}: {len(record)} cells but the header has {len(names)} columns")
            yield Row(where, dict(zip(names, record, strict=True)))


def _check_header(path: Path, names: Sequence[str]) -> None:
    if any(not n for n in names):
        raise UserError(f"{path}:1: the header has an empty column name")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"{path}:1: column(s) {', '.join(map(repr, dup))} appear twice in the header")


def _json_lines(path: Path) -> Iterator[Row]:
    for where, item in json_objects(path):
        yield Row(where, {str(k): v for k, v in item.items()})
