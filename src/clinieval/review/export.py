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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv, atomic_write_json, atomic_write_jsonl, staged_dir
from clinieval.review import store
from clinieval.review.db import read_session, utcnow

FORMAT: Final = "clinieval-review-export/1"
TABLES: Final = {
    "rank": "ranks.csv",
    "rate": "ratings.csv",
    "question": "questions.csv",
    "sentence": "sentences.csv",
}
Row = dict[str, Any]


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


def _cell(value: object) -> object:
    """A CSV cell: text as is, booleans as true/false (``clinieval analyze`` reads them as 1/0),
    other structures as JSON."""
    if value is None or (isinstance(value, str | int | float) and not isinstance(value, bool)):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def _rank_rows(rows: Sequence[Row]) -> tuple[list[str], list[Row]]:
    columns = ["item", "reviewer", "model", "rank", "correct", "reasons", "rationale"]
    out = [
        {
            "item": r["item"],
            "reviewer": r["reviewer"],
            "model": model,
            "rank": a["rank"],
            "correct": _cell(a["correct"]),
            "reasons": ";".join(a["reasons"]),
            "rationale": a["rationale"],
        }
        for r in rows
        for model, a in r["payload"]["answers"].items()
    ]
    return columns, out


def _rate_rows(rows: Sequence[Row], config: Mapping[str, Any]) -> tuple[list[str], list[Row]]:
    """One column per scale, and ``mean``: AutoMedEval's human score of a response is the mean of
    its scales."""
    scales = [s["name"] for s in config["scales"]]
    out: list[Row] = []
    for r in rows:
        for model, a in r["payload"]["answers"].items():
            values = [a[s] for s in scales]
            mean = sum(values) / len(values)
            out.append(
                {
                    "item": r["item"],
                    "reviewer": r["reviewer"],
                    "model": model,
                    **dict(zip(scales, values, strict=True)),
                }
                | {"mean": int(mean) if mean.is_integer() else mean}
            )
    return ["item", "reviewer", "model", *scales, "mean"], out


def _question_rows(rows: Sequence[Row]) -> tuple[list[str], list[Row]]:
    names = list(dict.fromkeys(k for r in rows for k in r["payload"]["fields"]))
    out = [
        {
            "item": r["item"],
            "reviewer": r["reviewer"],
            "decision": r["payload"]["decision"],
            **{k: _cell(r["payload"]["fields"].get(k)) for k in names},
            "comment": r["payload"]["comment"],
        }
        for r in rows
    ]
    return ["item", "reviewer", "decision", *names, "comment"], out


def _sentence_rows(rows: Sequence[Row], config: Mapping[str, Any]) -> tuple[list[str], list[Row]]:
    names = list(config["labels"])
    out = [
        {
            "item": r["item"],
            "reviewer": r["reviewer"],
            **{k: r["payload"]["labels"][k] for k in names},
            "rewrite": r["payload"]["rewrite"],
        }
        for r in rows
    ]
    return ["item", "reviewer", *names, "rewrite"], out


def _medalign_reviews(table: Sequence[Row]) -> tuple[list[str], list[Row]]:
    """The rank table under the column names MedAlign's analysis reads (``--reviews``)."""
    rows = [
        {
            "instruction_id": r["item"],
            "model": r["model"],
            "rank": r["rank"],
            "correct": r["correct"],
            "rater": r["reviewer"],
        }
        for r in table
    ]
    return ["instruction_id", "model", "rank", "correct", "rater"], rows


def _clinician_scores(table: Sequence[Row]) -> tuple[list[str], list[Row]]:
    """Each reviewer's mean score (the mean over scales) per model, long: what ``clinieval
    correlate --clinicians`` compares benchmarks' model rankings with."""
    sums: dict[tuple[str, str], list[float]] = {}
    for r in table:
        sums.setdefault((r["model"], r["reviewer"]), []).append(float(r["mean"]))
    rows = [{"model": m, "clinician": c, "score": sum(v) / len(v)} for (m, c), v in sums.items()]
    return ["model", "clinician", "score"], rows


EXTRA: Final = {"rank": ("reviews.csv", _medalign_reviews), "rate": ("clinicians.csv", _clinician_scores)}


def table_rows(kind: str, config: Mapping[str, Any], rows: Sequence[Row]) -> tuple[list[str], list[Row]]:
    """The long table of a kind: its columns and rows, from :func:`clinieval.review.store.export` rows."""
    if kind == "rank":
        return _rank_rows(rows)
    if kind == "rate":
        return _rate_rows(rows, config)
    if kind == "question":
        return _question_rows(rows)
    if kind == "sentence":
        return _sentence_rows(rows, config)
    raise UserError(f"study kind {kind!r} has no export table")


def export_study(engine: Engine, study: str, out: Path) -> ExportResult:
    """Write ``responses.jsonl``, the kind's table and ``study.json`` into ``out`` (replacing an
    earlier export there, all at once)."""
    with read_session(engine) as s:
        row = store.get_study(s, study)
        kind, config = row.kind, dict(row.config)
    _check_target(out)
    rows = store.export(engine, study)
    columns, table = table_rows(kind, config, rows)
    name = TABLES[kind]
    with staged_dir(out, "the export folder") as tmp:
        atomic_write_jsonl(tmp / "responses.jsonl", rows)
        # reviewers' rationales and models' text go to spreadsheets: formula-like cells are made inert
        atomic_write_csv(tmp / name, columns, table, spreadsheet_safe=True)
        extra = EXTRA.get(kind)
        if extra is not None:
            extra_columns, extra_rows = extra[1](table)
            atomic_write_csv(tmp / extra[0], extra_columns, extra_rows, spreadsheet_safe=True)
        atomic_write_json(
            tmp / "study.json",
            {
                "format": FORMAT,
                "study": study,
                "kind": kind,
                "config": config,
                "exported_at": utcnow().isoformat(),
                "responses": len(rows),
                "files": {
                    "responses": "responses.jsonl",
                    "table": name,
                    "extra": extra[0] if extra else None,
                },
            },
        )
    return ExportResult(out, len(rows), name, len(table), (extra[0],) if extra else ())
