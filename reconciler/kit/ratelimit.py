"""A client-side token bucket for writes (client-go's `flowcontrol.NewTokenBucketRateLimiter`).

Hand-written: fifteen lines, and it must block on the caller's stop event and take an injected
clock for tests; the PyPI limiters either poll, raise instead of waiting, or bring a storage
backend this process does not need.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """`qps` writes per second on average, at most `burst` at once."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take a token now; the seconds the caller must wait before using it (0 if none)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def wait(self, stop: threading.Event) -> float:
        """Block until a write may go; returns the seconds waited (False-y when none)."""
        delay = self.reserve()
        if delay > 0:
            stop.wait(delay)
        return delay
