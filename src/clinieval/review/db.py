"""The review database: its tables (SQLAlchemy 2 typed ORM) and how an engine is opened.

One schema serves SQLite (a file beside the evaluation, the default: nothing to install, nothing
listening) and PostgreSQL (a URL, for a team that already runs one). The migrations under
``migrations/`` create exactly these tables; :data:`SCHEMA_REVISION` is the revision this code
expects, so a server never runs against a database it does not understand.

SQLite is opened in WAL mode (readers run beside the one writer) with foreign keys on, and a
write goes through :func:`write_session`, which starts its transaction with ``BEGIN IMMEDIATE``:
a read-then-write transaction that began as a plain ``BEGIN`` can fail with ``SQLITE_BUSY`` when
it tries to upgrade its lock, whereas ``IMMEDIATE`` takes the write lock first and waits for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Final

from sqlalchemy import (
    JSON,
    CheckConstraint,
    DateTime,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from clinieval.errors import UserError

SCHEMA_REVISION: Final = "0003"
"""The Alembic revision this code reads and writes (the head of ``migrations/versions``)."""

ROLES: Final = ("admin", "reviewer")
STATUSES: Final = ("pending", "draft", "submitted")
ACTIONS: Final = ("save", "submit")
AUDIT_ACTIONS: Final = (
    *ACTIONS,
    "login",
    "login-failed",
    "login-throttled",
    "logout",
    "import",
    "assign",
    "user-add",
    "user-remove",
    "password-reset",
    "revoke",
    "rotate-secret",
)
"""What an audit row may record: a reviewer's save or submit, every sign-in attempt (succeeded,
failed, refused by the throttle), a sign-out, and every administrative change (the commands' actor
is the operating-system account that ran them)."""
SESSION_SECRET_KEY: Final = "session_secret"
"""The ``settings`` key where schema 0001 kept the cookie-signing secret; migration 0002 deletes
it (the key now lives in a file beside the database: :mod:`clinieval.review.sessions`)."""
THROTTLE_KINDS: Final = ("user", "address")

_IMMEDIATE: Final = "clinieval_immediate"

NAMING: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names fixed by convention: Alembic's batch mode on SQLite rebuilds a table and can
only drop or alter a constraint it can name, so a later migration needs these names."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A timestamp stored in UTC and read back time-zone aware on both backends (SQLite keeps no
    zone, so without this a value read back would compare unequal to the one written)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("review timestamps must be time-zone aware")
        return value.astimezone(dt.UTC)

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[str]: JSON,
        dt.datetime: UTCDateTime,
    }


class User(Base):
    """A clinician or an administrator; the password is kept only as an argon2 hash."""

    __tablename__ = "users"
    __table_args__ = (CheckConstraint("role IN ('admin', 'reviewer')", name="role"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(20))
    password_hash: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    removed_at: Mapped[dt.datetime | None] = mapped_column(nullable=True)
    """Set by ``review user remove``: the user can no longer log in, and the row stays so that
    their saved reviews keep their author."""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class Setting(Base):
    """Installation-wide values (none secret: a secret here would be readable by anyone who can
    read the database or one of its backups)."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Study(Base):
    """One review study: a kind (``rank``, ``rate``, ``question``, ``sentence``) and its config."""

    __tablename__ = "studies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    items: Mapped[list[Item]] = relationship(back_populates="study", order_by="Item.id")


class Item(Base):
    """One thing to review: the prompt, the record beside it, and its answers."""

    __tablename__ = "items"
    __table_args__ = (UniqueConstraint("study_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(500))
    prompt: Mapped[str] = mapped_column(Text)
    context: Mapped[str] = mapped_column(Text)
    reference: Mapped[str | None] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(String(200))
    fields: Mapped[dict[str, Any]]
    meta: Mapped[dict[str, Any]]

    study: Mapped[Study] = relationship(back_populates="items")
    answers: Mapped[list[Answer]] = relationship(back_populates="item", order_by="Answer.id")

    @property
    def answer_keys(self) -> list[str]:
        """The answers' keys in import order (what :mod:`clinieval.review.study_kinds` validates against)."""
        return [a.key for a in self.answers]


class Answer(Base):
    """One model's answer to an item. ``source`` (the model) is never shown to a reviewer."""

    __tablename__ = "answers"
    __table_args__ = (UniqueConstraint("item_id", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(500))
    text: Mapped[str] = mapped_column(Text)

    item: Mapped[Item] = relationship(back_populates="answers")


class Assignment(Base):
    """One reviewer's work on one item: the order they see the answers in, the state of their
    response and its version (the optimistic-concurrency counter every save must name)."""

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("item_id", "user_id"),
        CheckConstraint("status IN ('pending', 'draft', 'submitted')", name="status"),
        Index(None, "user_id", "study_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    answer_order: Mapped[list[str]]
    status: Mapped[str] = mapped_column(String(20), default="pending")
    version: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    item: Mapped[Item] = relationship()
    user: Mapped[User] = relationship()
    study: Mapped[Study] = relationship()


AUDIT_CHECK: Final = "action IN ({})".format(", ".join(f"'{a}'" for a in AUDIT_ACTIONS))


class Audit(Base):
    """One write: who (``user_name``, kept as text so the row outlives the user), when, what
    (``action``, the study and item it touched, ``detail``) and, for a save, the payload and
    version before and after. The foreign keys only ever become NULL: no delete of a user or an
    assignment removes its history."""

    __tablename__ = "audit"
    __table_args__ = (CheckConstraint(AUDIT_CHECK, name="action"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id", ondelete="SET NULL"), index=True, nullable=True
    )
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), nullable=True)
    user_name: Mapped[str] = mapped_column(String(200))
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    action: Mapped[str] = mapped_column(String(20))
    study: Mapped[str | None] = mapped_column(String(200), nullable=True)
    item: Mapped[str | None] = mapped_column(String(500), nullable=True)
    old: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    new: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    old_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    new_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class LoginSession(Base):
    """One signed-in browser. The cookie holds a random id; this row holds only its keyed hash
    (:func:`clinieval.review.sessions.id_hash`), so neither the database nor a backup of it
    gives anyone a cookie that works."""

    __tablename__ = "sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    last_seen: Mapped[dt.datetime] = mapped_column(default=utcnow)
    address: Mapped[str | None] = mapped_column(String(100), nullable=True)


class LoginFailure(Base):
    """One failed sign-in, counted against the name typed (case-folded, known or not) and the
    address it came from; rows older than the throttling window are pruned."""

    __tablename__ = "login_failures"
    __table_args__ = (
        CheckConstraint("kind IN ('user', 'address')", name="kind"),
        Index(None, "kind", "key", "at"),
        Index(None, "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    key: Mapped[str] = mapped_column(String(200))
    at: Mapped[dt.datetime] = mapped_column(default=utcnow)


# --- engines --------------------------------------------------------------------------------------


def database_url(db: str | Path) -> URL:
    """``db`` as a SQLAlchemy URL: a file path means SQLite; ``postgresql://`` and ``postgres://``
    mean PostgreSQL through psycopg 3 (the driver clinieval installs, not psycopg2)."""
    text = str(db)
    if "://" not in text:
        return URL.create("sqlite+pysqlite", database=str(Path(text).expanduser().resolve()))
    try:
        url = make_url(text)
    except ArgumentError:
        raise UserError(f"{shown_url(text)} is not a database URL or a file path") from None
    if url.drivername in ("postgresql", "postgres", "postgresql+psycopg"):
        return url.set(drivername="postgresql+psycopg")
    if url.drivername in ("sqlite", "sqlite+pysqlite"):
        return url.set(drivername="sqlite+pysqlite")
    raise UserError(
        f"database {url.drivername!r} is not supported; give a file path (SQLite) or a postgresql:// URL"
    )


def shown_url(db: str | Path | URL) -> str:
    """A database for a message: the path, or the URL with its password hidden."""
    if isinstance(db, URL):
        return db.database or "" if db.drivername.startswith("sqlite") else db.render_as_string(True)
    text = str(db)
    if "://" not in text:
        return text
    try:
        return make_url(text).render_as_string(hide_password=True)
    except ArgumentError:
        return text.split("://", 1)[0] + "://..."


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: URL) -> Engine:
    """An engine for ``url``; for SQLite with WAL, foreign keys, a busy timeout and SQLAlchemy's
    own transaction control (so :func:`write_session` can say ``BEGIN IMMEDIATE``)."""
    if not url.drivername.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": 30.0})
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # pysqlite must not BEGIN on its own: _sqlite_begin does
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # FULL, not NORMAL: in WAL mode NORMAL can lose the last commits on a power cut, and a save the
        # app acknowledged to a clinician must survive one (measured cost: see docs/reliability.md)
        cursor.execute("PRAGMA synchronous=FULL")
    finally:
        cursor.close()


def _sqlite_begin(conn: Any) -> None:
    immediate = conn.get_execution_options().get(_IMMEDIATE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session whose transaction takes the write lock first (SQLite ``BEGIN IMMEDIATE``) and is
    committed when the block ends, rolled back when it raises: a save is on disk before the
    caller answers the browser."""
    bound = engine.execution_options(**{_IMMEDIATE: True}) if is_sqlite(engine) else engine
    with Session(bound, expire_on_commit=False) as session, session.begin():
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for reading; objects stay usable after it closes (nothing is expired)."""
    with Session(engine, expire_on_commit=False) as session:
        yield session
