"""``clinieval review``: create the review database, add users, import and assign items, serve the
app, export the results.

Every command takes ``--db`` (a SQLite file path, or a ``postgresql://`` URL); it can come from
``CLINIEVAL_REVIEW_DB`` instead, which keeps a PostgreSQL password out of the shell history and
the process list. Heavy imports (SQLAlchemy, Alembic, the web app) happen inside the commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from clinieval.cli_options import command_group
from clinieval.errors import UserError

review_app = command_group("Blinded clinician review: a local web app, its database and its exports.")

Db = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="CLINIEVAL_REVIEW_DB",
        help="SQLite file, or postgresql://user@host/db (env CLINIEVAL_REVIEW_DB)",
    ),
]
Study = Annotated[str, typer.Option("--study", help="study name")]


@review_app.command()
def init(db: Db) -> None:
    """Create the review database, or upgrade an older one to this version's schema."""
    from clinieval.review.db import shown_url
    from clinieval.review.store import current_revision, init_db

    engine = init_db(db)
    typer.echo(f"review database ready: {shown_url(db)} (schema {current_revision(engine)})")


def _read_password() -> str:
    """A hidden, confirmed prompt at a terminal; otherwise one line of stdin (for scripts:
    ``printf '%s\\n' "$PW" | clinieval review add-user ...``). Never an option: command lines
    are visible to every user of the machine."""
    if sys.stdin.isatty():
        value: str = typer.prompt("password", hide_input=True, confirmation_prompt=True)
        return value
    line = sys.stdin.readline()
    if not line:
        raise UserError("no password: type it at the prompt or give it as one line on stdin")
    return line.rstrip("\r\n")


@review_app.command("add-user")
def add_user(
    name: Annotated[str, typer.Argument(help="login name (for a reviewer, as written in items' author)")],
    db: Db,
    role: Annotated[str, typer.Option(help="admin or reviewer")] = "reviewer",
) -> None:
    """Add a user; the password is read from a hidden prompt (or stdin) and stored as an argon2 hash."""
    from clinieval.review.db import ROLES
    from clinieval.review.store import add_user as add
    from clinieval.review.store import connect

    if role not in ROLES:
        raise UserError(f"role {role!r} is unknown; choose from {', '.join(ROLES)}")
    engine = connect(db)
    user = add(engine, name, role, _read_password())
    typer.echo(f"added {user.role} {user.name}")


def _config(value: str | None) -> dict[str, Any] | None:
    """``--config`` as inline JSON (starting with ``{``) or the path of a JSON file."""
    if value is None:
        return None
    text = value
    if not value.lstrip().startswith("{"):
        path = Path(value)
        if not path.is_file():
            raise UserError(f"--config {value!r} is neither a JSON object nor a file")
        text = path.read_text(encoding="utf-8")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"--config is not valid JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise UserError("--config must be a JSON object")
    return parsed


@review_app.command("import")
def import_(
    source: Annotated[Path, typer.Argument(help="review items, JSON Lines (see docs/review.md)")],
    db: Db,
    study: Study,
    kind: Annotated[str, typer.Option(help="rank, rate, question or sentence")],
    config: Annotated[str | None, typer.Option(help="the kind's settings: JSON, or a JSON file")] = None,
) -> None:
    """Import items into a study (created on first import); an existing item must be unchanged."""
    from clinieval.review.items import read_items
    from clinieval.review.kinds import get_kind
    from clinieval.review.store import connect, import_items

    get_kind(kind)
    settings = _config(config)
    items = read_items(source)
    counts = import_items(connect(db), study, kind, settings, items)
    made = "created" if counts.study_created else "updated"
    typer.echo(f"study {study} {made}: {counts.added} item(s) added, {counts.unchanged} already there")


@review_app.command()
def assign(
    db: Db,
    study: Study,
    per_item: Annotated[int, typer.Option(min=1, help="reviewers per item (2+ to measure agreement)")],
    seed: Annotated[int, typer.Option(help="seed of the assignment and of each reviewer's answer order")] = 0,
    reviewer: Annotated[
        list[str] | None, typer.Option(help="only these reviewers (repeatable; default: every reviewer)")
    ] = None,
) -> None:
    """Give each item to --per-item reviewers, evenly, never to the item's author."""
    from clinieval.review.store import assign as run_assign
    from clinieval.review.store import connect

    counts = run_assign(connect(db), study, per_item, seed, reviewer)
    typer.echo(f"{counts.created} new assignment(s) over {counts.items} item(s)")
    for name, n in counts.per_reviewer.items():
        typer.echo(f"  {name}: {n}")
    if counts.unmatched_authors:
        typer.echo(
            "note: these authors are not users, so nobody was excluded for them (check the spelling): "
            + ", ".join(counts.unmatched_authors),
            err=True,
        )


@review_app.command()
def progress(db: Db, study: Study) -> None:
    """Where a study stands: assignments by status and per reviewer, and live agreement."""
    from clinieval.review.agreement import study_agreement
    from clinieval.review.store import connect
    from clinieval.review.store import progress as study_progress

    engine = connect(db)
    p = study_progress(engine, study)
    typer.echo(f"{p.study} ({p.kind}): {p.items} items, {p.complete_items} fully reviewed")
    typer.echo("  " + ", ".join(f"{k} {v}" for k, v in p.by_status.items()))
    for name, counts in p.per_reviewer.items():
        typer.echo(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    typer.echo(json.dumps(study_agreement(engine, study), indent=2))


@review_app.command()
def serve(
    db: Db,
    host: Annotated[
        str, typer.Option(help="address to listen on (loopback unless --allow-remote)")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port")] = 8000,
    allow_remote: Annotated[
        bool, typer.Option(help="listen on a non-loopback address (put an HTTPS proxy in front)")
    ] = False,
) -> None:
    """Run the review web app until Ctrl-C."""
    from clinieval.review.app import check_host
    from clinieval.review.app import serve as run_server
    from clinieval.review.store import connect

    check_host(host, allow_remote)
    engine = connect(db)
    typer.echo(f"review app on http://{host}:{port}/ (Ctrl-C stops it)")
    run_server(engine, host, port, allow_remote=allow_remote)


@review_app.command()
def export(
    study: Study,
    out: Annotated[Path, typer.Argument(help="folder to write (replaced if it holds an earlier export)")],
    db: Db,
) -> None:
    """Write a study's submitted reviews: responses.jsonl and a table for `clinieval analyze`."""
    from clinieval.review.export import export_study
    from clinieval.review.store import connect

    result = export_study(connect(db), study, out)
    files = ", ".join(str(out / f) for f in ("responses.jsonl", result.table, *result.extra))
    typer.echo(f"{result.responses} submitted review(s) -> {files}")
