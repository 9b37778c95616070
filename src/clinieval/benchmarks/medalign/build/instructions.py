"""The clinician instructions a MedAlign-style dataset is built from, read from their CSV.

Both build steps start from the same file (``instruction_id``, ``question``, optionally
``patient_characteristics`` and ``clinical_context``; other columns are carried along untouched):
the dedupe writes its rows back as read, the matching turns each into a BM25 query. One reader
validates it once for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.medalign.build.tables import CsvTable, read_table
from clinieval.errors import UserError

__all__ = ["QUERY_COLUMNS", "Instruction", "read_instruction_table", "read_instructions"]

QUERY_COLUMNS = ("question", "patient_characteristics", "clinical_context")


@dataclass(frozen=True, slots=True)
class Instruction:
    """One clinician instruction, with the optional context MedAlign's matching query adds.

    ``row`` keeps every cell of the source CSV row so a filtered file can be written back as is.
    """

    instruction_id: str
    question: str
    patient_characteristics: str = ""
    clinical_context: str = ""
    line: int = 0
    row: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def query(self) -> str:
        """The BM25 query: instruction, patient characteristics and clinical context."""
        parts = (self.question, self.patient_characteristics, self.clinical_context)
        return "\n".join(p for p in parts if p.strip())


def read_instruction_table(path: Path) -> tuple[CsvTable, list[Instruction]]:
    table = read_table(path, ("instruction_id", "question"), "instructions")
    seen: dict[str, int] = {}
    out: list[Instruction] = []
    for row in table.rows:
        iid = row.cells["instruction_id"].strip()
        if not iid:
            raise UserError(f"{table.at(row, 'instruction_id')}: empty instruction_id")
        if iid in seen:
            raise UserError(
                f"{table.at(row, 'instruction_id')}: instruction_id {iid!r} repeats line {seen[iid]}"
            )
        seen[iid] = row.line
        question = row.cells["question"].strip()
        if not question:
            raise UserError(f"{table.at(row, 'question')}: empty question for instruction {iid!r}")
        characteristics = row.cells.get("patient_characteristics", "").strip()
        context = row.cells.get("clinical_context", "").strip()
        out.append(Instruction(iid, question, characteristics, context, line=row.line, row=row.cells))
    if not out:
        raise UserError(f"{path}: no instructions below the header")
    return table, out


def read_instructions(path: str | Path) -> list[Instruction]:
    """The instructions of a CSV (``instruction_id``, ``question``, optional
    ``patient_characteristics`` and ``clinical_context``), in file order.

    A missing file or column, an empty id or question, or a repeated id is a UserError naming the
    file and line (and the header the file has, for a missing column).
    """
    return read_instruction_table(Path(path))[1]
