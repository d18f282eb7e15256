"""A rate-limited work queue of object keys, in the manner of client-go's workqueue.

Usage::

    q = WorkQueue(QueueSettings())
    q.add(("ns", "job"))                 # a watch event: now
    q.add_after(("ns", "job"), 10.0)     # the per-job timer: on the policy's interval
    q.add_rate_limited(key)              # a failed reconcile: per-key exponential backoff
    key = q.get(timeout=1.0)             # a worker takes it; the key is "processing"
    ...; q.forget(key); q.done(key)      # success: reset its backoff; release it

A key is held at most once in the queue, and never by two workers at a time: an add while the
key is processing marks it dirty, and ``done`` puts it back. Delayed adds keep the earliest due
time. A token bucket bounds the overall rate of rate-limited retries.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

Key = Hashable


@dataclass(frozen=True)
class QueueSettings:
    """Backoff and rate limits of the queue."""

    base_delay_seconds: float = 0.5
    """First retry of a failing key: soon enough for a 409 conflict, which usually clears at
    once (client-go uses 5 ms; our reconcile costs a few HTTP calls, so 0.5 s)."""
    max_delay_seconds: float = 60.0
    """Backoff ceiling: a job whose runner is gone is retried at least once a minute."""
    retry_qps: float = 20.0
    """Overall rate of rate-limited retries, so 1,000 failing jobs do not hammer the API server."""
    retry_burst: int = 100


class WorkQueue:
    """Keys to reconcile: deduplicated, delayed, backed off, one worker per key."""

    def __init__(
        self, settings: QueueSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings or QueueSettings()
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: list[Key] = []
        self._queued: set[Key] = set()
        self._processing: set[Key] = set()
        self._dirty: set[Key] = set()
        self._delayed: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._seq = 0
        self._failures: dict[Key, int] = {}
        self._tokens = float(self.settings.retry_burst)
        self._tokens_at = clock()
        self._shutdown = False

    def add(self, key: Key) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: Key) -> None:
        if self._shutdown:
            return
        self._due.pop(key, None)  # an immediate add supersedes a pending delayed one
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: Key, delay: float) -> None:
        """Adds ``key`` after ``delay`` seconds; an earlier pending due time wins."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            due = self._clock() + delay
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._delayed, (due, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: Key) -> float:
        """Re-adds a failed key after its backoff (and the overall bucket); returns the delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
            backoff = min(
                self.settings.base_delay_seconds * (2.0**n), self.settings.max_delay_seconds
            )
            now = self._clock()
            self._tokens = min(
                float(self.settings.retry_burst),
                self._tokens + (now - self._tokens_at) * self.settings.retry_qps,
            )
            self._tokens_at = now
            self._tokens -= 1.0
            bucket = max(0.0, -self._tokens / self.settings.retry_qps)
        delay = max(backoff, bucket)
        self.add_after(key, delay)
        return delay

    def failures(self, key: Key) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: Key) -> None:
        """Resets ``key``'s backoff (after a successful reconcile)."""
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout: float | None = None) -> Key | None:
        """The next due key, marked processing; None on timeout or shutdown."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                self._promote_due()
                if self._queue:
                    key = self._queue.pop(0)
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                wait = self._next_wait(deadline)
                if wait is not None and wait <= 0:
                    return None
                self._cond.wait(wait)

    def _promote_due(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self._add_locked(key)

    def _next_wait(self, deadline: float | None) -> float | None:
        now = self._clock()
        waits = []
        if self._delayed:
            waits.append(self._delayed[0][0] - now)
        if deadline is not None:
            waits.append(deadline - now)
        # a fake clock does not advance while we sleep: never block longer than a beat
        return min([*waits, 1.0]) if waits else 1.0

    def done(self, key: Key) -> None:
        """Releases ``key``; if it was added while processing, it is queued again."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self._add_locked(key)

    def pending(self, key: Key) -> float | None:
        """The due time of a delayed add of ``key`` (queue clock), if any."""
        with self._cond:
            return self._due.get(key)

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def delayed(self) -> int:
        with self._cond:
            return len(self._due)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
