"""The queue's wait for a worker (`on_wait`, nodegate_queue_wait_seconds) where b3c8ad4 left it
wrong: told while the key's bookkeeping was half done (an observer that raised lost the key and
the worker), and for a delayed re-add, counted from the next `get` that promoted it rather
than from when it was due (while every worker is busy, nobody promotes it)."""

from __future__ import annotations

import time

from nodegate.reconciler.kit.workqueue import Lane, WorkQueue


def test_an_observer_that_fails_loses_no_key_and_stops_no_worker() -> None:
    told: list[Lane] = []

    def observe(lane: Lane, _seconds: float) -> None:
        told.append(lane)
        if len(told) == 1:
            raise RuntimeError("metrics backend down")

    queue = WorkQueue(on_wait=observe)
    queue.add("periodic", "resync")

    assert queue.get() == "periodic"  # raised out of `get`: the worker died, the key was lost
    assert queue.resync_pending()
    queue.done("periodic")
    assert not queue.resync_pending()  # the resync it belonged to can finish
    queue.add("changed")
    assert queue.get() == "changed"
    assert told == ["resync", "event"]


def test_a_delayed_re_add_waits_from_when_it_was_due() -> None:
    waits: list[float] = []
    queue = WorkQueue(on_wait=lambda _lane, seconds: waits.append(seconds))
    queue.add_after("retry", 0.05)
    time.sleep(0.3)  # every worker busy meanwhile: no `get` promotes it when it is due

    assert queue.get() == "retry"
    assert waits[0] >= 0.2  # due 0.25 s before a worker took it, not 0
