"""``review.csv``: the clinician review file, as generation writes it and as the import reads it back.

Generation lists every parsed item with empty reviewer columns (:data:`REVIEW_COLUMNS`); the
reviewers fill ``keep`` and the ``revised_*`` columns in a spreadsheet, and :func:`read_review`
reads the file back, so that every error names the file, the spreadsheet row and the line.
Applying what the reviewers wrote is :mod:`.importing`'s work.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.errors import UserError, shown
from clinieval.fsutil import atomic_write_csv, spreadsheet_text

__all__ = [
    "REVIEWER_COLUMNS",
    "REVIEW_COLUMNS",
    "REVIEW_FILE",
    "Review",
    "ReviewRow",
    "read_review",
    "review_has_input",
    "write_review",
]

REVIEW_FILE = "review.csv"

REVIEWER_COLUMNS: tuple[str, ...] = (
    "keep",
    "revised_question",
    *(f"revised_choice_{x}" for x in OPTION_LETTERS),
    "revised_answer",
    "reviewer_note",
    "category",
)
"""The columns reviewers fill (``category`` is optional: one of the paper's question types)."""

REVIEW_COLUMNS: tuple[str, ...] = (
    "item_id",
    "patient_id",
    "num_notes",
    "chart_dates",
    "admission_ids",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
    "reason",
    "failed_checks",
    *REVIEWER_COLUMNS,
)
"""``review.csv``: what was generated, then the empty reviewer columns."""


def review_has_input(path: Path) -> bool:
    """Whether ``review.csv`` already holds reviewers' work (or cannot be read to tell)."""
    if not path.exists():
        return False
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return any(any((row.get(c) or "").strip() for c in REVIEWER_COLUMNS) for row in csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return True


def write_review(path: Path, rows: Iterable[Mapping[str, object]]) -> None:
    """``review.csv`` with one row per parsed item (:data:`REVIEW_COLUMNS`), written atomically."""
    atomic_write_csv(path, REVIEW_COLUMNS, rows, spreadsheet_safe=True)


_REQUIRED_REVIEW = (
    "item_id",
    "patient_id",
    "num_notes",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
    "keep",
    "revised_question",
    *(f"revised_choice_{x}" for x in OPTION_LETTERS),
    "revised_answer",
)


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One non-empty record of the review file and where it is."""

    number: int  # the spreadsheet row (the header is row 1)
    line: int  # the file line the record starts on
    cells: dict[str, str]


@dataclass(frozen=True, slots=True)
class Review:
    """The review file read back: its header and its non-empty rows."""

    path: Path
    header: tuple[str, ...]
    rows: list[ReviewRow]

    def at(self, row: ReviewRow, column: str) -> str:
        """Where a cell is, in words a spreadsheet user and a text-editor user can both follow."""
        return f"{self.path}: row {row.number} (line {row.line}), column {column!r}"


def read_review(path: Path) -> Review:
    """The review CSV's rows; a missing file or column, a repeated column or a row with the
    wrong number of cells is a UserError naming the file and row."""
    if not path.is_file():
        raise UserError(f"review file {path} {'is not a file' if path.exists() else 'not found'}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return _parse_review(path, csv.reader(f))
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 CSV"
        ) from None
    except csv.Error as e:
        raise UserError(f"{path}: not readable as CSV ({e})") from None


def _parse_review(path: Path, reader: Any) -> Review:
    header_cells: list[str] | None = next(reader, None)
    if header_cells is None or not any(c.strip() for c in header_cells):
        raise UserError(f"{path} is empty: expected the review.csv written by `ehrnoteqa build generate`")
    header = tuple(c.strip() for c in header_cells)
    repeated = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if repeated:
        raise UserError(
            f"{path}: row 1 (the header): column(s) {', '.join(map(repr, repeated))} appear twice"
        )
    missing = [c for c in _REQUIRED_REVIEW if c not in header]
    if missing:
        raise UserError(
            f"{path}: row 1 (the header) has no column {', '.join(map(repr, missing))}; a review file "
            f"has the columns {', '.join(REVIEW_COLUMNS)} (its header is: {', '.join(map(shown, header))})"
        )
    rows: list[ReviewRow] = []
    number = 1
    while True:
        line = reader.line_num + 1
        try:
            record: list[str] | None = next(reader, None)
        except csv.Error as e:
            raise UserError(f"{path}: line {reader.line_num}: not readable as CSV ({e})") from None
        if record is None:
            return Review(path, header, rows)
        number += 1
        if not any(c.strip() for c in record):
            continue  # blank lines and a spreadsheet's all-empty rows
        if len(record) != len(header):
            raise UserError(
                f"{path}: row {number} (line {line}) has {len(record)} cells, "
                f"but the header has {len(header)}"
            )
        cells = (spreadsheet_text(c) for c in record)
        rows.append(ReviewRow(number, line, dict(zip(header, cells, strict=True))))
