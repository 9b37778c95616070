"""The one request cache every model call goes through.

Keyed by model identity, request kind, sampling settings, the full prompt and the repeat index,
so that (a) killing a run anywhere and re-running it never pays for an answered request twice,
and (b) repeats of the same prompt (judge repeats, epochs) are distinct requests.

SQLite in WAL mode: one file, crash-safe, readable by other tools while a run is writing.
Transient failures (timeouts, 5xx, dropped connections) are not cached, so a resumed run asks
again; deterministic outcomes such as a content-filter refusal are, so a resume does not.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import orjson

from clinieval.types import JSON

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""


_SQLITE_STORAGE = (
    ("database or disk is full", errno.ENOSPC),
    ("readonly database", errno.EROFS),
    ("unable to open database file", errno.EACCES),
)
"""SQLite's messages for a write the disk refused, and the errno a plain file write would give."""


def request_key(kind: str, model: JSON, settings: JSON, prompt: Any, repeat: int) -> str:
    """A stable hash of everything that decides a request's answer.

    The canonical form is ``json.dumps`` of the five fields with sorted keys, no spaces and
    ``ensure_ascii=False``, and it must never change: it keys every cache already on disk. It is
    written by orjson, several times faster, wherever orjson writes the very same bytes: strings
    (a test compares every code point), integers, booleans, null, and floats whose ``repr`` has
    no exponent (0 and 1e-4 <= |x| < 1e15; a test compares millions); anything else goes through
    ``json`` as before."""
    canonical = b"".join(
        (
            b'{"kind":',
            _canonical(kind),
            b',"model":',
            _remembered(model),
            b',"prompt":',
            _canonical(prompt),
            b',"repeat":',
            _canonical(repeat),
            b',"settings":',
            _canonical(settings),
            b"}",
        )
    )
    return hashlib.sha256(canonical).hexdigest()


_SEEN: dict[int, tuple[Any, bytes]] = {}


def _remembered(value: Any) -> bytes:
    """``_canonical`` of a model identity, remembered per object: a run asks with the same
    identity dict thousands of times (CachedCalls reads it once). Held by reference, so an id is
    never reused while remembered; an identity is never changed once made (settings dicts, which
    callers build and may change, are not remembered)."""
    seen = _SEEN.get(id(value))
    if seen is not None and seen[0] is value:
        return seen[1]
    if len(_SEEN) >= 256:
        _SEEN.clear()
    text = _canonical(value)
    _SEEN[id(value)] = (value, text)
    return text


def _canonical(value: Any) -> bytes:
    if _same_in_orjson(value):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _same_in_orjson(value: Any) -> bool:
    """Whether orjson writes ``value`` exactly as ``json.dumps`` does (see request_key)."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    if isinstance(value, float):
        return value == 0.0 or 1e-4 <= abs(value) < 1e15
    if isinstance(value, list):
        return all(_same_in_orjson(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _same_in_orjson(v) for k, v in value.items())
    return False


class RequestStore(Protocol):
    """Where answered requests are looked up and kept: the cache itself, or a run's batching
    writer in front of it (clinieval.records.run_writer)."""

    def get(self, key: str) -> JSON | None: ...

    def put(self, key: str, kind: str, value: JSON) -> None: ...


class RequestCache:
    """A persistent key → JSON map of answered model requests."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._storage():
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode survives a process kill; only an OS crash may lose the last commits.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0

    @contextmanager
    def _storage(self) -> Iterator[None]:
        """SQLite's refusals to write, as the OSError a file write would raise (with the cache's
        path), so the command line reports a full or read-only disk the same way for every file."""
        try:
            yield
        except sqlite3.OperationalError as e:
            text = str(e).lower()
            code = next((c for phrase, c in _SQLITE_STORAGE if phrase in text), None)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), str(self.path)) from e

    def get(self, key: str) -> JSON | None:
        row = self._db.execute("SELECT value FROM requests WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        value: JSON = orjson.loads(row[0])
        return value

    def put(self, key: str, kind: str, value: JSON) -> None:
        with self._storage():
            self._db.execute(
                "INSERT OR REPLACE INTO requests (key, kind, value, created) VALUES (?, ?, ?, ?)",
                (key, kind, json.dumps(value, ensure_ascii=False), time.time()),
            )

    def put_many(self, entries: Iterable[tuple[str, str, JSON]]) -> None:
        """Store (key, kind, value) entries in one transaction: one commit for a whole batch of
        answers instead of one each (see clinieval.records.run_writer)."""
        now = time.time()
        rows = [(key, kind, orjson.dumps(value).decode("utf-8"), now) for key, kind, value in entries]
        with self._storage():
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO requests (key, kind, value, created) VALUES (?, ?, ?, ?)", rows
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def is_empty(self) -> bool:
        return self._db.execute("SELECT 1 FROM requests LIMIT 1").fetchone() is None

    def __len__(self) -> int:
        row = self._db.execute("SELECT COUNT(*) FROM requests").fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()
