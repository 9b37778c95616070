"""A reviewer's work: their queue, one assignment as they may see it (blinded: answers in their
own order, never a model's name, :class:`AssignmentView` has no ``source``), and saving it:
validated by the study's kind, refused when stale (optimistic concurrency on ``version``),
audited (old -> new) and committed before :func:`save` returns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, select, update

from clinieval.errors import UserError
from clinieval.review.audit import record
from clinieval.review.db import (
    Assignment,
    Audit,
    Item,
    Study,
    User,
    read_session,
    utcnow,
    write_session,
)
from clinieval.review.store import Forbidden, NotFound, StaleSave
from clinieval.review.study_kinds import get_kind


@dataclass(frozen=True, slots=True)
class ShownAnswer:
    """An answer as its reviewer sees it: the letter of its place in their order and the text.
    The key stays on the server (the pages map letters back to it); there is no ``source`` field,
    so nothing built from this can print which model wrote the answer."""

    letter: str
    key: str
    text: str


def shown_answers(order: Sequence[str], texts: Mapping[str, str]) -> tuple[ShownAnswer, ...]:
    """The answers in ``order`` (the assignment's stored order), lettered. An answer missing from
    the order (it should not happen) is shown last rather than hidden: a reviewer must see all."""
    keys = [k for k in order if k in texts] + [k for k in texts if k not in order]
    return tuple(ShownAnswer(letter(i), k, texts[k]) for i, k in enumerate(keys))


@dataclass(frozen=True, slots=True)
class AssignmentView:
    """One assignment as its reviewer may see it, for the pages and for code alike: answers in
    this reviewer's order, lettered, and nothing that says which model wrote them. The record
    text is not in it (the page fetches it on its own: it can be long). It also satisfies
    ``study_kinds.ItemShape``."""

    id: int
    user_id: int
    study: str
    kind: str
    config: dict[str, Any]
    item: str
    prompt: str
    reference: str | None
    fields: dict[str, Any]
    answers: tuple[ShownAnswer, ...]
    answer_keys: list[str]
    """The item's answer keys in import order (what ``kinds.validate`` checks a payload against)."""
    status: str
    version: int
    payload: dict[str, Any] | None
    updated_at: dt.datetime

    @property
    def names(self) -> dict[str, str]:
        """Answer key -> what the page calls it ("Answer B"), for the kinds' messages."""
        return answer_names([a.key for a in self.answers])

    def key_of(self) -> dict[str, str]:
        """Letter -> answer key, to turn the posted form into a payload."""
        return {a.letter: a.key for a in self.answers}

    def letter_of(self) -> dict[str, str]:
        """Answer key -> letter, to put a stored payload back into the form."""
        return {a.key: a.letter for a in self.answers}


def view_of(row: Assignment) -> AssignmentView:
    """The reviewer's view of an assignment row (read in an open session, item and study loaded)."""
    item, study = row.item, row.study
    return AssignmentView(
        id=row.id,
        user_id=row.user_id,
        study=study.name,
        kind=study.kind,
        config=dict(study.config or {}),
        item=item.key,
        prompt=item.prompt,
        reference=item.reference,
        fields=dict(item.fields or {}),
        answers=shown_answers(row.answer_order or [], {a.key: a.text for a in item.answers}),
        answer_keys=list(item.answer_keys),
        status=row.status,
        version=row.version,
        payload=row.payload,
        updated_at=row.updated_at,
    )


def answer_names(order: Sequence[str]) -> dict[str, str]:
    """What a reviewer calls each answer: its letter on their page ("Answer B" is shown second;
    A ... Z, then AA, AB ...), so a refused save names the answer as the page does."""
    return {key: f"Answer {letter(i)}" for i, key in enumerate(order)}


def letter(index: int) -> str:
    """The label of the answer shown ``index``-th (0-based): A ... Z, then AA, AB ...; the pages
    and the error messages both use it, so they always name an answer the same way."""
    label = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        label = chr(ord("A") + rest) + label
    return label


@dataclass(frozen=True, slots=True)
class QueueEntry:
    id: int
    study: str
    kind: str
    item: str
    status: str
    version: int
    updated_at: dt.datetime


def _user_id(user: User | int) -> int:
    return user if isinstance(user, int) else user.id


def reviewer_queue(engine: Engine, user: User | int, study: str | None = None) -> list[QueueEntry]:
    """A reviewer's assignments (unfinished first, then by study and item import order)."""
    uid = _user_id(user)
    query = (
        select(Assignment, Study.name, Study.kind, Item.key)
        .join(Study, Assignment.study_id == Study.id)
        .join(Item, Assignment.item_id == Item.id)
        .where(Assignment.user_id == uid)
    )
    if study is not None:
        query = query.where(Study.name == study)
    with read_session(engine) as s:
        rows = s.execute(query.order_by(Study.name, Item.id)).all()
    entries = [
        QueueEntry(a.id, nm, kind, key, a.status, a.version, a.updated_at) for a, nm, kind, key in rows
    ]
    return sorted(entries, key=lambda e: e.status == "submitted")


def assignment_view(engine: Engine, assignment_id: int, user: User) -> AssignmentView:
    """One assignment for its reviewer (an admin may look at any): blinded, in their order."""
    with read_session(engine) as s:
        a = s.get(Assignment, assignment_id)
        if a is None:
            raise NotFound(f"no assignment {assignment_id}")
        if a.user_id != user.id and not user.is_admin:
            raise Forbidden("this review is assigned to someone else")
        return view_of(a)


def _stale(current: int, expected: int) -> StaleSave:
    return StaleSave(
        f"this review was saved elsewhere after you opened it (version {current} is stored, your page has"
        f" version {expected}); your changes were NOT saved: copy them, reload the page, and apply them again"
    )


def save(
    engine: Engine,
    assignment_id: int,
    user: User | int,
    payload: object,
    expected_version: int,
    submit: bool,
) -> int:
    """Store a draft (``submit=False``) or a submission of one assignment; returns the new version.

    The payload is validated by the study's kind (a draft may be incomplete). ``expected_version``
    is the version the reviewer's page loaded: if anything was saved since, :class:`StaleSave` is
    raised and nothing is written. A submitted review can be changed only by submitting again (a
    draft must not turn a finished review back into an unfinished one). Each change adds one audit
    row; the transaction is committed before this returns. Saving exactly what is stored changes
    nothing and returns the current version.
    """
    uid = _user_id(user)
    with write_session(engine) as s:
        a = s.get(Assignment, assignment_id, with_for_update=True)
        if a is None:
            raise NotFound(f"no assignment {assignment_id}")
        if a.user_id != uid:
            raise Forbidden("this review is assigned to someone else")
        if a.version != expected_version:
            raise _stale(a.version, expected_version)
        if a.status == "submitted" and not submit:
            raise UserError("this review is already submitted; change it with Submit, which checks it again")
        kind = get_kind(a.study.kind)
        names = answer_names(a.answer_order)
        clean = kind.validate(payload, a.item, a.study.config, partial=not submit, names=names)
        status = "submitted" if submit else "draft"
        if clean == a.payload and status == a.status:
            return a.version
        old, new_version = a.payload, a.version + 1
        result = s.execute(
            update(Assignment)
            .where(Assignment.id == a.id, Assignment.version == expected_version)
            .values(payload=clean, status=status, version=new_version, updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        if cast(CursorResult[Any], result).rowcount != 1:
            raise _stale(expected_version + 1, expected_version)
        record(
            s,
            "submit" if submit else "save",
            actor=a.user.name,
            actor_id=uid,
            study=a.study.name,
            item=a.item.key,
            assignment_id=a.id,
            old=old,
            new=clean,
            old_version=expected_version,
            new_version=new_version,
        )
    return new_version


def audit_trail(engine: Engine, assignment_id: int) -> list[Audit]:
    """Every change to an assignment, oldest first."""
    with read_session(engine) as s:
        return list(
            s.scalars(select(Audit).where(Audit.assignment_id == assignment_id).order_by(Audit.id)).all()
        )
