"""Server-side sessions, the key they are hashed with, and login throttling.

**Sessions.** A sign-in makes a random id (256 bits, :func:`secrets.token_urlsafe`) that the
browser keeps as its cookie, unsigned: it is a bearer token worth nothing unless a row of the
``sessions`` table matches it. The row holds only ``HMAC-SHA256(key, id)``, so neither reading the
database nor a backup of it yields a cookie that works. A session ends when the user logs out,
when their password is reset, when they are removed, on ``review revoke``, on ``review
rotate-secret`` (which also changes the key, so even a restored backup's rows match nothing), after
:attr:`SessionPolicy.idle` without a request, and :attr:`SessionPolicy.absolute` after sign-in
whatever the activity. The CSRF token of a page is derived from the cookie's id with the same key
(:func:`csrf_for`), so it is never stored either.

**The key.** 32 random bytes, hex, in a file readable by its owner only (mode 0600, set at
creation whatever the umask): ``review.sqlite.secret`` beside a SQLite database; for PostgreSQL a
file under ``~/.config/clinieval/`` named after the server and database; anywhere with
``CLINIEVAL_REVIEW_SECRET_FILE``. It is never in the database. A running app re-reads the file when
it changes, so ``rotate-secret`` takes effect without a restart.

**Throttling.** Every failed sign-in is counted against the name typed (case-folded, whether or
not such a user exists, so the answer does not tell) and against the address it came from. Past
:attr:`ThrottlePolicy.per_user` failures for a name, or :attr:`ThrottlePolicy.per_address` for an
address, within :attr:`ThrottlePolicy.window`, further attempts are refused without checking the
password until enough of those failures have aged out. A successful sign-in clears its name's
count (not its address's: one valid account must not reset a password-spraying address). The
counts live in the database, so a restart does not reset them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import math
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from clinieval.errors import UserError
from clinieval.fsutil import slug
from clinieval.review.audit import record
from clinieval.review.db import LoginFailure, LoginSession, User, read_session, utcnow, write_session

SECRET_ENV: Final = "CLINIEVAL_REVIEW_SECRET_FILE"
SECRET_BYTES: Final = 32
TOUCH_EVERY: Final = dt.timedelta(seconds=60)
"""A session's ``last_seen`` is written at most this often (not on every request): idle expiry is
exact to a minute, and a reviewer's page loads do not each take the database's write lock."""
TOKEN_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{43,86}")


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """How long a session lasts: ``idle`` without a request, ``absolute`` from sign-in at most."""

    idle: dt.timedelta = dt.timedelta(minutes=30)
    absolute: dt.timedelta = dt.timedelta(hours=12)

    def __post_init__(self) -> None:
        if self.idle <= dt.timedelta(0) or self.absolute <= dt.timedelta(0):
            raise UserError("session lifetimes must be positive")


@dataclass(frozen=True, slots=True)
class ThrottlePolicy:
    """At most ``per_user`` failed sign-ins per name and ``per_address`` per address in ``window``.

    The address limit is higher than the name's: several clinicians may share one address (a
    ward's computers behind one gateway, or everyone when the app sees only its proxy)."""

    per_user: int = 5
    per_address: int = 20
    window: dt.timedelta = dt.timedelta(minutes=15)


# --- the key ------------------------------------------------------------------------------------------


def secret_path(url: URL) -> Path:
    """Where the session key of the database at ``url`` lives (see the module's docstring)."""
    chosen = os.environ.get(SECRET_ENV)
    if chosen:
        return Path(chosen).expanduser()
    if url.drivername.startswith("sqlite") and url.database:
        return Path(url.database + ".secret")
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "clinieval"
    name = "-".join(slug(str(part)) for part in (url.host or "local", url.port or 5432, url.database or "db"))
    return base / f"review-{name}.secret"


def _write_private(path: Path, text: str, *, replace: bool) -> None:
    """``text`` into ``path``, mode 0600 from the first byte (``os.open`` with the mode, then
    ``fchmod``, so no umask widens it), via a temporary file: a reader sees the old file or the new
    one, never half of one. Without ``replace`` an existing file wins (two processes creating the
    key at once agree on one)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _new_key_text() -> str:
    return secrets.token_hex(SECRET_BYTES) + "\n"


def ensure_secret(url: URL) -> Path:
    """The key file of ``url``, made when missing (``review init`` makes it; an app started on a
    copied database makes its own, under which no copied session is valid)."""
    path = secret_path(url)
    if not path.exists():
        try:
            _write_private(path, _new_key_text(), replace=False)
        except OSError as e:
            raise UserError(f"cannot create the session key {path}: {e.strerror or e}") from None
    return path


def _read_key(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError as e:
        raise UserError(
            f"cannot read the session key {path}: {e.strerror or e} (run the app as the user who ran"
            " `clinieval review init`)"
        ) from None
    except UnicodeDecodeError:
        text = ""
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < SECRET_BYTES:
        raise UserError(
            f"the session key {path} is damaged; replace it with `clinieval review rotate-secret`"
        )
    return key


class SessionKey:
    """The key of one database, read from its file and read again whenever the file changes (so a
    running app follows ``rotate-secret``); :meth:`get` costs one ``stat`` otherwise."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._key = b""

    @classmethod
    def for_url(cls, url: URL) -> SessionKey:
        key = cls(ensure_secret(url))
        key.get()
        return key

    def get(self) -> bytes:
        try:
            st = self.path.stat()
        except OSError as e:
            raise UserError(f"cannot read the session key {self.path}: {e.strerror or e}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._key, self._stamp = _read_key(self.path), stamp
        return self._key


def id_hash(key: bytes, token: str) -> str:
    """What the ``sessions`` table stores for the cookie value ``token``."""
    return hmac.new(key, b"session:" + token.encode(), hashlib.sha256).hexdigest()


def csrf_for(key: bytes, token: str) -> str:
    """The CSRF token of the browser holding ``token`` (signed in or not): derived, never stored."""
    return hmac.new(key, b"csrf:" + token.encode(), hashlib.sha256).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def well_formed(token: object) -> bool:
    return isinstance(token, str) and TOKEN_PATTERN.fullmatch(token) is not None


# --- sessions -----------------------------------------------------------------------------------------


def start(engine: Engine, key: bytes, user: User, address: str | None) -> str:
    """A new session for ``user``; the cookie value (returned once, never stored)."""
    token = new_token()
    now = utcnow()
    with write_session(engine) as s:
        s.add(
            LoginSession(
                id_hash=id_hash(key, token), user_id=user.id, created_at=now, last_seen=now, address=address
            )
        )
        record(
            s, "login", actor=user.name, actor_id=user.id, detail={"address": address, "outcome": "signed in"}
        )
    return token


def lookup(engine: Engine, key: bytes, token: str, policy: SessionPolicy) -> User | None:
    """The user of the session ``token`` names, or None: no such session (ended, revoked, another
    key), its user removed, or it ran out (idle or absolute), in which case its row is deleted.
    A live session's ``last_seen`` is renewed (at most every :data:`TOUCH_EVERY`)."""
    if not well_formed(token):
        return None
    hashed = id_hash(key, token)
    now = utcnow()
    with read_session(engine) as s:
        row = s.execute(
            select(User, LoginSession.created_at, LoginSession.last_seen)
            .select_from(LoginSession)
            .join(User, User.id == LoginSession.user_id)
            .where(LoginSession.id_hash == hashed)
        ).one_or_none()
    if row is None:
        return None
    user, created_at, last_seen = row
    expired = now - last_seen >= policy.idle or now - created_at >= policy.absolute
    if expired or user.removed_at is not None:
        with write_session(engine) as w:
            w.execute(delete(LoginSession).where(LoginSession.id_hash == hashed))
        return None
    if now - last_seen >= TOUCH_EVERY:
        with write_session(engine) as w:
            w.execute(update(LoginSession).where(LoginSession.id_hash == hashed).values(last_seen=now))
    return user


def end(engine: Engine, key: bytes, token: str) -> User | None:
    """Log out: delete the session ``token`` names; its user, or None when there was none."""
    if not well_formed(token):
        return None
    hashed = id_hash(key, token)
    with write_session(engine) as s:
        row = s.execute(
            select(LoginSession, User)
            .join(User, User.id == LoginSession.user_id)
            .where(LoginSession.id_hash == hashed)
        ).one_or_none()
        if row is None:
            return None
        user = row[1]
        s.execute(delete(LoginSession).where(LoginSession.id_hash == hashed))
        record(s, "logout", actor=user.name, actor_id=user.id)
    return user


def find_user(s: Session, name: str) -> User:
    """The (not removed) user called ``name``, or one error listing the users there are."""
    user = s.scalar(select(User).where(User.name == name, User.removed_at.is_(None)))
    if user is None:
        names = s.scalars(select(User.name).where(User.removed_at.is_(None)).order_by(User.name)).all()
        there = f"the users are {', '.join(names)}" if names else "there are no users yet"
        raise UserError(f"no user named {name!r}; {there}")
    return user


def end_sessions_of(s: Session, user_id: int) -> int:
    """Delete every session of one user inside the caller's transaction; how many there were."""
    count = (
        s.scalar(select(func.count()).select_from(LoginSession).where(LoginSession.user_id == user_id)) or 0
    )
    s.execute(delete(LoginSession).where(LoginSession.user_id == user_id))
    return count


def revoke(engine: Engine, name: str | None, *, actor: str | None = None) -> int:
    """End every session of the user ``name``, or of everyone when ``name`` is None; how many."""
    with write_session(engine) as s:
        if name is None:
            count = s.scalar(select(func.count()).select_from(LoginSession)) or 0
            s.execute(delete(LoginSession))
            record(s, "revoke", actor=actor, detail={"all": True, "sessions": count})
        else:
            user = find_user(s, name)
            count = end_sessions_of(s, user.id)
            record(s, "revoke", actor=actor, detail={"user": user.name, "sessions": count})
    return count


def rotate_secret(engine: Engine, *, actor: str | None = None) -> int:
    """A new key (the old file replaced atomically) and every session ended; how many there were.
    Run it after a suspected leak of the key file, the database or a backup."""
    path = secret_path(engine.url)
    try:
        _write_private(path, _new_key_text(), replace=True)
    except OSError as e:
        raise UserError(f"cannot write the session key {path}: {e.strerror or e}") from None
    with write_session(engine) as s:
        count = s.scalar(select(func.count()).select_from(LoginSession)) or 0
        s.execute(delete(LoginSession))
        record(s, "rotate-secret", actor=actor, detail={"file": str(path), "sessions": count})
    return count


# --- throttling ---------------------------------------------------------------------------------------


def _user_key(name: str) -> str:
    return name.strip().casefold()[:200]


def _address_key(address: str | None) -> str:
    return (address or "unknown")[:200]


def _retry_at(
    s: Session, kind: str, key: str, limit: int, since: dt.datetime, window: dt.timedelta
) -> dt.datetime | None:
    """When ``key`` may try again, or None when it may now: once fewer than ``limit`` of its
    failures lie inside the window, i.e. when the ``limit``-th newest one ages out."""
    if limit < 1:
        return None
    times = s.scalars(
        select(LoginFailure.at)
        .where(LoginFailure.kind == kind, LoginFailure.key == key, LoginFailure.at > since)
        .order_by(LoginFailure.at.desc())
        .limit(limit)
    ).all()
    if len(times) < limit:
        return None
    return times[-1] + window


def refused_until(
    engine: Engine, name: str, address: str | None, policy: ThrottlePolicy
) -> dt.datetime | None:
    """When this name or address may sign in again, or None when it may now."""
    now = utcnow()
    since = now - policy.window
    with read_session(engine) as s:
        times = [
            _retry_at(s, "user", _user_key(name), policy.per_user, since, policy.window),
            _retry_at(s, "address", _address_key(address), policy.per_address, since, policy.window),
        ]
    later = [t for t in times if t is not None and t > now]
    return max(later) if later else None


def minutes_until(when: dt.datetime) -> int:
    """Whole minutes (at least 1) until ``when``, for "try again in N minutes"."""
    return max(1, math.ceil((when - utcnow()).total_seconds() / 60))


def typed_name(name: str) -> str:
    """The name an attempt typed, as the audit trail keeps it (its ``user_name`` column's length)."""
    return name[:200]


def _audit_attempt(s: Session, action: str, name: str, address: str | None, outcome: str) -> None:
    """The permanent record of one sign-in attempt that did not sign anyone in: the name as typed
    (known or not), the client address and why it failed. The password is never passed here."""
    record(s, action, actor=typed_name(name), detail={"address": address, "outcome": outcome})


def note_failure(
    engine: Engine,
    name: str,
    address: str | None,
    policy: ThrottlePolicy,
    outcome: str = "wrong name or password",
) -> None:
    """Count one failed sign-in against the name and the address, and forget failures older than
    the window (the table never grows past what throttling needs). The audit trail keeps the
    attempt for good, in the same transaction."""
    now = utcnow()
    with write_session(engine) as s:
        s.execute(delete(LoginFailure).where(LoginFailure.at <= now - policy.window))
        s.add(LoginFailure(kind="user", key=_user_key(name), at=now))
        s.add(LoginFailure(kind="address", key=_address_key(address), at=now))
        _audit_attempt(s, "login-failed", name, address, outcome)


def note_malformed(engine: Engine, name: str, address: str | None) -> None:
    """An attempt whose form was unusable (a field missing, or too long to hash): audited, not
    counted for throttling (no password was checked)."""
    with write_session(engine) as s:
        _audit_attempt(s, "login-failed", name, address, "malformed form")


def note_throttled(engine: Engine, name: str, address: str | None) -> None:
    """An attempt refused by the throttle without its password being checked: audited only."""
    with write_session(engine) as s:
        _audit_attempt(s, "login-throttled", name, address, "throttled")


def note_success(engine: Engine, name: str) -> None:
    """A successful sign-in: the name's failures are forgotten (the address's are not)."""
    with write_session(engine) as s:
        s.execute(
            delete(LoginFailure).where(LoginFailure.kind == "user", LoginFailure.key == _user_key(name))
        )
