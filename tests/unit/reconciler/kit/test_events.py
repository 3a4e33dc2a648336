"""Identical Events are aggregated (count, lastTimestamp) as client-go's recorder does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from nodegate.reconciler.kit.events import EventRecorder, QueuedEvents
from tests.unit.reconciler.kit.fakes import FakeApi


def test_a_repeated_event_patches_the_count_instead_of_creating_another() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, "default", "me")
    for _ in range(3):
        recorder.on_node("n1", "uid-1", "NodegateWriteRefused", "forbidden", warning=True)
    assert api.count("create_event") == 1
    assert api.count("patch_event") == 2
    [event] = api.events.values()
    assert event["count"] == 3


def test_different_messages_are_different_events() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, "default", "me")
    recorder.on_node("n1", "uid-1", "NodegateUpdated", "added taint a")
    recorder.on_node("n1", "uid-1", "NodegateUpdated", "removed taint a")
    assert api.count("create_event") == 2


def test_an_expired_event_is_created_afresh() -> None:
    api = FakeApi()
    recorder = EventRecorder(api, "default", "me")
    recorder.on_node("n1", "uid-1", "R", "m")
    api.events.clear()  # the Event's TTL passed on the server
    recorder.on_node("n1", "uid-1", "R", "m")
    assert api.count("create_event") == 2
    [event] = api.events.values()
    assert event["count"] == 1


def test_an_event_that_cannot_be_recorded_is_only_logged() -> None:
    from nodegate.reconciler.kit.errors import TemporaryError

    api = FakeApi()
    api.fail("create_event", TemporaryError("connection refused"))
    EventRecorder(api, "default", "me").on_node("n1", "uid-1", "R", "m")
    assert api.events == {}


def _sent_by_the_sender(queued: QueuedEvents) -> None:
    """Run the sender until the queue is empty (it drains what is left when stopped)."""
    stop = threading.Event()
    stop.set()
    queued.run(stop)


def test_queued_events_are_sent_in_order_by_the_sender_and_still_aggregated() -> None:
    api = FakeApi()
    queued = QueuedEvents(EventRecorder(api, "default", "me"))
    queued.on_node("n1", "uid-1", "NodegateUpdated", "added taint a")
    queued.on_node("n1", "uid-1", "NodegateUpdated", "added taint a")
    queued.on_node("n2", "uid-2", "NodegateUpdated", "added taint b")

    assert api.count("create_event") == 0  # the caller did not wait for the API server
    _sent_by_the_sender(queued)

    created = [
        detail["involvedObject"]["name"] for call, detail in api.calls if call == "create_event"
    ]
    assert created == ["n1", "n2"]
    assert api.count("patch_event") == 1


def test_a_full_event_queue_drops_the_event_instead_of_blocking_the_writer() -> None:
    api = FakeApi()
    queued = QueuedEvents(EventRecorder(api, "default", "me"), capacity=2)
    for i in range(3):
        queued.on_node(f"n{i}", "uid", "NodegateUpdated", "added taint a")

    assert queued.dropped == 1
    _sent_by_the_sender(queued)
    assert api.count("create_event") == 2


def test_the_sender_goes_on_after_an_event_that_raised() -> None:
    api = FakeApi()
    api.fail("create_event", RuntimeError("a bug in a report"))
    queued = QueuedEvents(EventRecorder(api, "default", "me"))
    queued.on_node("n1", "uid-1", "R", "first")
    queued.on_node("n2", "uid-2", "R", "second")

    _sent_by_the_sender(queued)

    [event] = api.events.values()
    assert event["message"] == "second"


class _Busy:
    """A controller whose nodes wait for writes until `quiet_after` checks have been made."""

    def __init__(self, quiet_after: int) -> None:
        self.checks = 0
        self.quiet_after = quiet_after

    def __call__(self) -> bool:
        self.checks += 1
        return self.checks <= self.quiet_after


def _sender_thread(queued: QueuedEvents) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=queued.run, args=(stop,), daemon=True)
    thread.start()
    return stop, thread


def test_an_event_waits_while_nodes_wait_for_their_writes() -> None:
    api = FakeApi()
    busy = _Busy(quiet_after=3)
    queued = QueuedEvents(EventRecorder(api, "default", "me"), busy=busy)
    queued.on_node("n1", "uid-1", "NodegateUpdated", "added taint a")
    stop, thread = _sender_thread(queued)
    try:
        _wait_until(lambda: api.count("create_event") == 1)
    finally:
        stop.set()
        thread.join(5)
    assert busy.checks == 4  # asked until the writes were done, then sent


def test_an_event_held_longer_than_the_hold_is_sent_even_while_nodes_wait() -> None:
    api = FakeApi()
    now = [0.0]
    queued = QueuedEvents(
        EventRecorder(api, "default", "me"),
        busy=lambda: True,  # a storm that never ends
        hold_seconds=60.0,
        clock=lambda: now[0],
    )
    queued.on_node("n1", "uid-1", "NodegateUpdated", "added taint a")
    stop, thread = _sender_thread(queued)
    try:
        time.sleep(0.3)
        assert api.count("create_event") == 0
        now[0] = 60.0
        _wait_until(lambda: api.count("create_event") == 1)
    finally:
        stop.set()
        thread.join(5)


def _wait_until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


def test_a_backlog_of_events_is_sent_without_waiting_for_the_nodes() -> None:
    api = FakeApi()
    queued = QueuedEvents(EventRecorder(api, "default", "me"), capacity=4, busy=lambda: True)
    for i in range(3):  # more than half full
        queued.on_node(f"n{i}", "uid", "NodegateUpdated", "added taint a")
    stop, thread = _sender_thread(queued)
    try:
        _wait_until(lambda: api.count("create_event") >= 1, seconds=2)
    finally:
        stop.set()
        thread.join(5)


class _SlowRecorder(EventRecorder):
    """An API server that takes 0.4 s to create each Event."""

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        time.sleep(0.4)
        super().on_node(name, uid, reason, message, warning)


def test_events_left_at_stop_are_counted_as_dropped() -> None:
    api = FakeApi()
    queued = QueuedEvents(_SlowRecorder(api, "default", "me"))
    for i in range(5):
        queued.on_node(f"n{i}", "uid", "NodegateUpdated", "added taint a")
    _sent_by_the_sender(queued)  # stopped at once: a second to send what is left
    assert api.count("create_event") + queued.dropped == 5
    assert queued.dropped >= 2
