"""What the pages read from the database, as plain views that carry no model name.

Blinding by construction: a template never receives an ORM object. It receives plain views: an
assignment as :class:`clinieval.review.reviewing.AssignmentView` (the one view the API gives too),
whose :class:`~clinieval.review.reviewing.ShownAnswer` has no ``source`` field, so no template,
however written, can print which model wrote an answer. Answers come in the assignment's stored
``answer_order`` and are labelled by position (A, B, C…); the browser sees neither the model nor the
answer's import key (keys are often ``a1``, ``a2`` in the same model order on every item, which
would unblind a reviewer across items), only the letter, which the server maps back to the key.

Ownership is part of every query: a reviewer's lookup of someone else's assignment returns None,
the same as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, selectinload

from clinieval.review.db import Answer, Assignment, Item, Study, read_session
from clinieval.review.items import excerpt
from clinieval.review.reviewing import AssignmentView, view_of
from clinieval.review.study_kinds import Measure, get_kind

PREVIEW_CHARS: Final = 120
"""How much of an item's question the queue shows (cut at a word break, with "…")."""


def _owned(session: Session, assignment_id: int, user_id: int) -> Assignment | None:
    row = session.get(
        Assignment,
        assignment_id,
        options=[selectinload(Assignment.item).selectinload(Item.answers), selectinload(Assignment.study)],
    )
    if row is None or row.user_id != user_id:
        return None
    return row


def assignment_view(engine: Engine, assignment_id: int, user_id: int) -> AssignmentView | None:
    """The assignment when it belongs to ``user_id``; None otherwise (missing or someone else's)."""
    with read_session(engine) as session:
        row = _owned(session, assignment_id, user_id)
        if row is None:
            return None
        return view_of(row)


def assignment_context(engine: Engine, assignment_id: int, user_id: int) -> str | None:
    """The record text of the assignment's item, when the assignment is ``user_id``'s."""
    with read_session(engine) as session:
        stmt = (
            select(Item.context)
            .join(Assignment, Assignment.item_id == Item.id)
            .where(Assignment.id == assignment_id, Assignment.user_id == user_id)
        )
        return session.execute(stmt).scalar_one_or_none()


def next_open(engine: Engine, user_id: int, after: int) -> int | None:
    """The user's next assignment not yet submitted (after ``after``, wrapping around), or None."""
    with read_session(engine) as session:
        base = select(func.min(Assignment.id)).where(
            Assignment.user_id == user_id, Assignment.status != "submitted", Assignment.id != after
        )
        later = session.execute(base.where(Assignment.id > after)).scalar_one_or_none()
        return later if later is not None else session.execute(base).scalar_one_or_none()


def study_sources(engine: Engine, name: str) -> list[str]:
    """The model names behind a study's answers: the admin pages strip them from anything shown."""
    with read_session(engine) as session:
        stmt = (
            select(Answer.source)
            .join(Item, Item.id == Answer.item_id)
            .join(Study, Study.id == Item.study_id)
            .where(Study.name == name)
            .distinct()
        )
        return [s for s in session.execute(stmt).scalars() if s]


# --- the queue ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    """One assignment in its reviewer's queue: the item's key and a preview of its question."""

    id: int
    item: str
    preview: str
    status: str


@dataclass(frozen=True)
class QueueStudy:
    """One study's part of a reviewer's queue, its rows in the data's order (the order the items
    were imported, the same for every reviewer and every visit)."""

    name: str
    label: str
    """What the reviewer does, in plain words (the kind's label: "Rate answers")."""
    rows: tuple[QueueRow, ...]

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def done(self) -> int:
        return sum(r.status == "submitted" for r in self.rows)

    @property
    def next_up(self) -> QueueRow | None:
        """Where to start: the first row not yet submitted (None when every one is)."""
        return next((r for r in self.rows if r.status != "submitted"), None)

    @property
    def started(self) -> bool:
        """Whether anything was saved yet: the button says Continue rather than Start."""
        return any(r.status != "pending" for r in self.rows)


def queue(engine: Engine, user_id: int) -> list[QueueStudy]:
    """``user_id``'s assignments by study (studies by name), with a preview of each question."""
    stmt = (
        select(
            Assignment.id,
            Study.name,
            Study.kind,
            Study.config,
            Item.key,
            func.substr(Item.prompt, 1, 4 * PREVIEW_CHARS),
            Item.fields,
            Assignment.status,
        )
        .join(Study, Assignment.study_id == Study.id)
        .join(Item, Assignment.item_id == Item.id)
        .where(Assignment.user_id == user_id)
        .order_by(Study.name, Item.id)
    )
    with read_session(engine) as session:
        rows = session.execute(stmt).all()
    studies: dict[str, tuple[str, list[QueueRow]]] = {}
    for aid, study, kind_name, config, key, prompt, fields, status in rows:
        kind = get_kind(kind_name)
        shown = excerpt(kind.preview(prompt or "", fields or {}), PREVIEW_CHARS)
        studies.setdefault(study, (kind.title(config or {}), []))[1].append(QueueRow(aid, key, shown, status))
    return [QueueStudy(name, label, tuple(r)) for name, (label, r) in studies.items()]


def queue_totals(studies: Sequence[QueueStudy]) -> tuple[int, int]:
    """(submitted, assigned) over every study of a queue."""
    return sum(s.done for s in studies), sum(s.total for s in studies)


def study_measures(engine: Engine, name: str) -> tuple[Measure, ...]:
    """What the study's reviewers are compared on (its kind's measures under its config); none
    for a study that does not exist."""
    with read_session(engine) as session:
        row = session.execute(select(Study.kind, Study.config).where(Study.name == name)).one_or_none()
    if row is None:
        return ()
    return get_kind(row.kind).measures(row.config or {})
