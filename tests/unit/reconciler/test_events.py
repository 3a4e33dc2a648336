"""Identical Events are aggregated (count, lastTimestamp) as client-go's recorder does."""

from __future__ import annotations

from nodegate.reconciler.events import EventRecorder
from tests.unit.reconciler.fakes import FakeApi


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
    from nodegate.reconciler.kube import TemporaryError

    api = FakeApi()
    api.fail("create_event", TemporaryError("connection refused"))
    EventRecorder(api, "default", "me").on_node("n1", "uid-1", "R", "m")
    assert api.events == {}
