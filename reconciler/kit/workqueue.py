"""A deduplicating work queue with delayed re-adds, per-key retry state and two lanes, in the
manner of client-go's `util/workqueue` (its rate-limiting, delaying and plain queues in one).

Hand-written because no maintained Python library offers client-go's guarantees: a key queued
many times is processed once; a key is never processed by two workers at the same time (a key
added while it is being processed is queued again after `done`); a key waits for at most one
delayed re-add (the earliest). Keys that something happened to (a node appeared or changed) go
ahead of periodic resync work, so a new node is never stuck behind a 5,000-node resync; one key
in eight still comes from the resync lane, so changing nodes cannot starve the resync either.

Retry state lives here, not in the caller (client-go's `AddRateLimited`, `Forget`): each
failing key backs off on its own, and `forget` ends it. How long each key waited, from its
queueing (or its move up to the event lane) to a worker taking it, is told to `on_wait` by lane
(client-go's `queue_duration_seconds`): in a storm, the share of a change's latency spent
behind other nodes, against the reconcile's own time.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

from nodegate.reconciler.kit.backoff import Backoff

Lane = Literal["event", "resync"]

log = logging.getLogger(__name__)

MAX_DELAY_SECONDS = 24 * 3600.0
"""The longest a delayed re-add waits: a plan may name a moment centuries out (times a node
writes, such as a condition's lastTransitionTime, feed it), and a thread cannot wait past
`threading.TIMEOUT_MAX` (~292 years; longer raises OverflowError and kills the worker). A key
re-added after a day is simply planned again."""


RESYNC_SHARE = 8
"""One key in this many is taken from the resync lane ahead of changed nodes, if it has any."""


class WorkQueue:
    def __init__(
        self, on_wait: Callable[[Lane, float], None] = lambda _lane, _seconds: None
    ) -> None:
        self._on_wait = on_wait
        self._retries: dict[str, tuple[int, Backoff]] = {}
        """Keys that failed since they last succeeded: how often, and their backoff."""
        self._cond = threading.Condition()
        self._lanes: dict[Lane, deque[str]] = {"event": deque(), "resync": deque()}
        self._dirty: dict[str, Lane] = {}
        """Keys waiting to be processed, and the lane they wait in."""
        self._queued_at: dict[str, float] = {}
        """When each key in `_dirty` entered its lane (monotonic)."""
        self._processing: set[str] = set()
        self._resync_waiting = 0
        """Keys waiting in the resync lane (`_dirty` entries whose lane is "resync")."""
        self._resyncing: set[str] = set()
        """Keys being worked on that were taken from the resync lane."""
        self._delayed: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        """The one pending delayed re-add per key; heap entries that disagree are stale."""
        self._counter = itertools.count()
        self._pops = 0
        self._shutdown = False

    def add(self, key: str, lane: Lane = "event") -> None:
        with self._cond:
            self._add_locked(key, lane)

    def _add_locked(self, key: str, lane: Lane, since: float | None = None) -> None:
        """`since`: when the key became ready, if earlier than now (a delayed re-add's due
        time: it waits for a worker from then, not from the next `get` that promotes it)."""
        if self._shutdown:
            return
        waiting = self._dirty.get(key)
        if waiting in ("event", lane):
            return
        # New, or moving up from the resync lane (its old entry there is skipped as stale).
        if waiting == "resync":
            self._resync_waiting -= 1
        if lane == "resync":
            self._resync_waiting += 1
        self._dirty[key] = lane
        self._queued_at[key] = time.monotonic() if since is None else since
        if key not in self._processing:
            self._lanes[lane].append(key)
            self._cond.notify()

    def add_after(self, key: str, delay_seconds: float) -> None:
        """Re-add `key` after a delay; a key already due sooner keeps its earlier time."""
        if delay_seconds <= 0:
            self.add(key)
            return
        with self._cond:
            due = time.monotonic() + min(delay_seconds, MAX_DELAY_SECONDS)
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
        # Every RESYNC_SHARE-th key comes from the resync lane when it has one, so changing
        # nodes (16 that change while being worked on would do) cannot starve the resync.
        self._pops += 1
        order: tuple[Lane, Lane] = (
            ("resync", "event") if self._pops % RESYNC_SHARE == 0 else ("event", "resync")
        )
        for lane in order:
            queue = self._lanes[lane]
            while queue:
                key = queue.popleft()
                if self._dirty.get(key) != lane or key in self._processing:
                    continue  # stale: moved to the event lane, or re-queued on `done`
                del self._dirty[key]
                waited = time.monotonic() - self._queued_at.pop(key)
                self._processing.add(key)
                if lane == "resync":
                    self._resync_waiting -= 1
                    self._resyncing.add(key)
                self._tell_wait(lane, waited)
                return key
        return None

    def _tell_wait(self, lane: Lane, seconds: float) -> None:
        """`on_wait`, whose failure is only logged: raised here, under the lock, it would lose
        the key just taken and kill the worker taking it."""
        try:
            self._on_wait(lane, seconds)
        except Exception:
            log.exception("the queue wait could not be told")

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            self._resyncing.discard(key)
            lane = self._dirty.get(key)
            if lane is not None:
                self._lanes[lane].append(key)
                self._cond.notify()

    def add_rate_limited(self, key: str, at_least: float = 0.0) -> float:
        """Re-add a key that failed, after its own backoff (and not before `at_least` seconds,
        a server's Retry-After); returns the delay chosen."""
        with self._cond:
            # A failing key waits 1 s, doubling to 30 s, each wait stretched by up to 100 % jitter.
            count, backoff = self._retries.get(key) or (0, Backoff(initial_seconds=1.0))
            self._retries[key] = (count + 1, backoff)
            delay = max(backoff.next_delay(), at_least)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """The key succeeded (or will never be retried): its next failure starts afresh."""
        with self._cond:
            self._retries.pop(key, None)

    def discard(self, key: str) -> None:
        """The key's object is gone: drop its retry state and any pending delayed re-add."""
        with self._cond:
            self._retries.pop(key, None)
            self._due.pop(key, None)

    def _promote_due_locked(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue  # superseded by an earlier re-add, or forgotten
            del self._due[key]
            self._add_locked(key, "event", since=due)

    def __len__(self) -> int:
        """Keys waiting: ready to process now, or due later."""
        with self._cond:
            return len(self._dirty) + sum(1 for k in self._due if k not in self._dirty)

    def busy(self) -> bool:
        """Whether any key is ready now or being worked on (keys due later do not count)."""
        with self._cond:
            return bool(self._dirty or self._processing)

    def resync_pending(self) -> bool:
        """Whether keys queued in the resync lane are still waiting or being worked on. Keys
        that changed meanwhile moved up to the event lane and do not count, so a node that
        never stops changing cannot keep a resync from finishing."""
        with self._cond:
            return bool(self._resync_waiting or self._resyncing)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
