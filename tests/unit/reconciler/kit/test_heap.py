"""The reconciler's code and wiring are frozen out of the cycle collector at start, so a full
collection (a pause of every thread) walks what changes, not the imported modules."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from nodegate.reconciler.kit.heap import observe_pauses

# Run in a process of its own: freezing is for the life of a process, and pytest's is not ours.
PROBE = """
import gc, json
import nodegate.reconciler.main  # the reconciler's imports, as `nodegate reconcile` has them
from nodegate.reconciler.kit.heap import freeze_startup_objects
before = len(gc.get_objects())
frozen = freeze_startup_objects()
print(json.dumps({"before": before, "frozen": frozen, "after": len(gc.get_objects())}))
"""


def probe() -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout
    counts: dict[str, int] = json.loads(out)
    return counts


def test_startup_objects_leave_the_collectors_walk() -> None:
    counts = probe()
    assert counts["frozen"] >= counts["before"] * 0.9
    assert counts["after"] < counts["before"] // 10


def test_frozen_objects_are_still_freed_when_unreferenced() -> None:
    script = """
import gc, weakref
from nodegate.reconciler.kit.heap import freeze_startup_objects
class Cached: pass
kept = Cached(); gone = weakref.ref(kept)
freeze_startup_objects()
del kept
print(gone() is None)
"""
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "True"


def test_every_collection_is_timed_with_its_generation() -> None:
    seen: list[tuple[int, float]] = []
    stop = observe_pauses(lambda generation, seconds: seen.append((generation, seconds)))
    try:
        gc.collect(2)
    finally:
        stop()
    full = [seconds for generation, seconds in seen if generation == 2]
    assert len(full) == 1 and full[0] >= 0


def test_timing_stops_when_asked() -> None:
    seen: list[tuple[int, float]] = []
    observe_pauses(lambda generation, seconds: seen.append((generation, seconds)))()
    gc.collect(2)
    assert not [g for g, _ in seen if g == 2]
