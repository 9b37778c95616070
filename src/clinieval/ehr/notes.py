"""EHRNoteQA discharge-note preprocessing, as the benchmark's public code does it.

Per patient: discharge notes sorted by ``charttime``, the first three kept, whitespace normalised,
each prefixed with patient, admission and chart date, and wrapped in ``[note i start]`` /
``[note i end]`` markers joined by a blank line. Patients are levelled by the total token length
of their notes: level 1 up to 3,500 tokens, level 2 up to 7,500, longer ones excluded.
"""

from __future__ import annotations

import csv
import gzip
import re
import sys
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from clinieval.datasets import UNDECODABLE, not_utf8
from clinieval.errors import UserError

MAX_NOTES = 3
LEVEL_1_MAX_TOKENS = 3_500
LEVEL_2_MAX_TOKENS = 7_500

DISCHARGE_HEADER: tuple[str, ...] = (
    "note_id",
    "subject_id",
    "hadm_id",
    "note_type",
    "note_seq",
    "charttime",
    "storetime",
    "text",
)
"""The full header of MIMIC-IV-Note ``discharge.csv(.gz)`` (what a writer of such a file emits)."""

DISCHARGE_COLUMNS: tuple[str, ...] = ("subject_id", "hadm_id", "charttime", "text")
"""The columns of MIMIC-IV-Note ``discharge.csv(.gz)`` that EHRNoteQA reads (others are ignored)."""

_NEWLINE_SPACE = re.compile(r"(\n\s*|\s*\n)")
_MULTI_SPACE = re.compile(r"\s{2,}")


@dataclass(frozen=True, slots=True)
class DischargeNote:
    """One row of MIMIC-IV-Note ``discharge.csv.gz`` (the columns EHRNoteQA uses)."""

    subject_id: str
    hadm_id: str
    charttime: str
    text: str

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> DischargeNote:
        return cls(
            subject_id=str(row["subject_id"]),
            hadm_id=str(row["hadm_id"]),
            charttime=str(row["charttime"]),
            text=str(row["text"]),
        )


def normalize_whitespace(text: str) -> str:
    """Whitespace around newlines collapses to one newline, other runs of 2+ whitespace characters
    to one space, then the ends are stripped (EHRNoteQA's two regexes, in its order)."""
    text = _NEWLINE_SPACE.sub("\n", text)
    text = _MULTI_SPACE.sub(" ", text)
    return text.strip()


def note_header(note: DischargeNote) -> str:
    return (
        f"Patient ID : {note.subject_id}\nAdmission ID : {note.hadm_id}\nChartdate : {note.charttime[:10]}\n"
    )


def select_notes(notes: Iterable[DischargeNote], limit: int = MAX_NOTES) -> list[DischargeNote]:
    """The patient's notes in chart-time order, the first ``limit`` kept (stable for ties)."""
    return sorted(notes, key=lambda n: n.charttime)[:limit]


def format_note(note: DischargeNote) -> str:
    """A note as the model sees it: header, then the normalised text."""
    return note_header(note) + normalize_whitespace(note.text)


def format_notes(notes: Iterable[DischargeNote], limit: int = MAX_NOTES) -> str:
    """The ``{notes}`` block of the EHRNoteQA prompts."""
    parts = [
        f"[note {i} start]\n{format_note(note)}\n[note {i} end]"
        for i, note in enumerate(select_notes(notes, limit), start=1)
    ]
    return "\n\n".join(parts)


def level_for(total_tokens: int) -> int | None:
    """1 up to 3,500 tokens, 2 up to 7,500, None beyond (excluded from the benchmark)."""
    if total_tokens <= LEVEL_1_MAX_TOKENS:
        return 1
    if total_tokens <= LEVEL_2_MAX_TOKENS:
        return 2
    return None


def _open_text(path: Path) -> TextIO:
    # surrogateescape: bytes that are not UTF-8 are found in their row (a strict decoder fails a
    # whole chunk ahead of the row being read, so it could not say which line holds them)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline="")
    return path.open(encoding="utf-8", errors="surrogateescape", newline="")


def iter_discharge_notes(path: Path, subjects: Collection[str] | None = None) -> Iterator[DischargeNote]:
    """Stream the notes of ``discharge.csv`` or ``discharge.csv.gz``, only ``subjects``' if given.

    Streaming with a subject filter keeps memory at the notes wanted: the full MIMIC-IV-Note file
    holds about 330,000 summaries. A missing column or an unreadable row is one UserError naming
    the file and the line; a ``note_type`` other than ``DS`` (a radiology file given by mistake)
    is refused rather than read as discharge summaries.
    """
    if not path.is_file():
        raise UserError(f"{path}: discharge notes file not found (MIMIC-IV-Note discharge.csv or .csv.gz)")
    csv.field_size_limit(sys.maxsize)  # a discharge summary is one quoted multi-line field
    wanted = None if subjects is None else set(subjects)
    reader: csv.DictReader[str] | None = None
    try:
        with _open_text(path) as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            if any(UNDECODABLE.search(h) for h in header):
                raise not_utf8(path, reader.line_num)
            missing = [c for c in DISCHARGE_COLUMNS if c not in header]
            if missing:
                raise UserError(
                    f"{path}: missing column(s) {', '.join(missing)}; "
                    f"the header is {', '.join(map(repr, header)) or '(empty)'}"
                )
            for row in reader:
                kind = row.get("note_type")
                if any(v and UNDECODABLE.search(v) for v in (kind, row["subject_id"])):
                    raise not_utf8(path, reader.line_num)
                if kind not in (None, "", "DS"):
                    raise UserError(
                        f"{path}:{reader.line_num}: note_type {kind!r} is not a discharge summary (DS)"
                    )
                if wanted is not None and row["subject_id"] not in wanted:
                    continue
                if any(row[c] is None for c in DISCHARGE_COLUMNS):
                    raise UserError(f"{path}:{reader.line_num}: the row has fewer fields than the header")
                if any(UNDECODABLE.search(row[c]) for c in DISCHARGE_COLUMNS):
                    raise not_utf8(path, reader.line_num)
                yield DischargeNote.from_row(row)
    except (OSError, EOFError, zlib.error, csv.Error) as e:  # zlib.error: a corrupt .gz
        where = f"after line {reader.line_num}" if reader is not None and reader.line_num else "at line 1"
        raise UserError(f"{path}: cannot read the discharge notes {where} ({e})") from None


def read_discharge_notes(
    path: Path, subjects: Collection[str] | None = None
) -> dict[str, list[DischargeNote]]:
    """Each subject's notes from ``discharge.csv(.gz)``, in file order (select_notes sorts them)."""
    out: dict[str, list[DischargeNote]] = {}
    for note in iter_discharge_notes(path, subjects):
        out.setdefault(note.subject_id, []).append(note)
    return out
