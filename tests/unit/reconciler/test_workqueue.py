"""The work queue's client-go guarantees: dedup, one worker per key, delayed re-adds."""

from __future__ import annotations

import threading
import time

from nodegate.reconciler.workqueue import WorkQueue


def test_a_key_added_many_times_is_processed_once() -> None:
    queue = WorkQueue()
    for _ in range(5):
        queue.add("a")
    assert queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


def test_a_key_added_while_processing_is_handed_out_again_only_after_done() -> None:
    queue = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")
    queue.add("b")
    assert queue.get() == "b"  # "a" is still being processed: not handed to a second worker
    queue.done("a")
    assert queue.get() == "a"


def test_delayed_add_arrives_after_the_delay() -> None:
    queue = WorkQueue()
    started = time.monotonic()
    queue.add_after("a", 0.2)
    assert queue.get() == "a"
    assert time.monotonic() - started >= 0.2


def test_shutdown_releases_waiting_workers() -> None:
    queue = WorkQueue()
    results: list[str | None] = []
    worker = threading.Thread(target=lambda: results.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(timeout=2)
    assert results == [None]
