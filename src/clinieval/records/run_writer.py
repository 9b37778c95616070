"""Finished records and answered requests, written in group commits.

Writing each record and each cache entry on its own (a SQLite commit and a file flush per item)
cost more CPU than the HTTP call against a fast server. Here a worker that finishes an item
queues its record (and the answers it got) and waits; one write, scheduled for the event loop's
next turn, commits every answer queued by then in one SQLite transaction and appends the new long
texts and the record lines with one call each, then releases the waiting workers. At high rates
many items finish in the same turn and share a commit; at low rates each is written at once.

Because a worker takes its next item only after its record is written, the durability promise
is unchanged: a kill loses at most the items of the workers busy at that moment (the requests in
flight, or a record in the one write under way), which the kill-loop test checks. Order matters
too: answers are committed first and texts before the records that refer to them, so a kill
between two writes leaves at worst an answer in the cache whose record is rebuilt from it on
resume (no request), never a record without its text.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import IO

import orjson

from clinieval.fsutil import raise_named
from clinieval.records.cache import RequestCache
from clinieval.records.runs import RunDir
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON


class RunWriter:
    """The request store and results writer of one run (see the module docstring).

    As a request store (``get``/``put``) it answers from its pending batch first, then from the
    cache; when the cache was empty as the run started, only keys this run has written are
    looked up there, which spares a fresh run one SQLite read per request."""

    def __init__(self, run: RunDir, cache: RequestCache) -> None:
        self.cache = cache
        self.hits = 0
        self.written = 0
        self.commits = 0
        self._table = run.text_table()
        self._texts = run.open_appender(run.texts_path)
        self._records = run.open_appender()
        self._fresh = cache.is_empty()
        self._written_keys: set[str] = set()
        self._entries: dict[str, tuple[str, JSON]] = {}
        self._text_lines: list[bytes] = []
        self._record_lines: list[bytes] = []
        self._waiting: list[asyncio.Future[None]] = []
        self._scheduled = False
        self._failure: BaseException | None = None

    # --- the request store ---------------------------------------------------------------------

    def get(self, key: str) -> JSON | None:
        pending = self._entries.get(key)
        if pending is not None:
            self.hits += 1
            return pending[1]
        if self._fresh and key not in self._written_keys:
            return None
        value = self.cache.get(key)
        self.hits += value is not None
        return value

    def put(self, key: str, kind: str, value: JSON) -> None:
        self._entries[key] = (kind, value)
        self._schedule()

    # --- records ---------------------------------------------------------------------------------

    async def write(self, record: SampleRecord) -> None:
        """Queue a finished record and return once it (and every answer queued before it) is
        written; raise what the write raised (a full disk, named)."""
        encoded, new = self._table.encode(record.to_dict())
        self._text_lines.extend(orjson.dumps({"id": tid, "text": text}) + b"\n" for tid, text in new)
        self._record_lines.append(orjson.dumps(encoded) + b"\n")
        done = asyncio.get_running_loop().create_future()
        self._waiting.append(done)
        self._schedule()
        await done

    def _schedule(self) -> None:
        if self._failure is not None:
            raise self._failure
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._commit)

    def _commit(self) -> None:
        self._scheduled = False
        waiting, self._waiting = self._waiting, []
        try:
            self.flush()
        except BaseException as e:
            self._failure = e
            for done in waiting:
                if not done.done():
                    done.set_exception(e)
                    done.exception()  # retrieved here: a cancelled worker's copy is not "lost"
            return
        for done in waiting:
            if not done.done():
                done.set_result(None)

    def flush(self) -> None:
        """Write everything pending: cache entries, then texts, then records."""
        if self._entries:
            entries, self._entries = self._entries, {}
            self.cache.put_many((key, kind, value) for key, (kind, value) in entries.items())
            if self._fresh:
                self._written_keys.update(entries)
        _write(self._texts, self._text_lines)
        count = len(self._record_lines)
        _write(self._records, self._record_lines)
        self.written += count
        self.commits += 1

    def close(self) -> None:
        """Write what is pending and close the files; re-raise a failed write."""
        if self._failure is not None:
            self.abandon()
            raise self._failure
        try:
            self.flush()
        except BaseException:
            self.abandon()
            raise
        for f in (self._texts, self._records):
            try:
                f.close()
            except OSError as e:
                raise_named(e, f.name)

    def abandon(self) -> None:
        """Close without writing what is pending (the run failed: nothing more is written).

        Closing quietly matters: after a write the disk refused, a file object may still hold
        part of it in its buffer, and closing would try again and raise a second, nameless
        error in place of the first, which names the file."""
        for f in (self._texts, self._records):
            with contextlib.suppress(OSError):
                f.close()


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
