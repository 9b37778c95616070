"""Finished records and answered requests, written in batches.

Writing each record and each cache entry on its own (a SQLite commit and a file flush per item)
cost more CPU than the HTTP call against a fast server. Here they are gathered and written
together: every :data:`FLUSH_INTERVAL_S` (the first finished item starts the clock) or once
:data:`MAX_BATCH` items wait, one SQLite transaction holds the batch's cache entries, then the
new long texts and the record lines are written with one call each and flushed to the OS.

The durability promise stays the one the kill-loop test holds us to: a kill loses only work in
flight, where "in flight" now also covers an item finished in the last 50 ms and not yet
written. Order matters for it: cache entries are committed first and texts before the records
that refer to them, so a kill between two writes leaves at worst an answer in the cache whose
record is rebuilt from it on resume (no request), never a record without its text.
"""

from __future__ import annotations

import asyncio
from typing import IO

import orjson

from clinieval.cache import RequestCache
from clinieval.fsutil import raise_named
from clinieval.records import SampleRecord
from clinieval.runs import RunDir
from clinieval.types import JSON

FLUSH_INTERVAL_S = 0.05
MAX_BATCH = 1000


class RunWriter:
    """The request store and results writer of one run (see the module docstring).

    As a request store (``get``/``put``) it answers from its pending batch first, then from the
    cache; a cache that was empty when the run started is not asked at all, which spares a
    fresh run one SQLite read per request."""

    def __init__(
        self,
        run: RunDir,
        cache: RequestCache,
        *,
        interval_s: float = FLUSH_INTERVAL_S,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.cache = cache
        self.interval_s = interval_s
        self.max_batch = max_batch
        self.hits = 0
        self._table = run.text_table()
        self._texts = run.open_appender(run.texts_path)
        self._records = run.open_appender()
        self._cache_empty = cache.is_empty()
        self._entries: dict[str, tuple[str, JSON]] = {}
        self._text_lines: list[bytes] = []
        self._record_lines: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None
        self._failure: BaseException | None = None
        self.written = 0

    # --- the request store ---------------------------------------------------------------------

    def get(self, key: str) -> JSON | None:
        pending = self._entries.get(key)
        if pending is not None:
            self.hits += 1
            return pending[1]
        if self._cache_empty:
            return None
        value = self.cache.get(key)
        self.hits += value is not None
        return value

    def put(self, key: str, kind: str, value: JSON) -> None:
        self._entries[key] = (kind, value)
        self._due()

    # --- records ---------------------------------------------------------------------------------

    def append(self, record: SampleRecord) -> None:
        """Queue a finished record; it reaches the disk within ``interval_s``."""
        encoded, new = self._table.encode(record.to_dict())
        self._text_lines.extend(orjson.dumps({"id": tid, "text": text}) + b"\n" for tid, text in new)
        self._record_lines.append(orjson.dumps(encoded) + b"\n")
        self._due()

    def _due(self) -> None:
        if self._failure is not None:
            raise self._failure
        if len(self._record_lines) + len(self._entries) >= self.max_batch:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.flush()
        except BaseException as e:  # raised by the next put/append or by close(), in a worker
            self._failure = e

    def flush(self) -> None:
        """Write everything pending: cache entries, then texts, then records."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._entries:
            entries, self._entries = self._entries, {}
            self.cache.put_many((key, kind, value) for key, (kind, value) in entries.items())
            self._cache_empty = False
        _write(self._texts, self._text_lines)
        count = len(self._record_lines)
        _write(self._records, self._record_lines)
        self.written += count

    def close(self) -> None:
        """Write what is pending and close the files; re-raise a failed timed write."""
        try:
            if self._failure is None:
                self.flush()
        finally:
            self._texts.close()
            self._records.close()
        if self._failure is not None:
            raise self._failure

    def abandon(self) -> None:
        """Close without writing what is pending (the run failed: nothing more is written)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._texts.close()
        self._records.close()


def _write(f: IO[str], lines: list[bytes]) -> None:
    """All ``lines`` in one write, flushed to the OS (a kill then loses none of them), and the
    list emptied; a full disk is reported with the file's name."""
    if not lines:
        return
    data = b"".join(lines).decode("utf-8")
    lines.clear()
    try:
        f.write(data)
        f.flush()
    except OSError as e:
        raise_named(e, f.name)
