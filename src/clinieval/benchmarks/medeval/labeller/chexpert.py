"""The CheXpert labeler's file layout: a CSV of reports in, ``Reports`` + 14 columns out.

The input is a CSV whose first column holds the report text; other columns are ignored. The
labeler's own sample (``sample_reports.csv``) has no header, so a first row is taken as a header
only when its first cell is ``Reports``. The output is what the labeler writes
(``labeled_reports.csv``): the report as read, then 1.0 positive, 0.0 negative, -1.0 uncertain and
blank for not mentioned. Cells are written as they are, not made spreadsheet-safe: "-1.0" must stay
a number for every tool that reads CheXpert labels.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.items import CHEST, CHEXPERT_NUMBERS, CodeValue
from clinieval.benchmarks.medeval.labeller.pipeline import Labeller
from clinieval.datasets import utf8_lines
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv

REPORTS_COLUMN = "Reports"


def _records(path: Path, reader: Any) -> list[tuple[int, list[str]]]:
    """Every record with the line it starts on; a CSV error names its line."""
    records: list[tuple[int, list[str]]] = []
    while True:
        line = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            return records
        except csv.Error as e:
            raise UserError(f"{path}:{line}: not readable as CSV ({e}) in the row starting here") from None
        records.append((line, record))


def read_reports(path: Path) -> list[str]:
    """The report texts of a CSV (first column), or one UserError naming the file and line."""
    if not path.is_file():
        raise UserError(f"{path}: reports file {'is not a file' if path.exists() else 'not found'}")
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        records = _records(path, csv.reader(utf8_lines(f, path), strict=True))
    records = [(n, r) for n, r in records if r]  # blank lines are no reports
    if records and records[0][1][0].strip() == REPORTS_COLUMN:
        records = records[1:]
    if not records:
        raise UserError(f"{path}: no reports (expected one report per row, its text in the first column)")
    for line, record in records:
        if not record[0].strip():
            raise UserError(f"{path}:{line}: column 1 is empty; each row needs its report text there")
    return [record[0] for _, record in records]


def chexpert_row(report: str, labels: dict[str, CodeValue], codes: tuple[str, ...]) -> dict[str, str]:
    return {REPORTS_COLUMN: report, **{code: CHEXPERT_NUMBERS[labels[code]] for code in codes}}


def write_labels(
    out: Path, reports: list[str], labels: list[dict[str, CodeValue]], codes: tuple[str, ...]
) -> None:
    """The CheXpert layout, written atomically (a failed run leaves no half file)."""
    rows = (chexpert_row(r, lab, codes) for r, lab in zip(reports, labels, strict=True))
    atomic_write_csv(out, [REPORTS_COLUMN, *codes], rows)


def label_csv(reports: Path, out: Path, *, chexpert: Path | None = None) -> int:
    """Label the chest reports of ``reports`` with CheXpert's 14 observations and write them to
    ``out`` in the CheXpert labeler's layout; returns how many reports were labelled."""
    texts = read_reports(reports)
    labeller = Labeller(CHEST, chexpert=chexpert)
    write_labels(out, texts, labeller.label(texts), labeller.codes)
    return len(texts)
