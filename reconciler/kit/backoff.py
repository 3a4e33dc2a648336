"""Exponential backoff with jitter, as client-go's `wait.Backoff` does for its reflectors.

Hand-written because it is a dozen lines and must take the caller's stop event and random
source (for tests); the libraries that offer it (tenacity, backoff) wrap whole calls in
decorators, which does not fit loops that must keep their own state between attempts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """800 ms doubling to 30 s, each wait stretched by up to 100 % jitter (client-go's defaults)."""

    initial_seconds: float = 0.8
    cap_seconds: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    rng: random.Random = field(default_factory=random.Random)
    _current: float = 0.0

    def next_delay(self) -> float:
        """The wait before the next attempt; each call waits longer, up to the cap."""
        base = self.initial_seconds if self._current == 0 else self._current * self.factor
        self._current = min(base, self.cap_seconds)
        return self._current * (1 + self.jitter * self.rng.random())

    def reset(self) -> None:
        """After a success: the next failure starts from the initial delay again."""
        self._current = 0.0
