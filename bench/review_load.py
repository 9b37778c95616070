"""`clinieval review` under load: scripted reviewers saving at once against one server and database.

A real server (``clinieval.review.app.serve``: uvicorn, one process, as ``clinieval review serve``
runs it) is started in a child process on 127.0.0.1 over a fresh database (SQLite in WAL mode by
default, or ``--db postgresql://...``, or ``--postgres`` for a throwaway local cluster). The
database holds ``--reviewers`` reviewers and a rank study of ``--items`` items (three answers
each), every item assigned to two reviewers, so each reviewer has ``2 * items / reviewers``
assignments of their own.

Each reviewer is one asyncio task with its own httpx client (its own cookie, so its own session
and CSRF token), logged in before the clock starts. Until ``--seconds`` have passed it repeats:
load one of its assignments (``GET /a/{id}``: version, status and token read off the page), then
post a save of that version (a draft, or with probability ``--submit`` a submission; once
submitted, every later save is a submission, as the app requires). Every save changes the
payload (the rationale carries a counter), so every accepted save must make exactly one new
version and one audit row. Work in flight when the time is up is finished, never cut off.

Afterwards the database is read directly and checked against what the clients saw:

* every save the server accepted (303) has exactly one audit row with the version it posted as
  ``old_version`` and the next as ``new_version`` (none lost, none duplicated), and no audit row
  exists that no client was told about;
* each assignment's final version equals the number of accepted saves on it.

Printed: saves per second, save and page-load latency (p50/p95/p99), stale-save refusals (409:
expected 0, since each reviewer works alone and one save at a time), errors, and the checks; the
JSON goes to bench/out/review_load-<time>.json.

    .venv/bin/python bench/review_load.py --seconds 60
    .venv/bin/python bench/review_load.py --seconds 60 --postgres
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STUDY = "load"
PASSWORD = "load-test-password"
TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
VERSION = re.compile(r'id="form-version" name="version" value="(\d+)"')
STATUS = re.compile(r'id="item-status"[^>]*data-status="(\w+)"')
LETTER = re.compile(r'<li id="answer-([A-Z]+)" class="answer"')


# --- the database and the server ------------------------------------------------------------------


def build_db(db: str, reviewers: int, items: int) -> None:
    """A fresh review database: reviewers r01.., one rank study, every item to two reviewers."""
    from clinieval.review import accounts, assigning, importing, store
    from clinieval.review.items import AnswerIn, ReviewItem

    engine = store.init_db(db)
    try:
        for i in range(1, reviewers + 1):
            accounts.add_user(engine, f"r{i:02d}", "reviewer", PASSWORD)
        record = "Progress note. " * 400  # a 6,000-character record beside every item
        batch = [
            ReviewItem(
                item=f"i{n:03d}",
                prompt=f"Summarise item {n}.",
                context=record,
                answers=tuple(AnswerIn(f"a{k}", f"model-{k}", f"answer {k} to item {n}") for k in (1, 2, 3)),
            )
            for n in range(1, items + 1)
        ]
        importing.import_items(engine, STUDY, "rank", {}, batch)
        assigning.assign(engine, STUDY, per_item=2, seed=0)
    finally:
        engine.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve_forever(db: str, port: int) -> None:
    """The child process: the app exactly as `clinieval review serve` runs it."""
    from clinieval.review import store
    from clinieval.review.app import serve

    serve(store.connect(db), "127.0.0.1", port)


def start_server(db: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", db, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                f"the server exited ({proc.returncode}):\n{log.read_text(errors='replace')[-3000:]}"
            )
        try:
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=1.0)
            return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start within 60 s")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux), None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --- one reviewer ---------------------------------------------------------------------------------------


@dataclass
class Reviewer:
    name: str
    assignments: list[int]
    rng: random.Random
    accepted: list[tuple[int, int, str]] = field(default_factory=list)
    """(assignment, version posted, action) of every save the server accepted."""
    save_ms: list[float] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)
    stale: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    """Anything else: ``HTTP <code>`` or an exception's class name."""
    counter: int = 0


async def login(client: httpx.AsyncClient, name: str) -> str:
    form = await client.get("/login")
    token = TOKEN.search(form.text)
    assert token, "no CSRF token on the login page"
    done = await client.post(
        "/login", data={"name": name, "password": PASSWORD, "csrf_token": token.group(1)}
    )
    if done.status_code != 303:
        raise SystemExit(f"login of {name} failed: {done.status_code}")
    queue = await client.get("/")
    return queue.text


def save_form(page: str, reviewer: Reviewer, submit: bool) -> dict[str, Any]:
    """A complete, valid ranking (so drafts and submissions alike are accepted), different from
    every earlier save by its rationale."""
    token, version, letters = TOKEN.search(page), VERSION.search(page), LETTER.findall(page)
    assert token and version and len(letters) == 3, "the item page lacks its form"
    reviewer.counter += 1
    form: dict[str, Any] = {
        "csrf_token": token.group(1),
        "version": version.group(1),
        "action": "submit" if submit else "save",
    }
    for rank, letter in enumerate(letters, 1):
        form[f"rank-{letter}"] = str(rank)
        form[f"correct-{letter}"] = "correct" if rank < 3 else "incorrect"
    form[f"reasons-{letters[-1]}"] = "C2"
    form[f"rationale-{letters[-1]}"] = f"{reviewer.name} save {reviewer.counter}"
    return form


async def work(
    base: str,
    reviewer: Reviewer,
    logged_in: Callable[[], None],
    start: asyncio.Event,
    deadline: list[float],
    p_submit: float,
) -> None:
    """One reviewer: log in, wait for the start, then load and save until the deadline."""
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(
        base_url=base, timeout=60.0, limits=limits, follow_redirects=False
    ) as client:
        await login(client, reviewer.name)
        logged_in()
        await start.wait()
        turn = 0
        while time.perf_counter() < deadline[0]:
            aid = reviewer.assignments[turn % len(reviewer.assignments)]
            turn += 1
            try:
                t0 = time.perf_counter()
                page = await client.get(f"/a/{aid}")
                reviewer.load_ms.append((time.perf_counter() - t0) * 1000)
                if page.status_code != 200:
                    reviewer.refused[f"load HTTP {page.status_code}"] += 1
                    continue
                status = STATUS.search(page.text)
                submit = (
                    status is not None and status.group(1) == "submitted"
                ) or reviewer.rng.random() < p_submit
                form = save_form(page.text, reviewer, submit)
                t0 = time.perf_counter()
                done = await client.post(f"/a/{aid}", data=form)
                reviewer.save_ms.append((time.perf_counter() - t0) * 1000)
            except httpx.HTTPError as e:
                reviewer.refused[type(e).__name__] += 1
                continue
            if done.status_code == 303:
                reviewer.accepted.append((aid, int(form["version"]), form["action"]))
            elif done.status_code == 409:
                reviewer.stale += 1
            else:
                reviewer.refused[f"save HTTP {done.status_code}"] += 1


# --- the checks -------------------------------------------------------------------------------------------


def check(db: str, reviewers: list[Reviewer]) -> dict[str, Any]:
    """Compare what the clients were told with the assignments and the audit table."""
    from sqlalchemy import select

    from clinieval.review import store
    from clinieval.review.db import ACTIONS, Assignment, Audit, read_session

    engine = store.connect(db)
    try:
        with read_session(engine) as s:
            versions = {aid: v for aid, v in s.execute(select(Assignment.id, Assignment.version)).all()}
            # saves and submissions (the trail also records sign-ins and the setup's imports), which
            # always name their assignment and versions: a row without them would count as lost
            saves = select(Audit.assignment_id, Audit.old_version, Audit.new_version, Audit.action)
            audit = [
                (aid, old, new, action)
                for aid, old, new, action in s.execute(saves.where(Audit.action.in_(ACTIONS))).all()
                if aid is not None and old is not None and new is not None
            ]
    finally:
        engine.dispose()
    told = Counter((aid, v, action) for r in reviewers for aid, v, action in r.accepted)
    rows = Counter((aid, old, action) for aid, old, _new, action in audit)
    same_version = Counter((aid, old) for aid, old, _new, _action in audit)
    per_assignment = Counter(aid for r in reviewers for aid, _v, _a in r.accepted)
    return {
        "accepted_saves": sum(told.values()),
        "audit_rows": len(audit),
        "lost": sum((told - rows).values()),  # accepted, but no audit row
        # two accepted saves of one version, or two audit rows from one version
        "duplicated": sum(n - 1 for n in told.values()) + sum(n - 1 for n in same_version.values()),
        "unacknowledged": sum((rows - told).values()),  # an audit row no client was told about
        "audit_steps_not_plus_one": sum(1 for _aid, old, new, _a in audit if new != old + 1),
        "assignments": len(versions),
        "assignments_saved": len(per_assignment),
        "assignments_version_mismatch": sum(
            1 for aid, v in versions.items() if v != per_assignment.get(aid, 0)
        ),
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def latency(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "mean_ms": statistics.fmean(values) if values else None,
        **{f"p{q}_ms": percentile(values, q) for q in (50, 95, 99)},
        "max_ms": max(values) if values else None,
    }


# --- main -------------------------------------------------------------------------------------------------


def assignments_of(db: str) -> dict[str, list[int]]:
    from sqlalchemy import select

    from clinieval.review import store
    from clinieval.review.db import Assignment, User, read_session

    engine = store.connect(db)
    try:
        with read_session(engine) as s:
            rows = s.execute(
                select(User.name, Assignment.id)
                .join(User, User.id == Assignment.user_id)
                .order_by(Assignment.id)
            ).all()
    finally:
        engine.dispose()
    out: dict[str, list[int]] = {}
    for name, aid in rows:
        out.setdefault(name, []).append(aid)
    return out


async def drive(
    base: str, reviewers: list[Reviewer], seconds: float, p_submit: float, mark: Callable[[str], None]
) -> float:
    """Log every reviewer in, then start them all at once; the seconds until the last one stops.
    ``mark("start")`` and ``mark("end")`` are called at the two ends of the timed run."""
    start, ready = asyncio.Event(), asyncio.Event()
    deadline = [float("inf")]
    logged_in = [0]

    def one_more() -> None:
        logged_in[0] += 1
        if logged_in[0] == len(reviewers):
            ready.set()

    tasks = [asyncio.create_task(work(base, r, one_more, start, deadline, p_submit)) for r in reviewers]
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():  # a task ended before every login: its exception says why
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise next(e for t in tasks if not t.cancelled() and (e := t.exception()) is not None)
    mark("start")
    t0 = time.perf_counter()
    deadline[0] = t0 + seconds
    start.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - t0
    mark("end")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--items", type=int, default=50, help="items in the study (each to two reviewers)")
    parser.add_argument(
        "--submit", type=float, default=0.02, help="chance that a save of a draft is a submission"
    )
    parser.add_argument("--db", help="a PostgreSQL URL (an empty database); default a new SQLite file")
    parser.add_argument(
        "--postgres", action="store_true", help="start a throwaway PostgreSQL cluster for the run"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # the child process: serve this database
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever(args.serve, args.port)
        return

    with ExitStack() as stack:
        tmp = Path(tempfile.mkdtemp(prefix="review-load-"))
        stack.callback(shutil.rmtree, tmp, True)
        if args.postgres:
            sys.path.insert(0, str(ROOT))
            from tests.postgres import start_cluster, stop_cluster

            cluster = start_cluster()
            stack.callback(stop_cluster, cluster)
            db, backend = cluster.url(), "postgresql (throwaway local cluster, fsync off)"
        elif args.db:
            db, backend = args.db, "postgresql"
        else:
            db, backend = str(tmp / "review.sqlite"), "sqlite (WAL, synchronous=FULL)"
        t = time.perf_counter()
        build_db(db, args.reviewers, args.items)
        print(f"database built in {time.perf_counter() - t:.1f} s: {backend}")
        port = free_port()
        server = start_server(db, port, tmp / "server.log")
        stack.callback(stop_server, server)
        rng = random.Random(args.seed)
        owned = assignments_of(db)
        reviewers = [Reviewer(name, owned[name], random.Random(rng.random())) for name in sorted(owned)]
        load_before = os.getloadavg()
        marks: dict[str, tuple[float | None, float]] = {}

        def mark(when: str) -> None:
            marks[when] = (cpu_seconds(server.pid), time.process_time())

        base = f"http://127.0.0.1:{port}"
        elapsed = asyncio.run(drive(base, reviewers, args.seconds, args.submit, mark))
        (server0, clients0), (server1, clients1) = marks["start"], marks["end"]
        cpu_used = {
            "server_s": None if server0 is None or server1 is None else server1 - server0,
            "clients_s": clients1 - clients0,
        }
        stop_server(server)
        checks = check(db, reviewers)

    saves = [ms for r in reviewers for ms in r.save_ms]
    loads = [ms for r in reviewers for ms in r.load_ms]
    accepted = sum(len(r.accepted) for r in reviewers)
    submits = sum(1 for r in reviewers for _a, _v, action in r.accepted if action == "submit")
    errors = sum((sum(r.refused.values()) for r in reviewers), 0)
    result = {
        "args": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("serve", "port")
        },
        "backend": backend,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_before": load_before,
            "load_avg_after": os.getloadavg(),
        },
        "elapsed_s": elapsed,
        "cpu": cpu_used,
        "cpu_note": "CPU seconds over the timed run: the server process, and this one (the clients)",
        "saves_accepted": accepted,
        "submissions_accepted": submits,
        "saves_per_s": accepted / elapsed,
        "pages_per_s": len(loads) / elapsed,
        "save_latency": latency(saves),
        "page_latency": latency(loads),
        "stale_refusals": sum(r.stale for r in reviewers),
        "errors": errors,
        "error_kinds": dict(sum((r.refused for r in reviewers), Counter())),
        "per_reviewer_saves": {r.name: len(r.accepted) for r in reviewers},
        "checks": checks,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"review_load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))
    print(f"JSON: {path}")
    ok = checks["lost"] == checks["duplicated"] == checks["unacknowledged"] == 0
    ok = ok and checks["assignments_version_mismatch"] == checks["audit_steps_not_plus_one"] == 0
    if not ok or errors:
        raise SystemExit("FAILED: see the checks above")


def table(r: dict[str, Any]) -> str:
    def ms(d: dict[str, Any], key: str) -> str:
        return "-" if d[key] is None else f"{d[key]:.1f}"

    def cpu(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    s, p, c = r["save_latency"], r["page_latency"], r["checks"]
    per = list(r["per_reviewer_saves"].values())
    lines = [
        f"{r['args']['reviewers']} reviewers for {r['elapsed_s']:.1f} s against {r['backend']}",
        f"{'saves accepted':<37}{r['saves_accepted']} ({r['submissions_accepted']} submissions)",
        f"{'saves per second':<37}{r['saves_per_s']:.1f}",
        f"{'item pages per second':<37}{r['pages_per_s']:.1f}",
        f"{'saves per reviewer (min-max)':<37}{min(per)}-{max(per)}",
        f"{'save latency p50 / p95 / p99 (ms)':<37}{ms(s, 'p50_ms')} / {ms(s, 'p95_ms')} / {ms(s, 'p99_ms')}"
        f" (max {ms(s, 'max_ms')})",
        f"{'page latency p50 / p95 / p99 (ms)':<37}{ms(p, 'p50_ms')} / {ms(p, 'p95_ms')} / {ms(p, 'p99_ms')}",
        f"{'stale-save refusals (409)':<37}{r['stale_refusals']}",
        f"{'CPU s: server / clients':<37}{cpu(r['cpu']['server_s'])} / {cpu(r['cpu']['clients_s'])}"
        f" (over {r['elapsed_s']:.0f} s)",
        f"{'errors':<37}{r['errors']} {r['error_kinds'] or ''}",
        f"{'audit rows':<37}{c['audit_rows']}",
        f"{'lost / duplicated / unacknowledged':<37}{c['lost']} / {c['duplicated']} / {c['unacknowledged']}",
        f"{'final version != accepted saves':<37}{c['assignments_version_mismatch']} of {c['assignments']}"
        f" assignments ({c['assignments_saved']} saved)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
