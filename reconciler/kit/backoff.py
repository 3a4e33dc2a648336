"""Exponential backoff with jitter, as client-go's `wait.Backoff` does for its reflectors, and the
one loop every start-up read-back is retried in (`read_back`).

Hand-written because it is a dozen lines and must take the caller's stop event; the libraries
that offer it (tenacity, backoff) wrap whole calls in decorators, which does not fit loops that
must keep their own state between attempts.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from nodegate.reconciler.kit.errors import KubeError, TemporaryError


@dataclass
class Backoff:
    """800 ms doubling to 30 s, each wait stretched by up to 100 % jitter (client-go's defaults)."""

    initial_seconds: float = 0.8
    cap_seconds: float = 30.0
    _current: float = 0.0

    def next_delay(self) -> float:
        """The wait before the next attempt; each call waits longer, up to the cap."""
        base = self.initial_seconds if self._current == 0 else self._current * 2
        self._current = min(base, self.cap_seconds)
        return self._current * (1 + random.random())

    def reset(self) -> None:
        """After a success: the next failure starts from the initial delay again."""
        self._current = 0.0


READ_BACK_SECONDS = 30.0
"""How long a start-up read-back is retried before the process goes on without it."""


def read_back(
    stop: threading.Event,
    read: Callable[[], object],
    give_up: Callable[[Exception | None], None],
    *,
    retried: tuple[type[Exception], ...] = (TemporaryError,),
    stops: tuple[type[Exception], ...] = (KubeError,),
    forever: bool = False,
    on_retry: Callable[[Exception | None], None] = lambda _err: None,
) -> None:
    """What a process reads back at start before it acts (a record, the server's time): `read`
    until it returns anything but False, retried with backoff (never sooner than a
    Retry-After) while it returns False or raises one of `retried` (`on_retry` told each
    time), for `READ_BACK_SECONDS` (`forever`: until `stop`). Past them, or on one of `stops`,
    `give_up` is told why (None: `read` said False) and the process goes on without it."""
    backoff = Backoff()
    deadline = None if forever else time.monotonic() + READ_BACK_SECONDS
    while not stop.is_set():
        try:
            if read() is not False:
                return
            err: Exception | None = None
        except retried as caught:
            err = caught
        except stops as caught:
            give_up(caught)
            return
        if deadline is not None and time.monotonic() > deadline:
            give_up(err)
            return
        on_retry(err)
        stop.wait(max(backoff.next_delay(), getattr(err, "retry_after", None) or 0.0))
