"""Changing users after they were added: a new password, or removal. Both end the user's sessions
in the same transaction and are audited.

Removal keeps the user's row, marked removed, with its password hash wiped: they can no longer
sign in, their saved reviews (drafts and submissions) stay in the study under their name, and the
assignments they never opened are deleted, so ``review assign`` can give those items to someone
else. The name stays taken (reviews and exports refer to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, delete, select, update

from clinieval.review import store
from clinieval.review.audit import record
from clinieval.review.db import Assignment, User, read_session, utcnow, write_session
from clinieval.review.sessions import end_sessions_of, find_user

REMOVED_HASH = "!removed"
"""What a removed user's password hash becomes: no password verifies against it."""


def require_user(engine: Engine, name: str) -> None:
    """Refuse a name that is no (current) user, with the list of those there are."""
    with read_session(engine) as s:
        find_user(s, name)


def reset_password(engine: Engine, name: str, password: str, *, actor: str | None = None) -> int:
    """Give ``name`` a new password and end all their sessions; how many sessions ended."""
    store.check_password(password)
    hashed = store.hash_password(password)
    with write_session(engine) as s:
        user = find_user(s, name)
        s.execute(update(User).where(User.id == user.id).values(password_hash=hashed))
        ended = end_sessions_of(s, user.id)
        record(s, "password-reset", actor=actor, detail={"user": user.name, "sessions": ended})
    return ended


@dataclass(frozen=True, slots=True)
class Removed:
    name: str
    sessions: int
    kept: int
    """Assignments with saved work (draft or submitted), kept in the study."""
    freed: int
    """Assignments never started, deleted (``review assign`` can give them to someone else)."""


def remove_user(engine: Engine, name: str, *, actor: str | None = None) -> Removed:
    """Remove ``name``: no more sign-ins, sessions ended, saved work kept, unstarted work freed."""
    with write_session(engine) as s:
        user = find_user(s, name)
        ended = end_sessions_of(s, user.id)
        mine = Assignment.user_id == user.id
        freed = len(s.scalars(select(Assignment.id).where(mine, Assignment.status == "pending")).all())
        s.execute(delete(Assignment).where(mine, Assignment.status == "pending"))
        kept = len(s.scalars(select(Assignment.id).where(mine)).all())
        s.execute(
            update(User).where(User.id == user.id).values(removed_at=utcnow(), password_hash=REMOVED_HASH)
        )
        detail = {"user": user.name, "role": user.role, "sessions": ended, "kept": kept, "freed": freed}
        record(s, "user-remove", actor=actor, detail=detail)
    return Removed(user.name, ended, kept, freed)
