"""Every read and write of the review database, as plain functions over an Engine.

The web app and the commands call only these, so the rules live in one place: a save is
validated by its study's kind, refused when stale (optimistic concurrency on ``version``),
audited (old -> new), and committed before the function returns; a reviewer never sees a model's
name (:class:`AssignmentView` has no ``source``) and is never assigned an item they wrote.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from sqlalchemy import CursorResult, Engine, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, selectinload

from clinieval.errors import UserError, one_of, shown
from clinieval.review.audit import record
from clinieval.review.db import (
    ROLES,
    SCHEMA_REVISION,
    Answer,
    Assignment,
    Audit,
    Item,
    Study,
    User,
    database_url,
    make_engine,
    read_session,
    shown_url,
    utcnow,
    write_session,
)
from clinieval.review.items import AnswerIn, ReviewItem, difference
from clinieval.review.study_kinds import get_kind

MIN_PASSWORD: Final = 8
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


# --- users -------------------------------------------------------------------------------------------


def _hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher()


def _check_name(name: str, what: str) -> str:
    if not name or name != name.strip() or not name.isprintable() or len(name) > MAX_NAME:
        raise UserError(
            f"{what} {shown(name)!r} must be 1-{MAX_NAME} printable characters without spaces around it"
        )
    return name


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise UserError(f"the password must have at least {MIN_PASSWORD} characters")


def hash_password(password: str) -> str:
    hashed: str = _hasher().hash(password)
    return hashed


def add_user(engine: Engine, name: str, role: str, password: str) -> User:
    """A new user with an argon2 hash of ``password`` (the password itself is never stored)."""
    _check_name(name, "user name")
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


# --- studies and items --------------------------------------------------------------------------------


def get_study(session: Session, name: str) -> Study:
    """The study called ``name``, or one error listing the studies there are."""
    study = session.scalar(select(Study).where(Study.name == name))
    if study is None:
        names = session.scalars(select(Study.name).order_by(Study.name)).all()
        there = f"the studies are {', '.join(names)}" if names else "there are no studies yet"
        raise NotFound(f"no study named {name!r}; {there}")
    return study


def list_studies(engine: Engine) -> list[Study]:
    with read_session(engine) as s:
        return list(s.scalars(select(Study).order_by(Study.name)).all())


@dataclass(frozen=True, slots=True)
class ImportCounts:
    added: int
    unchanged: int
    study_created: bool


def _check_blinding(item: ReviewItem, where: str) -> None:
    """Answers of one item need distinct models (the export maps each back to one model), and an
    answer id must not name its model: ids reach the reviewer's browser, model names must not."""
    sources = [a.source for a in item.answers]
    dup = sorted({s for s in sources if sources.count(s) > 1})
    if dup:
        raise UserError(f"{where}: two answers come from {dup[0]!r}; each answer needs its own model")
    for a in item.answers:
        if a.source.casefold() in a.id.casefold():
            raise UserError(
                f"{where}: answer id {a.id!r} contains its model's name {a.source!r}; reviewers' browsers see"
                " answer ids, so use neutral ids such as a1, a2"
            )


def _as_review_item(row: Item) -> ReviewItem:
    return ReviewItem(
        item=row.key,
        prompt=row.prompt,
        context=row.context,
        reference=row.reference,
        author=row.author,
        answers=tuple(AnswerIn(a.key, a.source, a.text) for a in row.answers),
        fields=row.fields,
        meta=row.meta,
    )


def _study_for_import(
    s: Session, name: str, kind: str, config: Mapping[str, Any] | None
) -> tuple[Study, bool]:
    checked = get_kind(kind).config(config)
    study = s.scalar(select(Study).where(Study.name == name))
    if study is None:
        study = Study(name=name, kind=kind, config=checked)
        s.add(study)
        s.flush()
        return study, True
    if study.kind != kind:
        raise UserError(f"study {name!r} is a {study.kind} study; import into it with --kind {study.kind}")
    if config is not None and checked != study.config:
        raise UserError(
            f"study {name!r} was created with config {json.dumps(study.config)}; this import gives"
            f" {json.dumps(checked)}. Leave --config out to keep the study's, or use a new study"
        )
    return study, False


def import_items(
    engine: Engine, study: str, kind: str, config: Mapping[str, Any] | None, items: Sequence[ReviewItem]
) -> ImportCounts:
    """Add ``items`` to ``study`` (created with ``kind`` and ``config`` if new). An item already
    there must be identical; a changed one is refused by name, since reviews may rest on it.
    All or nothing: one bad item leaves the database as it was."""
    _check_name(study, "study name")
    checker = get_kind(kind)
    seen: set[str] = set()
    for it in items:
        where = f"item {it.item!r}"
        if it.item in seen:
            raise UserError(f"{where} appears twice in this import")
        seen.add(it.item)
        checker.check_item(it, where)
        _check_blinding(it, where)
    added = unchanged = 0
    with write_session(engine) as s:
        row, created = _study_for_import(s, study, kind, config)
        existing = {
            i.key: i
            for i in s.scalars(
                select(Item).where(Item.study_id == row.id).options(selectinload(Item.answers))
            ).all()
        }
        for it in items:
            old = existing.get(it.item)
            if old is not None:
                diff = difference(_as_review_item(old), it)
                if diff is not None:
                    raise UserError(
                        f"item {it.item!r} is already in study {study!r} with a different {diff}; give a"
                        " changed item a new key, or import it into a new study"
                    )
                unchanged += 1
                continue
            s.add(_new_item(row.id, it))
            added += 1
        detail = {"kind": kind, "added": added, "unchanged": unchanged, "created": created}
        record(s, "import", study=study, detail=detail)
    return ImportCounts(added, unchanged, created)


def _new_item(study_id: int, it: ReviewItem) -> Item:
    return Item(
        study_id=study_id,
        key=it.item,
        prompt=it.prompt,
        context=it.context,
        reference=it.reference,
        author=it.author,
        fields=it.fields,
        meta=it.meta,
        answers=[Answer(key=a.id, source=a.source, text=a.text) for a in it.answers],
    )


# --- assignment ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignCounts:
    created: int
    items: int
    per_reviewer: dict[str, int]
    """Each reviewer's number of items in the study after this run (old and new assignments)."""
    unmatched_authors: list[str] = field(default_factory=list)
    """Item authors who are not users: nobody could be excluded for them (check the spelling)."""


def answer_order(seed: int, reviewer: str, item: str, keys: Sequence[str]) -> list[str]:
    """The order one reviewer sees an item's answers in: shuffled, the same for the same (seed,
    reviewer, item), independent between reviewers (so position bias averages out and can be
    studied: the order shown is exported)."""
    order = list(keys)
    random.Random(json.dumps([seed, reviewer, item])).shuffle(order)
    return order


def _is_author(user: User, item: Item) -> bool:
    return item.author is not None and item.author.casefold() == user.name.casefold()


def _reviewers(s: Session, names: Sequence[str] | None) -> list[User]:
    reviewers = select(User).where(User.role == "reviewer", User.removed_at.is_(None))
    users = list(s.scalars(reviewers.order_by(User.name)).all())
    if names is None:
        return users
    by_name = {u.name: u for u in users}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserError(f"{unknown[0]!r} is not a reviewer; the reviewers are {', '.join(by_name) or 'none'}")
    return [by_name[n] for n in dict.fromkeys(names)]


def assign(
    engine: Engine, study: str, per_item: int, seed: int, reviewers: Sequence[str] | None = None
) -> AssignCounts:
    """Give every item of ``study`` to ``per_item`` distinct reviewers (all users with the reviewer
    role, or ``reviewers``), never to its author, keeping workloads as even as possible.

    Existing assignments are kept and counted (running it again after an import assigns only the
    new items; raising ``per_item`` adds reviewers to every item). Items with fewer eligible
    reviewers are placed first, the rest in a seeded shuffle; each goes to the least-loaded
    eligible reviewers, ties broken by a seeded draw. The same database and seed give the same
    assignments, and overlapping pairs vary between items (better for inter-rater agreement than
    fixed teams).
    """
    if per_item < 1:
        raise UserError("--per-item must be at least 1")
    with write_session(engine) as s:
        row = get_study(s, study)
        users = _reviewers(s, reviewers)
        if len(users) < per_item:
            raise UserError(f"--per-item {per_item} needs {per_item} reviewers; there are {len(users)}")
        items = list(s.scalars(select(Item).where(Item.study_id == row.id).order_by(Item.id)).all())
        have: dict[int, set[int]] = {i.id: set() for i in items}
        load: Counter[int] = Counter()
        for a in s.scalars(select(Assignment).where(Assignment.study_id == row.id)).all():
            have[a.item_id].add(a.user_id)
            load[a.user_id] += 1
        plan = _plan(items, users, have, load, per_item, random.Random(f"assign:{seed}"))
        for item, user in plan:
            keys = [a.key for a in item.answers]
            s.add(
                Assignment(
                    study_id=row.id,
                    item_id=item.id,
                    user_id=user.id,
                    answer_order=answer_order(seed, user.name, item.key, keys),
                )
            )
        names = {u.casefold() for u in s.scalars(select(User.name)).all()}
        unmatched = sorted({i.author for i in items if i.author and i.author.casefold() not in names})
        per_reviewer = {u.name: load[u.id] for u in users}
        chosen = list(reviewers or [])
        detail = {"created": len(plan), "per_item": per_item, "seed": seed, "reviewers": chosen}
        record(s, "assign", study=study, detail=detail)
    return AssignCounts(len(plan), len(items), per_reviewer, unmatched)


def _plan(
    items: Sequence[Item],
    users: Sequence[User],
    have: dict[int, set[int]],
    load: Counter[int],
    per_item: int,
    rng: random.Random,
) -> list[tuple[Item, User]]:
    """The new (item, reviewer) pairs; ``load`` is updated as reviewers are picked."""

    def eligible_for(item: Item) -> list[User]:
        return [u for u in users if u.id not in have[item.id] and not _is_author(u, item)]

    # The most constrained items (an author among the reviewers) go first, while every load is
    # still low; the free items then even the loads out. A seeded draw orders items within that.
    draws = {item.id: rng.random() for item in items}
    order = sorted(items, key=lambda item: (len(eligible_for(item)), draws[item.id]))
    plan: list[tuple[Item, User]] = []
    for item in order:
        need = per_item - len(have[item.id])
        if need <= 0:
            continue
        eligible = eligible_for(item)
        if len(eligible) < need:
            note = f" (its author {item.author} is excluded)" if item.author else ""
            raise UserError(
                f"item {item.key!r} needs {need} more reviewer(s) but only {len(eligible)} can take it{note};"
                " add reviewers or lower --per-item"
            )
        draw = {u.id: rng.random() for u in eligible}
        eligible.sort(key=lambda u: (load[u.id], draw[u.id]))
        for user in eligible[:need]:
            plan.append((item, user))
            load[user.id] += 1
            have[item.id].add(user.id)
    return plan


# --- reviewing -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShownAnswer:
    """An answer as the reviewer's browser gets it: key and text, never the model."""

    key: str
    text: str


@dataclass(frozen=True, slots=True)
class AssignmentView:
    """Everything a reviewer's page needs for one assignment, blinded: answers in this reviewer's
    order and without ``source``. ``names`` maps each answer key to what the page calls it."""

    id: int
    study: str
    kind: str
    config: dict[str, Any]
    item: str
    prompt: str
    context: str
    reference: str | None
    fields: dict[str, Any]
    answers: tuple[ShownAnswer, ...]
    status: str
    version: int
    payload: dict[str, Any] | None
    updated_at: dt.datetime

    @property
    def names(self) -> dict[str, str]:
        return answer_names([a.key for a in self.answers])


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
        texts = {ans.key: ans.text for ans in a.item.answers}
        item, study = a.item, a.study
        return AssignmentView(
            id=a.id,
            study=study.name,
            kind=study.kind,
            config=study.config,
            item=item.key,
            prompt=item.prompt,
            context=item.context,
            reference=item.reference,
            fields=item.fields,
            answers=tuple(ShownAnswer(k, texts[k]) for k in a.answer_order),
            status=a.status,
            version=a.version,
            payload=a.payload,
            updated_at=a.updated_at,
        )


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


# --- progress and export ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a study is: items, assignments by status, per reviewer, items fully submitted."""

    study: str
    kind: str
    items: int
    assigned_items: int
    complete_items: int
    by_status: dict[str, int]
    per_reviewer: dict[str, dict[str, int]]


def progress(engine: Engine, study: str) -> Progress:
    with read_session(engine) as s:
        row = get_study(s, study)
        n_items = s.scalar(select(func.count(Item.id)).where(Item.study_id == row.id)) or 0
        rows = s.execute(
            select(User.name, Assignment.status, Assignment.item_id)
            .join(User, Assignment.user_id == User.id)
            .where(Assignment.study_id == row.id)
        ).all()
    by_status = dict.fromkeys(("pending", "draft", "submitted"), 0)
    per_reviewer: dict[str, dict[str, int]] = {}
    open_items: set[int] = set()
    assigned: set[int] = set()
    for name, status, item_id in rows:
        by_status[status] += 1
        per_reviewer.setdefault(name, dict.fromkeys(by_status, 0))[status] += 1
        assigned.add(item_id)
        if status != "submitted":
            open_items.add(item_id)
    return Progress(
        study=row.name,
        kind=row.kind,
        items=n_items,
        assigned_items=len(assigned),
        complete_items=len(assigned - open_items),
        by_status=by_status,
        per_reviewer=dict(sorted(per_reviewer.items())),
    )


def _by_source(payload: dict[str, Any], sources: Mapping[str, str]) -> dict[str, Any]:
    """A payload with its answer keys replaced by the models they came from."""
    if "answers" not in payload:
        return payload
    return {**payload, "answers": {sources[k]: v for k, v in payload["answers"].items()}}


def export(engine: Engine, study: str) -> list[dict[str, Any]]:
    """One row per submitted assignment (item order, then reviewer): item key,
    reviewer name, the answers in the order shown (keys and models), the payload with answer keys
    mapped back to models, version, submitted time, and the item's ``meta``. No password hash and
    no session data exist in these rows."""
    with read_session(engine) as s:
        row = get_study(s, study)
        assignments = s.execute(
            select(Assignment, User.name)
            .join(User, Assignment.user_id == User.id)
            .join(Item, Assignment.item_id == Item.id)
            .where(Assignment.study_id == row.id, Assignment.status == "submitted")
            .options(selectinload(Assignment.item).selectinload(Item.answers))
            .order_by(Item.id, User.name)
        ).all()
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
