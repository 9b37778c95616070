"""EHRNoteQA discharge-note preprocessing, as the benchmark's public code does it.

Per patient: discharge notes sorted by ``charttime``, the first three kept, whitespace normalised,
each prefixed with patient, admission and chart date, and wrapped in ``[note i start]`` /
``[note i end]`` markers joined by a blank line. Patients are levelled by the total token length
of their notes: level 1 up to 3,500 tokens, level 2 up to 7,500, longer ones excluded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_NOTES = 3
LEVEL_1_MAX_TOKENS = 3_500
LEVEL_2_MAX_TOKENS = 7_500

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
