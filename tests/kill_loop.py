"""Kill a clinieval command with SIGKILL at seeded random moments, rerunning it each time.

The reliability suite (issue 13) asks that a run, a judge pass and a dataset build survive
``kill -9`` at any moment: each attempt below starts the real command as a subprocess, picks its
moment from a seeded ``random.Random`` (either a time after the process started, which lands in
start-up, loading and the first writes, or a time after the server saw the attempt's first
request, which lands among requests in flight, cache writes and result lines), kills it there and
starts it again, until ``kills`` attempts have been killed; then the command runs to the end.

Timing is real, so where exactly a kill lands varies from machine to machine; the seed fixes the
delays, and every attempt records what it saw so the test and the reliability page can say how
many kills landed while requests were in flight.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.fault_server import FaultServer

STARTUP_SHARE = 0.25
"""Share of attempts killed at a time after process start rather than after the first request."""


@dataclass(frozen=True)
class Attempt:
    """One start of the command: when it was killed (None: it finished) and what the server saw."""

    moment: str
    at_startup: bool
    killed: bool
    requests: int
    returncode: int


@dataclass
class KillLoop:
    """Every attempt of one loop, the final (unkilled) attempt last."""

    attempts: list[Attempt] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return sum(a.killed for a in self.attempts)

    @property
    def kills_among_requests(self) -> int:
        """Kills that landed after the server had seen a request from that attempt."""
        return sum(a.killed and a.requests > 0 for a in self.attempts)

    @property
    def kills_at_startup_draws(self) -> int:
        """Kills whose moment was drawn as a time after process start (start-up, loading)."""
        return sum(a.killed and a.at_startup for a in self.attempts)

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]


def _wait_for_request(proc: subprocess.Popen[bytes], server: FaultServer, before: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while len(server.log.received) == before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)


def _one_attempt(
    cmd: Sequence[str],
    server: FaultServer,
    rng: random.Random | None,
    log: Path,
    after_request: tuple[float, float],
    startup: tuple[float, float],
) -> Attempt:
    """Start the command; with ``rng``, kill it at a drawn moment, else let it finish."""
    before = len(server.log.received)
    with log.open("ab") as err:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=err)
        moment, at_startup = "to the end", False
        if rng is not None:
            at_startup = rng.random() < STARTUP_SHARE
            if at_startup:
                delay = rng.uniform(*startup)
                moment = f"{delay:.3f} s after start"
            else:
                delay = rng.uniform(*after_request)
                _wait_for_request(proc, server, before, limit=60.0)
                moment = f"{delay:.3f} s after the first request"
            time.sleep(delay)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        code = proc.wait(timeout=300)
    return Attempt(moment, at_startup, code == -signal.SIGKILL, len(server.log.received) - before, code)


def kill_loop(
    cmd: Sequence[str],
    server: FaultServer,
    *,
    kills: int,
    seed: int,
    log: Path,
    after_request: tuple[float, float] = (0.0, 0.3),
    startup: tuple[float, float] = (0.05, 1.5),
    after_kill: Callable[[], None] | None = None,
) -> KillLoop:
    """Kill ``cmd`` ``kills`` times at seeded moments (``after_kill`` runs after each: checks on
    what the dead process left), then run it to the end. Stops early if the command finishes
    before being killed; the caller asserts how many kills landed. ``log`` collects stderr."""
    rng = random.Random(seed)
    loop = KillLoop()
    while loop.kills < kills:
        attempt = _one_attempt(cmd, server, rng, log, after_request, startup)
        loop.attempts.append(attempt)
        if not attempt.killed:
            return loop  # finished before its moment came
        if after_kill is not None:
            after_kill()
    loop.attempts.append(_one_attempt(cmd, server, None, log, after_request, startup))
    return loop
