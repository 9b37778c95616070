"""The review database as the rest of ``clinieval.review`` opens it: creating or upgrading it,
connecting to a current one, finding a study by name, and the errors every room of the review
store raises (:class:`NotFound`, :class:`Forbidden`, :class:`StaleSave`).

The rooms over one concern each sit beside it: :mod:`.accounts` (users and passwords),
:mod:`.importing` (items into a study), :mod:`.assigning` (who reviews what, and how far they
are), :mod:`.reviewing` (a reviewer's queue, one assignment blinded, saving it) and
:mod:`.export` (the submitted reviews as files). Each write is audited and committed before its
function returns.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, Select, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from clinieval.errors import UserError, shown
from clinieval.review.db import (
    SCHEMA_REVISION,
    Assignment,
    Item,
    Study,
    User,
    database_url,
    make_engine,
    read_session,
    shown_url,
)

MAX_NAME: Final = 200
UPGRADE_HINT: Final = "run `clinieval review init --db {db}` to upgrade it"


class StaleSave(UserError):
    """A save named a version older than the stored one: someone (another tab, another device)
    saved in between. Nothing was written; the client keeps its text and must reload."""


class NotFound(UserError):
    """No such assignment, study or user."""


class Forbidden(UserError):
    """The assignment belongs to another reviewer."""


# --- opening ---------------------------------------------------------------------------------------


def _migrations_config(connection: Any) -> Any:
    """Alembic's config built in code (no alembic.ini at run time), pointed at the migrations
    shipped inside this package and at an open connection."""
    from alembic.config import Config

    cfg = Config()
    location = str(Path(__file__).resolve().parent / "migrations")
    cfg.set_main_option("script_location", location.replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


@contextmanager
def _reaching(engine: Engine) -> Iterator[None]:
    """A server that is down, a database that does not exist or a refused login as one line
    (the driver's first line names the cause; the URL is shown without its password)."""
    try:
        yield
    except OperationalError as e:
        cause = str(e.orig).strip().splitlines()[0] if e.orig is not None else str(e)
        raise UserError(f"cannot open the review database {shown_url(engine.url)}: {cause}") from None


def current_revision(engine: Engine) -> str | None:
    """The database's Alembic revision, None when it was never initialised."""
    from alembic.runtime.migration import MigrationContext

    with _reaching(engine), engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


SQLITE_FILES: Final = ("", "-wal", "-shm", "-journal")
"""A SQLite database's files: itself, its write-ahead log and shared memory, a rollback journal."""


def _private_sqlite(path: Path) -> None:
    """Create the SQLite file mode 0600 before SQLite opens it (SQLite gives its ``-wal`` and
    ``-shm`` files the database file's mode), or tighten an older one's files to 0600: they hold
    patient records. ``fchmod`` after ``os.open``, so no umask widens the mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for suffix in SQLITE_FILES:
            with contextlib.suppress(FileNotFoundError, PermissionError):
                Path(f"{path}{suffix}").chmod(0o600)
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def init_db(db: str | Path) -> Engine:
    """Create the database (or upgrade an older one), its files readable by their owner only, and
    the session key file beside it (:mod:`clinieval.review.sessions`); running it again on a
    current database changes nothing."""
    from alembic import command

    from clinieval.review.sessions import ensure_secret

    url = database_url(db)
    if url.drivername.startswith("sqlite") and url.database:
        _private_sqlite(Path(url.database))
    engine = make_engine(url)
    with _reaching(engine), engine.begin() as conn:
        command.upgrade(_migrations_config(conn), "head")
    ensure_secret(url)
    return engine


def connect(db: str | Path) -> Engine:
    """An engine on an initialised, current database: a missing SQLite file or an older schema is
    refused with the command that fixes it (never created or migrated behind the user's back)."""
    url = database_url(db)
    where = shown_url(url)
    if url.drivername.startswith("sqlite") and url.database and not Path(url.database).is_file():
        raise UserError(f"no review database at {where}; create it with `clinieval review init --db {where}`")
    engine = make_engine(url)
    revision = current_revision(engine)
    if revision is None:
        raise UserError(f"{where} is not a review database yet; {UPGRADE_HINT.format(db=where)}")
    if revision != SCHEMA_REVISION:
        raise UserError(
            f"{where} is at schema revision {revision}, this clinieval needs {SCHEMA_REVISION}; "
            + UPGRADE_HINT.format(db=where)
        )
    return engine


def session_secret(engine: Engine) -> str:
    """The session key of the database (hex, from its file beside the database, never from the
    database itself; made by :func:`init_db`)."""
    from clinieval.review.sessions import SessionKey

    return SessionKey.for_url(engine.url).get().hex()


def check_name(name: str, what: str) -> str:
    """A user or study name: 1-:data:`MAX_NAME` printable characters, no spaces around it."""
    if not name or name != name.strip() or not name.isprintable() or len(name) > MAX_NAME:
        raise UserError(
            f"{what} {shown(name)!r} must be 1-{MAX_NAME} printable characters without spaces around it"
        )
    return name


# --- studies -----------------------------------------------------------------------------------------


def get_study(session: Session, name: str) -> Study:
    """The study called ``name``, or one error listing the studies there are."""
    study = session.scalar(select(Study).where(Study.name == name))
    if study is None:
        names = session.scalars(select(Study.name).order_by(Study.name)).all()
        there = f"the studies are {', '.join(names)}" if names else "there are no studies yet"
        raise NotFound(f"no study named {name!r}; {there}")
    return study


def submitted_reviews(study: Study, *columns: Any) -> Select[Any]:
    """``columns`` of every submitted review of ``study``, by item (import order), then reviewer
    name (the order the agreement, the disagreements and the export all read them in)."""
    return (
        select(*columns)
        .join(User, Assignment.user_id == User.id)
        .join(Item, Assignment.item_id == Item.id)
        .where(Assignment.study_id == study.id, Assignment.status == "submitted")
        .order_by(Item.id, User.name)
    )


def list_studies(engine: Engine) -> list[Study]:
    with read_session(engine) as s:
        return list(s.scalars(select(Study).order_by(Study.name)).all())
