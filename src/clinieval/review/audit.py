"""The audit trail: one row for every write to the review database, and its export.

Who, when and what: a reviewer's save or submit (the payload and version before and after), every
sign-in attempt (``login``, ``login-failed``, ``login-throttled``: the name as typed, the client
address and the outcome in ``detail``), a sign-out, and every administrative change (import, assign,
a user added, removed or given a new password, sessions revoked, the session key rotated). Rows are
only ever added, in the same transaction as the change they record. Each names its user, study and
item as text, and its foreign keys turn NULL rather than cascade, so removing a user or an
assignment keeps their history.

The commands' actor is the operating-system account that ran them (``cli:alice``): the database
cannot know which person typed a command, only which account did.

Passwords and session ids never reach this table: a user's row records the user and role, a
revoke how many sessions ended.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from clinieval.errors import UserError
from clinieval.fsutil import atomic_open, atomic_write_csv
from clinieval.review.db import AUDIT_ACTIONS, Audit, read_session

COLUMNS: Final = (
    "id",
    "at",
    "actor",
    "action",
    "study",
    "item",
    "old_version",
    "new_version",
    "detail",
    "old",
    "new",
)
"""The export's columns; in the CSV, ``detail``, ``old`` and ``new`` are JSON text."""
FORMATS: Final = (".csv", ".jsonl")


def process_actor() -> str:
    """Who runs a command: ``cli:`` and the operating-system account."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no name for this uid (a bare container)
        import os

        return f"cli:uid-{os.getuid()}" if hasattr(os, "getuid") else "cli:unknown"


def record(
    s: Session,
    action: str,
    *,
    actor: str | None = None,
    actor_id: int | None = None,
    study: str | None = None,
    item: str | None = None,
    assignment_id: int | None = None,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    old_version: int | None = None,
    new_version: int | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Add one audit row to the caller's transaction (committed, or rolled back, with the change).
    ``actor`` defaults to :func:`process_actor`."""
    if action not in AUDIT_ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    s.add(
        Audit(
            action=action,
            user_name=actor if actor is not None else process_actor(),
            user_id=actor_id,
            study=study,
            item=item,
            assignment_id=assignment_id,
            old=old,
            new=new,
            old_version=old_version,
            new_version=new_version,
            detail=detail,
        )
    )


def _row(a: Audit) -> dict[str, Any]:
    return {
        "id": a.id,
        "at": a.at.isoformat(),
        "actor": a.user_name,
        "action": a.action,
        "study": a.study,
        "item": a.item,
        "old_version": a.old_version,
        "new_version": a.new_version,
        "detail": a.detail,
        "old": a.old,
        "new": a.new,
    }


def audit_rows(engine: Engine, study: str | None = None) -> list[dict[str, Any]]:
    """Every audit row (or one study's), oldest first, as the export writes them."""
    query = select(Audit).order_by(Audit.id)
    if study is not None:
        query = query.where(Audit.study == study)
    with read_session(engine) as s:
        return [_row(a) for a in s.scalars(query).all()]


def _csv_cells(row: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in row.items():
        if k in ("detail", "old", "new"):
            out[k] = "" if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True)
        else:
            out[k] = "" if v is None else v
    return out


def export_audit(engine: Engine, out: Path, study: str | None = None) -> int:
    """Write the audit trail to ``out``: CSV (spreadsheet-safe cells) or JSON Lines, by its
    suffix; written atomically. How many rows."""
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise UserError(f"--out {out}: write the audit trail to a .csv or a .jsonl file")
    rows = audit_rows(engine, study)
    try:
        if suffix == ".csv":
            atomic_write_csv(out, COLUMNS, (_csv_cells(r) for r in rows), spreadsheet_safe=True)
        else:
            with atomic_open(out) as f:
                for line in _lines(rows):
                    f.write(line)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    return len(rows)


def _lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    for r in rows:
        yield json.dumps(r, ensure_ascii=False) + "\n"
