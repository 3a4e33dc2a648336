"""Pure arithmetic over measured samples: percentiles, ratios, and how they are printed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (the smallest sample with at least p% of samples at or below
    it): always a value that was measured, never an interpolation between two."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    ordered = sorted(samples)
    return ordered[math.ceil(p / 100 * len(ordered)) - 1]


@dataclass(frozen=True)
class Latency:
    """A latency distribution in seconds; `missing` changes never reached their taint state."""

    samples: tuple[float, ...]
    missing: int = 0

    @property
    def count(self) -> int:
        return len(self.samples)

    def p(self, q: float) -> float:
        return percentile(self.samples, q)

    def cell(self, percentiles: tuple[int, ...] = (50, 95, 99)) -> str:
        """`p50 / p95 / p99` (or the `percentiles` asked) in ms, plus what did not arrive."""
        if not self.samples:
            return "none arrived" if self.missing else "-"
        text = " / ".join(f"{self.p(q) * 1000:.0f}" for q in percentiles)
        return text + (f" ({self.missing} missing)" if self.missing else "")


def ratio(ours: float | None, theirs: float | None, *, lower_is_better: bool = True) -> str:
    """How many times better nodegate is (`3.2x`), or `-` when either side is missing/zero."""
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return "-"
    times = theirs / ours if lower_is_better else ours / theirs
    return f"{times:.1f}x"
