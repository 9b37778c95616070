"""``clinieval review``: create the review database, add users, import and assign items, serve the
app, export the results.

:func:`make_review_app` builds the command group around the review sources it is given (each
benchmark's ``review_sources()``, collected by ``clinieval.cli``), so ``review import`` learns
what benchmark files it can read from its caller. The commands live here, in the command layer,
rather than in ``clinieval.review``: that package sits below the benchmark protocol, which names
its :class:`~clinieval.review.sources.ReviewSource`, and so may import no command-line layer.

Every command takes ``--db`` (a SQLite file path, or a ``postgresql://`` URL); it can come from
``CLINIEVAL_REVIEW_DB`` instead, which keeps a PostgreSQL password out of the shell history and
the process list. Heavy imports (SQLAlchemy, Alembic, the web app) happen inside the commands.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clinieval.cli_options import command_group
from clinieval.errors import UserError

if TYPE_CHECKING:
    from clinieval.review.sources import ReviewSource

HELP = "Blinded clinician review: a local web app, its database and its exports."

Db = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="CLINIEVAL_REVIEW_DB",
        help="SQLite file, or postgresql://user@host/db (env CLINIEVAL_REVIEW_DB)",
    ),
]
Study = Annotated[str, typer.Option("--study", help="study name")]


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


def add_user(
    name: Annotated[str, typer.Argument(help="login name (for a reviewer, as written in items' author)")],
    db: Db,
    role: Annotated[str, typer.Option(help="admin or reviewer")] = "reviewer",
) -> None:
    """Add a user; the password is read from a hidden prompt (or stdin) and stored as an argon2 hash."""
    from clinieval.review.accounts import add_user as add
    from clinieval.review.db import ROLES
    from clinieval.review.store import connect

    if role not in ROLES:
        raise UserError(f"role {role!r} is unknown; choose from {', '.join(ROLES)}")
    engine = connect(db)
    user = add(engine, name, role, _read_password())
    typer.echo(f"added {user.role} {user.name}")


def _sessions(n: int) -> str:
    return f"{n} session{'' if n == 1 else 's'}"


def remove_user(name: Annotated[str, typer.Argument(help="the user to remove")], db: Db) -> None:
    """Remove a user: they can no longer log in and their sessions end; what they saved stays in
    the study under their name, and items they never opened can be assigned again."""
    from clinieval.review.accounts import remove_user as remove
    from clinieval.review.store import connect

    done = remove(connect(db), name)
    typer.echo(
        f"removed {done.name}: {_sessions(done.sessions)} ended, {done.kept} saved review(s) kept,"
        f" {done.freed} unstarted assignment(s) freed (`review assign` gives them to others)"
    )


def reset_password(name: Annotated[str, typer.Argument(help="the user")], db: Db) -> None:
    """Give a user a new password (hidden prompt, or one line of stdin) and end their sessions."""
    from clinieval.review.accounts import require_user
    from clinieval.review.accounts import reset_password as reset
    from clinieval.review.store import connect

    engine = connect(db)
    require_user(engine, name)  # an unknown name is refused before a password is asked for
    ended = reset(engine, name, _read_password())
    typer.echo(f"new password for {name}; {_sessions(ended)} ended")


def revoke(
    db: Db,
    name: Annotated[str | None, typer.Argument(help="the user whose sessions end")] = None,
    all_: Annotated[bool, typer.Option("--all", help="end every user's sessions")] = False,
) -> None:
    """End a user's sessions (or everyone's with --all): their browsers are back at the login form."""
    from clinieval.review.sessions import revoke as end_sessions
    from clinieval.review.store import connect

    if (name is None) == (not all_):
        raise UserError(
            "name a user to revoke, or pass --all" if name is None else "name a user or pass --all, not both"
        )
    ended = end_sessions(connect(db), name)
    typer.echo(f"{_sessions(ended)} ended" + (f" for {name}" if name else ""))


def rotate_secret(db: Db) -> None:
    """Replace the session key (the file beside the database) and end every session: do it after a
    suspected leak of the key file, the database or a backup."""
    from clinieval.review.sessions import rotate_secret as rotate
    from clinieval.review.sessions import secret_path
    from clinieval.review.store import connect

    engine = connect(db)
    ended = rotate(engine)
    typer.echo(f"new session key in {secret_path(engine.url)}; {_sessions(ended)} ended")


def audit(
    db: Db,
    out: Annotated[Path, typer.Option("--out", help="FILE.csv or FILE.jsonl")],
    study: Annotated[str | None, typer.Option("--study", help="only this study's rows")] = None,
) -> None:
    """Write the audit trail (every save, sign-in and administrative change: who, when, what)."""
    from clinieval.review.audit import export_audit
    from clinieval.review.store import connect

    rows = export_audit(connect(db), out, study)
    typer.echo(f"{rows} audit row(s) -> {out}")


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


def _import_command(sources: Sequence[ReviewSource]) -> Callable[..., None]:
    """``review import``, closed over the sources it may pick from (their names and descriptions
    go into its help, so ``--help`` says what each benchmark's files become)."""
    from clinieval.review.sources import check_sources

    known = check_sources(sources)

    def import_(
        source: Annotated[
            list[Path],
            typer.Argument(help="review items (JSON Lines), or a benchmark's own files (see --from)"),
        ],
        db: Db,
        study: Study,
        kind: Annotated[
            str | None,
            typer.Option(
                help="rank, rate, question or sentence (default: the benchmark files' own, or the study's)"
            ),
        ] = None,
        config: Annotated[str | None, typer.Option(help="the kind's settings: JSON, or a JSON file")] = None,
        from_: Annotated[
            str | None,
            typer.Option("--from", help="the source that reads SOURCE (default: the one that recognises it)"),
        ] = None,
        mask: Annotated[
            list[str] | None,
            typer.Option(
                "--mask",
                help="also mask this regular expression in answer texts (repeatable; model names always are)",
            ),
        ] = None,
    ) -> None:
        from clinieval.review.importing import import_items
        from clinieval.review.sources import pick_source, study_kind
        from clinieval.review.store import connect, list_studies
        from clinieval.review.study_kinds import get_kind

        chosen = pick_source(known, source, from_)
        settings = _config(config)
        engine = connect(db)
        existing = {s.name: s.kind for s in list_studies(engine)}.get(study)
        the_kind = study_kind(chosen, kind, study, existing)  # an existing study keeps its kind
        get_kind(the_kind)
        converted = chosen.convert(source)
        # a source's config is for a new study: an existing one keeps its own
        new = existing is None
        if settings is None and chosen.default_config is not None and new:
            settings = dict(chosen.default_config)
        counts = import_items(engine, study, the_kind, settings, converted.items, tuple(mask or ()))
        if chosen.kind is not None:
            typer.echo(f"read as {chosen.name}: {len(converted.items)} {the_kind} item(s)")
        for note in converted.notes:
            typer.echo(f"note: {note}", err=True)
        made = "created" if counts.study_created else "updated"
        typer.echo(f"study {study} {made}: {counts.added} item(s) added, {counts.unchanged} already there")
        if counts.masked_mentions:
            typer.echo(
                f"masked {counts.masked_mentions} mention(s) of model names in {counts.masked_answers}"
                " answer(s): reviewers see [model hidden] there (the study page lists the items)"
            )

    doc = "Import items into a study (created on first import); an existing item must be unchanged."
    if len(known) > 1:
        doc += "\n\nSOURCE is a review items file, or a benchmark's own files, recognised by their content: "
        doc += "; ".join(f"{s.name} ({s.kind}): {s.describe}" for s in known[1:])
    import_.__doc__ = doc
    return import_


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
    from clinieval.review.assigning import assign as run_assign
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


def progress(db: Db, study: Study) -> None:
    """Where a study stands: assignments by status and per reviewer, and live agreement."""
    from clinieval.review.agreement import study_agreement
    from clinieval.review.assigning import progress as study_progress
    from clinieval.review.store import connect

    engine = connect(db)
    p = study_progress(engine, study)
    typer.echo(f"{p.study} ({p.kind}): {p.items} items, {p.complete_items} fully reviewed")
    typer.echo("  " + ", ".join(f"{k} {v}" for k, v in p.by_status.items()))
    for name, counts in p.per_reviewer.items():
        typer.echo(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    typer.echo(json.dumps(study_agreement(engine, study), indent=2))


def serve(
    db: Db,
    host: Annotated[
        str, typer.Option(help="address to listen on (loopback unless --allow-remote)")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port")] = 8000,
    allow_remote: Annotated[
        bool,
        typer.Option(
            help="listen on a non-loopback address (put an HTTPS proxy in front; the cookie is marked Secure)"
        ),
    ] = False,
    idle_minutes: Annotated[
        int, typer.Option(min=1, help="a session ends after this many minutes without a request")
    ] = 30,
    session_hours: Annotated[
        int, typer.Option(min=1, help="a session ends this many hours after sign-in, however active")
    ] = 12,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            help="the HTTPS proxy's address: its X-Forwarded-Proto/-For are believed, no one else's"
            " (repeatable)"
        ),
    ] = None,
) -> None:
    """Run the review web app until Ctrl-C."""
    import datetime as dt

    from clinieval.review.app import check_host
    from clinieval.review.app import serve as run_server
    from clinieval.review.sessions import SessionPolicy
    from clinieval.review.store import connect
    from clinieval.review.web.security import proxy_addresses

    check_host(host, allow_remote)
    proxies = proxy_addresses(tuple(trusted_proxy or ()))
    policy = SessionPolicy(
        idle=dt.timedelta(minutes=idle_minutes), absolute=dt.timedelta(hours=session_hours)
    )
    engine = connect(db)
    typer.echo(f"review app on http://{host}:{port}/ (Ctrl-C stops it)")
    run_server(engine, host, port, allow_remote=allow_remote, session_policy=policy, trusted_proxies=proxies)


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


def make_review_app(sources: Sequence[ReviewSource] = ()) -> typer.Typer:
    """The ``clinieval review`` commands; ``review import`` also reads the files of ``sources``
    (``clinieval.cli`` passes every benchmark's ``review_sources()``)."""
    app = command_group(HELP)
    app.command()(init)
    app.command("add-user")(add_user)
    users = command_group("Add, remove or reset the password of a user.")
    users.command("add")(add_user)
    users.command("remove")(remove_user)
    users.command("reset-password")(reset_password)
    app.add_typer(users, name="user")
    app.command()(revoke)
    app.command("rotate-secret")(rotate_secret)
    app.command()(audit)
    app.command("import")(_import_command(sources))
    app.command()(assign)
    app.command()(progress)
    app.command()(serve)
    app.command()(export)
    return app


review_app = make_review_app()
"""The commands without benchmark sources (the generic items file only): for tests and scripts
that drive ``clinieval.review`` alone."""
