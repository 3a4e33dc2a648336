"""The work queue's client-go guarantees: dedup, one worker per key, delayed re-adds."""

from __future__ import annotations

import threading
import time

from nodegate.reconciler.kit.workqueue import WorkQueue
from tests.unit.reconciler.kit.queue_state import due_in, num_requeues


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


def test_a_delay_centuries_long_does_not_kill_the_waiting_worker() -> None:
    """A node may date its condition in 2500: the recheck it causes is longer than a thread
    can wait (threading.TIMEOUT_MAX), and `get` must keep waiting instead of raising."""
    queue = WorkQueue()
    queue.add_after("far", threading.TIMEOUT_MAX * 2)
    died: list[BaseException] = []

    def work() -> None:
        try:
            queue.get()
        except BaseException as err:  # the failure under test
            died.append(err)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(0.5)
    assert not died
    assert worker.is_alive()
    queue.shutdown()
    worker.join(5)


def test_a_key_waits_for_one_delayed_re_add_the_earliest() -> None:
    queue = WorkQueue()
    queue.add_after("a", 30)
    queue.add_after("a", 0.1)
    queue.add_after("a", 60)
    assert len(queue) == 1
    started = time.monotonic()
    assert queue.get() == "a"
    assert time.monotonic() - started < 5
    queue.done("a")
    assert len(queue) == 0  # the 30 s and 60 s re-adds were superseded


def test_queue_depth_counts_delayed_keys() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add_after("b", 60)
    assert len(queue) == 2


def test_changed_nodes_go_ahead_of_resync_work() -> None:
    queue = WorkQueue()
    for i in range(100):
        queue.add(f"old-{i}", "resync")
    queue.add("new-node", "event")
    assert queue.get() == "new-node"


def test_a_resync_key_that_changes_moves_up_to_the_event_lane_and_is_handed_out_once() -> None:
    queue = WorkQueue()
    queue.add("a", "resync")
    queue.add("b", "resync")
    queue.add("b", "event")
    assert queue.get() == "b"
    queue.done("b")
    assert queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


def test_a_discarded_delayed_key_is_not_handed_out() -> None:
    queue = WorkQueue()
    queue.add_after("gone", 0.05)
    queue.discard("gone")
    queue.add_after("other", 0.1)
    assert queue.get() == "other"


def test_a_failing_key_backs_off_longer_each_time_until_forgotten() -> None:
    queue = WorkQueue()
    first = queue.add_rate_limited("n1")
    second = queue.add_rate_limited("n1")
    assert 1.0 <= first <= 2.0 and 2.0 <= second <= 4.0
    assert num_requeues(queue, "n1") == 2
    queue.forget("n1")
    assert num_requeues(queue, "n1") == 0
    assert queue.add_rate_limited("n1") <= 2.0


def test_keys_back_off_independently() -> None:
    queue = WorkQueue()
    for _ in range(4):
        queue.add_rate_limited("flaky")
    assert queue.add_rate_limited("healthy") <= 2.0


def test_a_discarded_key_loses_its_retry_state() -> None:
    queue = WorkQueue()
    queue.add_rate_limited("gone")
    queue.discard("gone")
    assert num_requeues(queue, "gone") == 0
    assert due_in(queue, "gone") is None


def test_the_queue_is_busy_while_a_key_is_ready_or_being_worked_on_but_not_for_later_keys() -> None:
    queue = WorkQueue()
    queue.add_after("gate-timeout", 3600)
    assert not queue.busy()  # a gate's timeout an hour out is no work now
    queue.add("n1")
    assert queue.busy()
    key = queue.get()
    assert queue.busy()  # being written
    assert key is not None
    queue.done(key)
    assert not queue.busy()


def test_a_resync_is_pending_until_every_key_it_queued_was_worked_on() -> None:
    queue = WorkQueue()
    for key in ("a", "b"):
        queue.add(key, "resync")
    assert queue.resync_pending()
    first = queue.get()
    assert first is not None
    queue.done(first)
    assert queue.resync_pending()  # one still waits
    second = queue.get()
    assert queue.resync_pending()  # being worked on
    assert second is not None
    queue.done(second)
    assert not queue.resync_pending()


def test_a_key_that_keeps_changing_does_not_keep_a_resync_pending() -> None:
    queue = WorkQueue()
    queue.add("quiet", "resync")
    queue.add("flapping", "resync")
    queue.add("flapping", "event")  # it changed: moved up, out of the resync
    key = queue.get()
    assert key == "flapping"
    queue.add("flapping", "event")  # and changes again while being worked on
    queue.done(key)
    assert queue.get() == "flapping"  # changed nodes go first
    queue.done("flapping")
    assert queue.get() == "quiet"
    queue.done("quiet")
    queue.add("flapping", "event")  # and again
    assert queue.busy()  # the flapping node keeps the queue busy...
    assert not queue.resync_pending()  # ...but the resync it was part of is done


def test_changed_nodes_cannot_starve_the_resync() -> None:
    queue = WorkQueue()
    queue.add("r", "resync")
    handed_out = []
    for i in range(8):
        queue.add(f"changed-{i}", "event")  # a node changes before every get
        key = queue.get()
        assert key is not None
        handed_out.append(key)
        queue.done(key)
    assert "r" in handed_out


def test_a_node_changing_as_fast_as_it_can_waits_behind_every_other_changed_node() -> None:
    """The per-node fairness bound (issue 45): a key is queued at most once, and one that
    changes again while it is worked on goes to the back, so another node's change waits for
    at most one reconcile of each hot node ahead of it, however fast they change."""
    queue = WorkQueue()
    queue.add("hot")
    assert queue.get() == "hot"
    for _ in range(50):
        queue.add("hot")  # it changes on and on while it is worked on
    queue.add("normal")
    queue.done("hot")

    assert queue.get() == "normal"
    assert queue.get() == "hot"


def test_each_key_s_wait_for_a_worker_is_told_by_lane() -> None:
    waits: list[tuple[str, float]] = []
    queue = WorkQueue(on_wait=lambda lane, seconds: waits.append((lane, seconds)))
    queue.add("changed")
    queue.add("periodic", "resync")
    time.sleep(0.05)

    assert queue.get() == "changed"
    assert queue.get() == "periodic"
    assert [lane for lane, _ in waits] == ["event", "resync"]
    assert all(seconds >= 0.05 for _, seconds in waits)


def test_a_key_moved_up_to_the_event_lane_waits_from_its_move() -> None:
    waits: list[float] = []
    queue = WorkQueue(on_wait=lambda _lane, seconds: waits.append(seconds))
    queue.add("node", "resync")
    time.sleep(0.2)
    queue.add("node")  # it changed: ahead of the resync now

    assert queue.get() == "node"
    assert waits[0] < 0.2
