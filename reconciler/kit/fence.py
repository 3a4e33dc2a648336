"""The fence that keeps a lost leader quiet: a write may start only while the last successful
renewal started less than `renew_deadline` ago, and it counts the writes in flight so a clean
hand-back can wait for them (why that makes "never two writers" hold: `leader.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nodegate.reconciler.kit.errors import (
    TemporaryError,
)

Clock = Callable[[], float]


class LeaderFence:
    """Whether this process may write now, and which writes are in flight. Without leader
    election it always may."""

    def __init__(self, renew_deadline_seconds: float | None, clock: Clock = time.monotonic) -> None:
        self._deadline = renew_deadline_seconds
        self._clock = clock
        self._valid_until = float("inf") if renew_deadline_seconds is None else 0.0
        self._in_flight = 0
        self._changed = threading.Condition()

    def renewed(self, attempt_started: float) -> None:
        """A renewal that was sent at `attempt_started` (monotonic) succeeded."""
        if self._deadline is None:
            return
        with self._changed:
            self._valid_until = max(self._valid_until, attempt_started + self._deadline)

    def revoke(self) -> None:
        """No write may start from now on (writes in flight go on: see `wait_quiet`)."""
        with self._changed:
            self._valid_until = 0.0

    def holds(self) -> bool:
        with self._changed:
            return self._clock() < self._valid_until

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around one write: refused (TemporaryError) unless the fence holds, and counted as in
        flight until it returns, so a hand-back can wait for it."""
        with self._changed:
            if not self._clock() < self._valid_until:
                raise TemporaryError("not leading: the write fence does not hold")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def wait_quiet(self, timeout: float) -> bool:
        """Wait until no write is in flight; False if some still is after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._in_flight == 0, timeout)
