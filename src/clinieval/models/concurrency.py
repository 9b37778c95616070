"""Requests in flight that follow what the server can take.

A fixed number of requests in flight is wrong for most servers: a one-slot server (llama-cpp-python's)
queues 15 of 16 requests, their waits count against the timeout, the timed-out ones are sent again
and the server evaluates the same prompts over and over; a batching server (vLLM) would take far
more. :class:`AdaptiveLimit` is additive-increase / multiplicative-decrease, as TCP and Netflix's
concurrency limiters are:

- a timeout, a 429 or a 503 halves the limit, once per round (the other requests of the same
  flood, sent under the old limit, do not halve it again);
- an answer that took more than half the timeout counts as a warning of the same kind (the
  queue is about to make requests time out);
- ``limit`` answers in a row without trouble raise the limit by one, up to the ceiling.

A request that failed waits for a free place like any other before it is sent again, so after a
halving a retry goes out only once the requests in flight have dropped below the new limit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass


@dataclass(slots=True)
class LimitStats:
    """What the limiter did during a run (for the summary and the progress line)."""

    lowest: int
    decreases: int = 0
    increases: int = 0


class AdaptiveLimit:
    """An asyncio semaphore whose size moves between 1 and ``ceiling``.

    ``release`` is synchronous, so a request cancelled mid-flight (Ctrl-C, a failed sibling)
    always gives its place back from its ``finally``.
    """

    def __init__(self, ceiling: int, *, slow_after_s: float | None = None, adaptive: bool = True) -> None:
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling
        self.in_flight = 0
        self.adaptive = adaptive
        self.slow_after_s = slow_after_s
        self.stats = LimitStats(lowest=self.limit)
        self._round = 0
        self._good = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        """Wait for a free place; returns the round the request is sent in (give it to release)."""
        while self.in_flight >= self.limit:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.in_flight += 1
        return self._round

    def release(self, sent_in: int, *, overloaded: bool, latency_s: float = 0.0) -> None:
        """Give the place back and learn from how the request went."""
        self.in_flight -= 1
        slow = self.slow_after_s is not None and latency_s > self.slow_after_s
        if self.adaptive and (overloaded or slow):
            self._decrease(sent_in)
        elif self.adaptive:
            self._increase()
        self.wake()

    def set_ceiling(self, ceiling: int) -> None:
        """A new highest limit (the server's slots, learnt after the limiter was made)."""
        self.ceiling = max(1, ceiling)
        self.limit = min(self.limit, self.ceiling)
        self.stats.lowest = min(self.stats.lowest, self.limit)

    def wake(self) -> None:
        """Let as many waiting requests go as there are free places."""
        free = self.limit - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    def _increase(self) -> None:
        self._good += 1
        if self._good >= self.limit and self.limit < self.ceiling:
            self.limit += 1
            self.stats.increases += 1
            self._good = 0

    def _decrease(self, sent_in: int) -> None:
        self._good = 0
        if sent_in != self._round or self.limit == 1:
            return  # sent under an older limit: that flood was already answered
        self.limit = max(1, self.limit // 2)
        self._round += 1
        self.stats.decreases += 1
        self.stats.lowest = min(self.stats.lowest, self.limit)

    def status(self) -> str:
        """``in flight 3/8`` for the progress line."""
        return f"in flight {self.in_flight}/{self.limit}"
