"""The cycle collector's pauses: kept short, and timed.

CPython's full (generation 2) collection walks every tracked object and holds the GIL while it
does, so its pause is a stall of every thread: the informer's reads, the workers' writes.
Measured at 5,000 nodes (docs/benchmarks.md, "Garbage collection pauses at 5,000 nodes"): the
reconciler's modules, classes and wiring (the official client's models above all) are most of
the tracked objects (139,017, against about 7 per cached node), and none of them ever dies.
`gc.freeze()` moves them to the permanent generation, which collections skip: a full
collection then walks the node cache and what changes, not the code (the full collections of a
5,000-node cold converge paused it 2,578 ms in all, 483 ms at most, before; 1,107 and 188 ms
after).

Frozen objects are still freed when their last reference goes (freezing only hides them from
the cycle collector); a reference cycle of frozen objects that later becomes garbage is kept,
which is why this runs once, at start, over objects made to live as long as the process.

Every collection's pause is handed to a metric (`nodegate_gc_pause_seconds{generation}`), so a
full collection's cost is seen where it is paid, in production as in `make bench`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def freeze_startup_objects() -> int:
    """Collect once, then freeze what is left (the process's code and its wiring); returns the
    number of objects now in the permanent generation."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def observe_pauses(observe: Callable[[int, float], None]) -> Callable[[], None]:
    """Time every collection from now on, `observe(generation, seconds)` after each; returns
    the call that stops it. Collections run one at a time (each holds the GIL), so one start
    time is enough."""
    started = [0.0]

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            observe(int(info["generation"]), time.perf_counter() - started[0])

    gc.callbacks.append(on_collection)
    return lambda: gc.callbacks.remove(on_collection)
