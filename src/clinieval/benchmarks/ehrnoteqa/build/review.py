"""``review.csv``: the clinician review file, as generation writes it and as the import reads it back.

Generation lists every parsed item with empty reviewer columns (:data:`REVIEW_COLUMNS`); the
reviewers fill ``keep`` and the ``revised_*`` columns in a spreadsheet, and :func:`read_review`
reads the file back, so that every error names the file, the spreadsheet row and the line.
Applying what the reviewers wrote is :mod:`.importing`'s work.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.datasets import CsvRow, read_csv_rows
from clinieval.errors import shown
from clinieval.fsutil import atomic_write_csv, spreadsheet_text

__all__ = [
    "REVIEWER_COLUMNS",
    "REVIEW_COLUMNS",
    "REVIEW_FILE",
    "Review",
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
class Review:
    """The review file read back: its header and its non-empty rows."""

    path: Path
    header: tuple[str, ...]
    rows: list[CsvRow]

    def at(self, row: CsvRow, column: str) -> str:
        """Where a cell is, in words a spreadsheet user and a text-editor user can both follow."""
        return f"{self.path}: row {row.number} (line {row.line}), column {column!r}"


def read_review(path: Path) -> Review:
    """The review CSV's rows (cells spreadsheet-unescaped); a missing file or column, a repeated
    column or a row with the wrong number of cells is a UserError naming the file and row."""
    header, rows = read_csv_rows(path, "review", _REQUIRED_REVIEW, _ReviewMessages(), spreadsheet_text)
    return Review(path, header, rows)


class _ReviewMessages:
    """The review file's faults, by spreadsheet row (reviewers edit it in a spreadsheet)."""

    def unreadable(self, path: Path, line: int, in_header: bool, error: csv.Error) -> str:
        if in_header:
            return f"{path}: not readable as CSV ({error})"
        return f"{path}: line {line}: not readable as CSV ({error})"

    def empty(self, path: Path) -> str:
        return f"{path} is empty: expected the review.csv written by `ehrnoteqa build generate`"

    def repeated(self, path: Path, columns: Sequence[str]) -> str:
        return f"{path}: row 1 (the header): column(s) {', '.join(map(repr, columns))} appear twice"

    def missing(self, path: Path, columns: Sequence[str], header: tuple[str, ...]) -> str:
        return (
            f"{path}: row 1 (the header) has no column {', '.join(map(repr, columns))}; a review file "
            f"has the columns {', '.join(REVIEW_COLUMNS)} (its header is: {', '.join(map(shown, header))})"
        )

    def width(self, path: Path, number: int, line: int, cells: int, header: int) -> str:
        return f"{path}: row {number} (line {line}) has {cells} cells, but the header has {header}"
