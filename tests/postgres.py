"""A real PostgreSQL for the tests: a throwaway cluster started once per session.

Use it from a test module with ``pytest_plugins = ["tests.postgres"]`` (or once for the whole
suite in ``tests/conftest.py``), then ask for ``postgres_url`` (the session's database) or
``postgres_db_url`` (a new, empty database for one test, dropped after it).

How it starts: ``initdb`` into a new folder under the system temporary directory, then ``pg_ctl
start`` with the server listening only on 127.0.0.1, on a free port, and its unix socket inside that
folder. TCP logins need the random password of the session's one role (scram-sha-256); the socket
is reachable only by the cluster's owner. ``fsync`` is off: the cluster is deleted at the end. The
binaries come from ``PATH`` (``pg_ctl``), else from Debian's ``/usr/lib/postgresql/<version>/bin``
(the Makefile installs the ``postgresql`` package).

PostgreSQL refuses to run as root. When the tests run as root (a container), the cluster runs as
the system user ``clinieval-pg``, which is created once when missing (``useradd --system``, no
home, no login shell) and owns the cluster folder; pytest's own ``tmp_path`` is private to root,
so the folder is made directly under the temporary directory instead.

Without PostgreSQL (or SQLAlchemy and psycopg) the tests that need it are skipped with the reason,
and fail instead under ``CI=true``.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port, missing

PG_USER = "clinieval-pg"
"""The unprivileged system user the cluster runs as when the tests run as root."""
ROLE = "clinieval"
START_TIMEOUT_S = 60


def pg_bin_dir() -> Path:
    """The folder holding ``pg_ctl``, ``initdb`` and ``postgres``: ``PATH`` first (symbolic links
    followed, since ``pg_ctl`` looks for ``postgres`` beside its real self), then Debian's newest."""
    found = shutil.which("pg_ctl")
    candidates = [Path(found).resolve().parent] if found else []
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(debian, key=lambda p: _version(p.parent.name), reverse=True)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("pg_ctl", "initdb", "postgres")):
            return folder
    missing(
        "PostgreSQL is missing: install Debian's postgresql (`apt-get install postgresql`, `make install`)"
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)) or (0,)


@dataclass(frozen=True, slots=True)
class RunAs:
    """Who the cluster's processes run as: the current user, or ``clinieval-pg`` under root."""

    uid: int | None = None
    gid: int | None = None

    @classmethod
    def for_cluster(cls) -> RunAs:
        if os.geteuid() != 0:
            return cls()
        try:
            entry = pwd.getpwnam(PG_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                 "--shell", "/usr/sbin/nologin", PG_USER],
                check=True, capture_output=True,
            )  # fmt: skip
            entry = pwd.getpwnam(PG_USER)
        return cls(entry.pw_uid, entry.pw_gid)

    def own(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)

    def run(self, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {}
        if self.uid is not None:
            extra = {"user": self.uid, "group": self.gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **extra)


@dataclass(frozen=True, slots=True)
class Cluster:
    """A running cluster: where it lives and how to reach it."""

    root: Path
    bin: Path
    port: int
    password: str
    run_as: RunAs

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL (psycopg 3 driver) for ``database`` over TCP on 127.0.0.1."""
        return f"postgresql+psycopg://{ROLE}:{self.password}@127.0.0.1:{self.port}/{database}"

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run_as.run([str(self.bin / "pg_ctl"), "-D", str(self.data), *args], self.root)


def start_cluster(attempts: int = 3) -> Cluster:
    """initdb and start a new cluster; on failure the folder is removed and the log is in the error.

    The port is chosen free before the server binds it, so another process can take it in
    between: a start that fails on a taken port tries another one."""
    bin_dir = pg_bin_dir()
    run_as = RunAs.for_cluster()
    root = Path(tempfile.mkdtemp(prefix="clinieval-pg-"))
    try:
        run_as.own(root)
        cluster = Cluster(root, bin_dir, free_port(), secrets.token_urlsafe(18), run_as)
        _initdb(cluster)
        for attempt in range(attempts):
            try:
                _start(cluster)
                return cluster
            except PortTaken:
                if attempt == attempts - 1:
                    raise
                cluster = replace(cluster, port=free_port())
        raise AssertionError("unreachable")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


class PortTaken(RuntimeError):
    """The server could not bind its port: another process took it after it was chosen."""


def _initdb(cluster: Cluster) -> None:
    pwfile = cluster.root / "pwfile"
    pwfile.write_text(cluster.password + "\n", encoding="utf-8")
    pwfile.chmod(0o600)
    cluster.run_as.own(pwfile)
    done = cluster.run_as.run(
        [str(cluster.bin / "initdb"), "-D", str(cluster.data), "-U", ROLE, f"--pwfile={pwfile}",
         "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
         "--no-instructions"],
        cluster.root,
    )  # fmt: skip
    pwfile.unlink()
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr or done.stdout}")


def _start(cluster: Cluster) -> None:
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={cluster.port} -c unix_socket_directories={cluster.root} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    log = cluster.root / "server.log"
    done = cluster.pg_ctl("-l", str(log), "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start")
    if done.returncode != 0:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        kind = PortTaken if "Address already in use" in text else RuntimeError
        raise kind(f"pg_ctl start failed ({done.returncode}): {done.stderr}\n{text[-2000:]}")


def stop_cluster(cluster: Cluster) -> None:
    """Stop the server at once (nothing in it is kept) and delete its folder."""
    try:
        cluster.pg_ctl("-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """The session's running PostgreSQL, stopped and removed at the end."""
    try:
        import psycopg  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError as e:
        missing(f"{e.name} is not installed in the virtualenv (`make install`)")
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="session")
def postgres_url(postgres_cluster: Cluster) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://...``) of the session's database."""
    return postgres_cluster.url()


@pytest.fixture
def postgres_db_url(postgres_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database for one test (dropped afterwards, even with connections still open)."""
    import sqlalchemy

    name = "t_" + re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(4)
    admin = sqlalchemy.create_engine(postgres_cluster.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        yield postgres_cluster.url(name)
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
