"""The API server's clock, read once and then advanced by this process's monotonic clock.

Why not the wall clock: the eviction budget counts windows across processes (a restart, a new
leader), and a host's clock steps (NTP, a paused VM) and differs from another host's. Anchored on
the API server's `Date`, every replica reads the same time to within a second, and within a
process a step of the wall clock cannot move it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from nodegate.reconciler.kit.errors import KubeError

DATE_RESOLUTION = timedelta(seconds=1)
"""`Date` has whole seconds: the server's time was somewhere in the second it names."""


class NotAnchoredError(RuntimeError):
    """The API server's time has not been read yet."""


class AnchoredClock:
    def __init__(
        self, server_time: Callable[[], datetime], monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._server_time = server_time
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._anchor: tuple[datetime, float] | None = None

    def anchor(self) -> None:
        """Read (or read again) the API server's time (KubeError when it cannot be reached):
        the middle of the second its `Date` names, at the middle of the round trip, so the
        reading is within half a second and half the round trip of the server's own."""
        before = self._monotonic()
        server = self._server_time()
        after = self._monotonic()
        reading, at = server + DATE_RESOLUTION / 2, (before + after) / 2
        with self._lock:
            if self._anchor is not None:
                # Read again (to follow the server across a suspend, or drift): never back,
                # or a moment this process already dated would come again.
                ahead = self._anchor[0] + timedelta(seconds=at - self._anchor[1])
                reading = max(reading, ahead)
            self._anchor = (reading, at)

    @property
    def anchored(self) -> bool:
        with self._lock:
            return self._anchor is not None

    def now(self) -> datetime:
        """The API server's time now; NotAnchoredError before `anchor` succeeded."""
        with self._lock:
            anchor = self._anchor
        if anchor is None:
            raise NotAnchoredError("the API server's time has not been read yet")
        server, at = anchor
        return server + timedelta(seconds=self._monotonic() - at)

    def follow(self, stop: threading.Event, every_seconds: float = 300.0) -> None:
        """Read the server's time now and every `every_seconds` until `stop` (for a part of
        the process that must never wait for it on its own path: the webhook's reviews)."""
        while True:
            with contextlib.suppress(KubeError):
                self.anchor()
            if stop.wait(every_seconds if self.anchored else min(every_seconds, 5.0)):
                return

    def now_or_host(self) -> datetime:
        """The API server's time once anchored; before that (the API server not reached yet,
        so nothing is written either) this host's."""
        return self.now() if self.anchored else datetime.now(UTC)
