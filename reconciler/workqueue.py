"""A deduplicating work queue with delayed re-adds, in the manner of client-go's workqueue.

Hand-written because no maintained Python library offers client-go's guarantees: a key queued
many times is processed once, and a key is never processed by two workers at the same time
(a key added while it is being processed is queued again after `done`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque


class WorkQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._counter = itertools.count()
        self._shutdown = False

    def add(self, key: str) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: str, delay_seconds: float) -> None:
        if delay_seconds <= 0:
            self.add(key)
            return
        with self._cond:
            heapq.heappush(
                self._delayed, (time.monotonic() + delay_seconds, next(self._counter), key)
            )
            self._cond.notify()

    def get(self) -> str | None:
        """The next key to work on, or None once shut down. Call `done(key)` afterwards."""
        with self._cond:
            while True:
                self._promote_due_locked()
                if self._shutdown:
                    return None
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
                self._cond.wait(timeout=timeout)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def _promote_due_locked(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
