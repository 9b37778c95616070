"""Step (d): physicians verify the teacher's evaluations in a spreadsheet, and their verdicts come back.

The paper's physicians checked each evaluation for knowledge correctness, correct attribution and
fluency, and discarded the invalid ones (305 of 9,874). :func:`export_review` writes a CSV with
one row per instance with a parsed evaluation (an unparsed one can never be an SFT example, so it
is not worth a physician's time): the question, the reference, the responses numbered as the
teacher saw them, the evaluation and its scores, and three columns to fill: ``keep`` (yes/no),
``reasons`` (free text, several separated by ``;``) and ``physician``. Every cell is made
spreadsheet-safe (text starting with ``= + - @`` gets a leading apostrophe, removed on import),
because the responses are model-written text a spreadsheet would otherwise run as a formula.

:func:`import_review` reads the file back: a row with an empty ``keep`` is not yet reviewed (not
an error, so a review can come back in parts); an unknown id, a repeated id or a ``keep`` that is
not yes/no is one error naming the file, the line and the column.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.build.instances import Instance, Verification, write_instances
from clinieval.datasets import utf8_lines
from clinieval.errors import UserError, shown
from clinieval.fsutil import atomic_write_csv, atomic_write_json, spreadsheet_text

REVIEWER_COLUMNS = ("keep", "reasons", "physician")
REVIEW_COLUMNS = (
    "id",
    "question",
    "reference",
    "responses",
    "evaluation",
    "teacher_scores",
    *REVIEWER_COLUMNS,
)
DISCARDED_FILE = "discarded.jsonl"
SUMMARY_FILE = "review-summary.json"

_YES = frozenset({"yes", "y"})
_NO = frozenset({"no", "n"})


def responses_cell(instance: Instance) -> str:
    """The responses numbered as the teacher saw them (Doctor 1..k), so a physician can follow
    the evaluation's references; the model names in brackets."""
    return "\n\n".join(f"Doctor {i} [{a.model}]: {a.text}" for i, a in enumerate(instance.responses, 1))


def _review_row(x: Instance) -> dict[str, object]:
    assert x.evaluation is not None and x.evaluation.scores is not None
    v = x.verification
    return {
        "id": x.id,
        "question": x.question,
        "reference": x.reference,
        "responses": responses_cell(x),
        "evaluation": x.evaluation.text,
        "teacher_scores": ", ".join(map(str, x.evaluation.scores)),
        "keep": "" if v is None else ("yes" if v.keep else "no"),
        "reasons": "" if v is None else "; ".join(v.reasons),
        "physician": "" if v is None else v.physician,
    }


def review_has_input(path: Path) -> bool:
    """Whether a review file at ``path`` already holds physicians' work (or cannot be read to
    tell): exporting over it would lose verdicts not yet imported."""
    if not path.exists():
        return False
    try:
        return any(
            any(row.cells.get(c, "").strip() for c in REVIEWER_COLUMNS) for row in read_review_rows(path)
        )
    except UserError:
        return True


def export_review(instances: Sequence[Instance], out: Path) -> tuple[int, int]:
    """Write the review CSV (atomically); (rows written, instances left out as unparsed or not
    evaluated). A verdict already on an instance is written into its row, so re-exporting a
    partly reviewed file loses nothing."""
    rows = [_review_row(x) for x in instances if x.scored]
    if not rows:
        raise UserError("no instance has a parsed evaluation to review; run `automedeval build teach` first")
    atomic_write_csv(out, REVIEW_COLUMNS, rows, spreadsheet_safe=True)
    return len(rows), len(instances) - len(rows)


# --- import ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReviewRow:
    """One non-empty row of the review file, where it starts, and its cells (spreadsheet-unescaped)."""

    line: int
    cells: dict[str, str]


def read_review_rows(path: Path) -> Iterator[ReviewRow]:
    """The review CSV's non-empty rows; a missing column or a row of the wrong width names it."""
    if not path.is_file():
        raise UserError(f"{path}: review file not found")
    with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        reader = csv.reader(utf8_lines(f, path))
        try:
            header = [c.strip() for c in next(reader, [])]
            missing = [c for c in ("id", *REVIEWER_COLUMNS) if c not in header]
            if missing:
                raise UserError(
                    f"{path}:1: the header has no column {', '.join(map(repr, missing))}; expected the file "
                    "written by `automedeval build export` "
                    f"(its header is: {', '.join(map(shown, header))})"
                )
            while True:
                line = reader.line_num + 1
                record = next(reader, None)
                if record is None:
                    return
                if not any(c.strip() for c in record):
                    continue
                if len(record) != len(header):
                    raise UserError(f"{path}:{line}: {len(record)} cells, but the header has {len(header)}")
                yield ReviewRow(line, {h: spreadsheet_text(c) for h, c in zip(header, record, strict=True)})
        except csv.Error as e:
            raise UserError(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None


def split_reasons(cell: str) -> tuple[str, ...]:
    """Reasons as written, separated by ``;`` (blank ones dropped, spaces collapsed)."""
    return tuple(r for r in (" ".join(part.split()) for part in cell.split(";")) if r)


def _keep(cell: str, where: str) -> bool | None:
    text = cell.strip().lower()
    if not text:
        return None
    if text in _YES or text in _NO:
        return text in _YES
    raise UserError(
        f"{where}: column 'keep' is {cell.strip()[:30]!r}; expected yes or no "
        "(or leave it empty while the evaluation is not yet reviewed)"
    )


@dataclass
class Imported:
    """The instances with the physicians' verdicts applied, split by verdict."""

    kept: list[Instance] = field(default_factory=list)
    discarded: list[Instance] = field(default_factory=list)
    unreviewed: list[str] = field(default_factory=list)
    not_exportable: list[str] = field(default_factory=list)

    def summary(self, instances: int) -> dict[str, Any]:
        def reasons(xs: list[Instance]) -> dict[str, int]:
            return dict(
                Counter(r for x in xs if x.verification for r in x.verification.reasons).most_common()
            )

        reviewed = len(self.kept) + len(self.discarded)
        return {
            "instances": instances,
            "reviewed": reviewed,
            "kept": len(self.kept),
            "discarded": len(self.discarded),
            "discarded_rate": len(self.discarded) / reviewed if reviewed else None,
            "not_yet_reviewed": len(self.unreviewed),
            "not_yet_reviewed_ids": self.unreviewed,
            "without_parsed_evaluation": len(self.not_exportable),
            "discard_reasons": reasons(self.discarded),
            "keep_reasons": reasons(self.kept),
            "physicians": dict(
                Counter(x.verification.physician for x in [*self.kept, *self.discarded] if x.verification)
            ),
            "paper": {"verified": 9874, "discarded": 305},
        }


def read_verdicts(instances: Sequence[Instance], review: Path) -> dict[str, Verification]:
    """Each reviewed row's verdict by instance id; empty ``keep`` rows are left out."""
    known = {x.id for x in instances}
    first: dict[str, int] = {}
    out: dict[str, Verification] = {}
    for row in read_review_rows(review):
        where = f"{review}:{row.line}"
        item_id = row.cells["id"].strip()
        if item_id not in known:
            raise UserError(f"{where}: column 'id': {item_id!r} is not an instance of the instances file")
        if item_id in first:
            raise UserError(f"{where}: column 'id': {item_id!r} repeats line {first[item_id]}")
        first[item_id] = row.line
        keep = _keep(row.cells["keep"], where)
        if keep is not None:
            out[item_id] = Verification(
                keep, split_reasons(row.cells["reasons"]), row.cells["physician"].strip()
            )
    return out


def import_review(instances: Sequence[Instance], review: Path, out: Path) -> tuple[Imported, dict[str, Any]]:
    """Apply the verdicts: kept instances to ``out``, discarded ones to ``discarded.jsonl`` and the
    counts to ``review-summary.json`` beside it (all atomic). An instance without a verdict is
    in neither file and counted as not yet reviewed."""
    verdicts = read_verdicts(instances, review)
    done = Imported()
    for x in instances:
        verdict = verdicts.get(x.id)
        if verdict is None:
            (done.unreviewed if x.scored else done.not_exportable).append(x.id)
        else:
            (done.kept if verdict.keep else done.discarded).append(replace(x, verification=verdict))
    summary = done.summary(len(instances))
    write_instances(out, done.kept)
    write_instances(out.parent / DISCARDED_FILE, done.discarded)
    atomic_write_json(out.parent / SUMMARY_FILE, summary)
    return done, summary
