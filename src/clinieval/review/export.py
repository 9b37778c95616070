"""``clinieval review export``: a study's submitted reviews as files the analyzers read.

The folder holds ``responses.jsonl`` (every submitted review in full, with the order the answers
were shown in and model names restored), one long CSV for the study's kind, and ``study.json``
(what was exported, when). The CSVs are shaped for ``clinieval analyze``: one row per item, model
and reviewer with the model in ``model`` and the reviewer in ``reviewer``, so

    clinieval analyze ranks.csv --human-rank rank --correct correct --rater reviewer
    clinieval analyze ratings.csv --human-score mean --rater reviewer

work as they are. Two more files carry the same numbers in the shapes other commands take: for a
rank study ``reviews.csv`` (``instruction_id, model, rank, correct, rater``: ``clinieval medalign
analyze --reviews``), for a rate study ``clinicians.csv`` (``model, clinician, score``, each
reviewer's mean score per model: ``clinieval correlate --clinicians``).

Nothing here reads the users table beyond names: no password hash, no session. The folder is
written beside its destination and moved into place whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine
from sqlalchemy.orm import selectinload

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv, atomic_write_json, atomic_write_jsonl, staged_dir
from clinieval.review import store
from clinieval.review.db import Assignment, Item, User, read_session, utcnow
from clinieval.review.study_kinds import get_kind

FORMAT: Final = "clinieval-review-export/1"


@dataclass(frozen=True, slots=True)
class ExportResult:
    out: Path
    responses: int
    table: str
    rows: int
    extra: tuple[str, ...] = ()


def _check_target(out: Path) -> None:
    """Refuse to replace a folder that is not an earlier export: the export replaces ``out``
    whole, and a mistyped path must not take someone's folder with it."""
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"{out} is a file; give a folder for the export")
    marker = out / "study.json"
    if any(out.iterdir()) and not (marker.is_file() and FORMAT in marker.read_text(encoding="utf-8")):
        raise UserError(f"{out} is not empty and not an earlier review export; choose a new or empty folder")


def _by_source(payload: dict[str, Any], sources: Mapping[str, str]) -> dict[str, Any]:
    """A payload with its answer keys replaced by the models they came from."""
    if "answers" not in payload:
        return payload
    return {**payload, "answers": {sources[k]: v for k, v in payload["answers"].items()}}


def submitted_rows(engine: Engine, study: str) -> list[dict[str, Any]]:
    """One row per submitted assignment (item order, then reviewer): item key,
    reviewer name, the answers in the order shown (keys and models), the payload with answer keys
    mapped back to models, version, submitted time, and the item's ``meta``. No password hash and
    no session data exist in these rows."""
    with read_session(engine) as s:
        row = store.get_study(s, study)
        answers = selectinload(Assignment.item).selectinload(Item.answers)
        assignments = s.execute(store.submitted_reviews(row, Assignment, User.name).options(answers)).all()
        out: list[dict[str, Any]] = []
        for a, reviewer in assignments:
            sources = {ans.key: ans.source for ans in a.item.answers}
            out.append(
                {
                    "item": a.item.key,
                    "reviewer": reviewer,
                    "answer_order": list(a.answer_order),
                    "models_shown": [sources[k] for k in a.answer_order],
                    "payload": _by_source(a.payload or {}, sources),
                    "version": a.version,
                    "submitted_at": a.updated_at.isoformat(),
                    "meta": a.item.meta,
                }
            )
    return out


def export_study(engine: Engine, study: str, out: Path) -> ExportResult:
    """Write ``responses.jsonl``, the kind's table and ``study.json`` into ``out`` (replacing an
    earlier export there, all at once)."""
    with read_session(engine) as s:
        row = store.get_study(s, study)
        kind, config = get_kind(row.kind), dict(row.config)
    _check_target(out)
    rows = submitted_rows(engine, study)
    columns, table = kind.export_table(rows, config)
    name = kind.table
    with staged_dir(out, "the export folder") as tmp:
        atomic_write_jsonl(tmp / "responses.jsonl", rows)
        # reviewers' rationales and models' text go to spreadsheets: formula-like cells are made inert
        atomic_write_csv(tmp / name, columns, table, spreadsheet_safe=True)
        extra = kind.extra
        if extra is not None:
            extra_columns, extra_rows = extra.build(table)
            atomic_write_csv(tmp / extra.file, extra_columns, extra_rows, spreadsheet_safe=True)
        atomic_write_json(
            tmp / "study.json",
            {
                "format": FORMAT,
                "study": study,
                "kind": kind.name,
                "config": config,
                "exported_at": utcnow().isoformat(),
                "responses": len(rows),
                "files": {
                    "responses": "responses.jsonl",
                    "table": name,
                    "extra": extra.file if extra else None,
                },
            },
        )
    return ExportResult(out, len(rows), name, len(table), (extra.file,) if extra else ())
