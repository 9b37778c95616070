"""The review's users: adding one (an argon2 hash of the password, never the password), signing
in (:func:`verify_user`), listing them, and changing them later: a new password, or removal. Both
changes end the user's sessions in the same transaction and are audited.

Removal keeps the user's row, marked removed, with its password hash wiped: they can no longer
sign in, their saved reviews (drafts and submissions) stay in the study under their name, and the
assignments they never opened are deleted, so ``review assign`` can give those items to someone
else. The name stays taken (reviews and exports refer to it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError

from clinieval.errors import UserError, one_of
from clinieval.review.audit import record
from clinieval.review.db import ROLES, Assignment, User, read_session, utcnow, write_session
from clinieval.review.sessions import end_sessions_of, find_user
from clinieval.review.store import check_name

MIN_PASSWORD: Final = 8

REMOVED_HASH = "!removed"
"""What a removed user's password hash becomes: no password verifies against it."""


def _hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher()


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise UserError(f"the password must have at least {MIN_PASSWORD} characters")


def hash_password(password: str) -> str:
    hashed: str = _hasher().hash(password)
    return hashed


def add_user(engine: Engine, name: str, role: str, password: str) -> User:
    """A new user with an argon2 hash of ``password`` (the password itself is never stored)."""
    check_name(name, "user name")
    checked_role = one_of(role, ROLES, "role")
    check_password(password)
    user = User(name=name, role=checked_role, password_hash=hash_password(password))
    try:
        with write_session(engine) as s:
            old = s.scalar(select(User).where(User.name == name))
            if old is not None and old.removed_at is not None:
                raise UserError(
                    f"user {name!r} was removed; their reviews are kept under that name, so choose another"
                )
            if old is not None:
                raise UserError(f"user {name!r} already exists")
            s.add(user)
            record(s, "user-add", detail={"user": name, "role": checked_role})
    except IntegrityError:  # added by someone else between the check and the insert
        raise UserError(f"user {name!r} already exists") from None
    return user


def verify_user(engine: Engine, name: str, password: str) -> User | None:
    """The user when ``password`` is theirs, else None. An unknown name costs the same hash as a
    known one, so response times do not reveal which names exist."""
    from argon2.exceptions import InvalidHashError, VerificationError

    hasher = _hasher()
    with read_session(engine) as s:
        user = s.scalar(select(User).where(User.name == name, User.removed_at.is_(None)))
    if user is None:
        hasher.hash(password)
        return None
    try:
        hasher.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        return None
    if hasher.check_needs_rehash(user.password_hash):
        with write_session(engine) as s:
            s.execute(update(User).where(User.id == user.id).values(password_hash=hasher.hash(password)))
    return user


@dataclass(frozen=True, slots=True)
class UserSummary:
    """A user as an admin page lists them: never the hash."""

    id: int
    name: str
    role: str
    created_at: dt.datetime


def list_users(engine: Engine) -> list[UserSummary]:
    with read_session(engine) as s:
        users = s.scalars(select(User).where(User.removed_at.is_(None)).order_by(User.name)).all()
    return [UserSummary(u.id, u.name, u.role, u.created_at) for u in users]


def require_user(engine: Engine, name: str) -> None:
    """Refuse a name that is no (current) user, with the list of those there are."""
    with read_session(engine) as s:
        find_user(s, name)


def reset_password(engine: Engine, name: str, password: str, *, actor: str | None = None) -> int:
    """Give ``name`` a new password and end all their sessions; how many sessions ended."""
    check_password(password)
    hashed = hash_password(password)
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
