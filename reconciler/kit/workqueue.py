"""A deduplicating work queue with delayed re-adds and two lanes, in the manner of client-go's.

Hand-written because no maintained Python library offers client-go's guarantees: a key queued
many times is processed once; a key is never processed by two workers at the same time (a key
added while it is being processed is queued again after `done`); a key waits for at most one
delayed re-add (the earliest). Keys that something happened to (a node appeared or changed) go
ahead of periodic resync work, so a new node is never stuck behind a 5,000-node resync.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Literal

Lane = Literal["event", "resync"]


class WorkQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lanes: dict[Lane, deque[str]] = {"event": deque(), "resync": deque()}
        self._dirty: dict[str, Lane] = {}
        """Keys waiting to be processed, and the lane they wait in."""
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        """The one pending delayed re-add per key; heap entries that disagree are stale."""
        self._counter = itertools.count()
        self._shutdown = False

    def add(self, key: str, lane: Lane = "event") -> None:
        with self._cond:
            self._add_locked(key, lane)

    def _add_locked(self, key: str, lane: Lane) -> None:
        if self._shutdown:
            return
        waiting = self._dirty.get(key)
        if waiting in ("event", lane):
            return
        # New, or moving up from the resync lane (its old entry there is skipped as stale).
        self._dirty[key] = lane
        if key not in self._processing:
            self._lanes[lane].append(key)
            self._cond.notify()

    def add_after(self, key: str, delay_seconds: float) -> None:
        """Re-add `key` after a delay; a key already due sooner keeps its earlier time."""
        if delay_seconds <= 0:
            self.add(key)
            return
        with self._cond:
            due = time.monotonic() + delay_seconds
            if self._shutdown or self._due.get(key, float("inf")) <= due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._counter), key))
            self._cond.notify()

    def get(self) -> str | None:
        """The next key to work on, or None once shut down. Call `done(key)` afterwards."""
        with self._cond:
            while True:
                self._promote_due_locked()
                if self._shutdown:
                    return None
                key = self._pop_locked()
                if key is not None:
                    return key
                timeout = self._delayed[0][0] - time.monotonic() if self._delayed else None
                self._cond.wait(timeout=timeout)

    def _pop_locked(self) -> str | None:
        for lane in ("event", "resync"):
            queue = self._lanes[lane]
            while queue:
                key = queue.popleft()
                if self._dirty.get(key) != lane or key in self._processing:
                    continue  # stale: moved to the event lane, or re-queued on `done`
                del self._dirty[key]
                self._processing.add(key)
                return key
        return None

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            lane = self._dirty.get(key)
            if lane is not None:
                self._lanes[lane].append(key)
                self._cond.notify()

    def forget(self, key: str) -> None:
        """Drop a pending delayed re-add (the node is gone)."""
        with self._cond:
            self._due.pop(key, None)

    def due_in(self, key: str) -> float | None:
        """Seconds until the key's pending delayed re-add (None if it has none)."""
        with self._cond:
            due = self._due.get(key)
            return None if due is None else due - time.monotonic()

    def _promote_due_locked(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue  # superseded by an earlier re-add, or forgotten
            del self._due[key]
            self._add_locked(key, "event")

    def __len__(self) -> int:
        """Keys waiting: ready to process now, or due later."""
        with self._cond:
            return len(self._dirty) + sum(1 for k in self._due if k not in self._dirty)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
