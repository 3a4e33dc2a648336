"""The informer survives every failure and loses no event: list, watch, resume, relist."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import urllib3

from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import PermanentError, TemporaryError, WatchStalledError
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import Page, RawObject, Selection
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node, gone

Seen = list[tuple[str, str | None, str | None]]


def names(raw: RawObject) -> str:
    return str(raw["metadata"].get("labels", {}).get("v", "-"))


@contextmanager
def running(api: FakeApi, seen: Seen, **kwargs: object) -> Iterator[Informer[str]]:
    def handler(key: str, old: str | None, new: str | None) -> None:
        seen.append((key, old, new))

    errors: list[BaseException] = []
    informer: Informer[str] = Informer(
        "nodes",
        api,
        Selection("Node"),
        names,
        handler,
        backoff=Backoff(initial_seconds=0.01, cap_seconds=0.05),
        on_error=lambda _n, err: errors.append(err),
        **kwargs,  # type: ignore[arg-type]
    )
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield informer
    finally:
        stop.set()
        thread.join(timeout=5)
        assert not thread.is_alive()


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_a_refused_connection_during_list_is_retried_until_the_cache_syncs() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    refused = urllib3.exceptions.MaxRetryError(None, "/api/v1/nodes", "Connection refused")  # type: ignore[arg-type]
    api.fail("list_page", TemporaryError(str(refused)), TemporaryError(str(refused)))
    with running(api, []) as informer:
        eventually(informer.synced.is_set)
        assert informer.get("a") == "-"
    assert api.count("list_page") == 3


def test_an_unexpected_exception_does_not_end_the_loop() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.fail("list_page", RuntimeError("a bug in the transport"))
    with running(api, []) as informer:
        eventually(informer.synced.is_set)


def test_a_broken_watch_resumes_from_the_last_resource_version_without_relisting() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    seen: Seen = []
    with running(api, seen) as informer:
        eventually(informer.synced.is_set)
        api.push_watch(
            "MODIFIED",
            {
                **fake_node("a", {"v": "1"}),
                "metadata": {"name": "a", "labels": {"v": "1"}, "resourceVersion": "77"},
            },
        )
        api.push_watch("RAISE", {"error": TemporaryError("connection reset")})
        eventually(lambda: api.count("watch") >= 2)
    assert api.count("list_page") == 1
    watched_from = [rv for call, rv in api.calls if call == "watch"]
    assert watched_from[-1] == "77"
    assert ("a", "-", "1") in seen


def test_gone_relists_and_reports_what_changed_meanwhile() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.add_node(fake_node("b"))
    seen: Seen = []
    with running(api, seen) as informer:
        eventually(informer.synced.is_set)
        del api.nodes["b"]
        api.add_node(fake_node("c"))
        api.push_watch("RAISE", {"error": gone()})
        eventually(lambda: informer.get("c") is not None and informer.get("b") is None)
    assert ("b", "-", None) in seen
    assert ("c", None, "-") in seen


def test_relist_is_paginated_with_the_configured_page_size() -> None:
    api = FakeApi()
    for i in range(25):
        api.add_node(fake_node(f"n{i:02d}"))
    with running(api, [], page_size=10) as informer:
        eventually(informer.synced.is_set)
        assert len(informer) == 25
    continues = [token for call, (_, token) in ((c, d) for c, d in api.calls if c == "list_page")]
    assert continues == [None, "10", "20"]


def test_an_expired_list_continuation_starts_the_list_over() -> None:
    api = FakeApi()
    for i in range(15):
        api.add_node(fake_node(f"n{i:02d}"))
    api.fail("list_page", *[])  # first page succeeds
    original = api.list_page
    calls = {"n": 0}

    def flaky(selection: Selection, limit: int, token: str | None) -> Page:
        calls["n"] += 1
        if calls["n"] == 2:
            raise gone()
        return original(selection, limit, token)

    api.list_page = flaky  # type: ignore[method-assign,assignment]
    with running(api, [], page_size=10) as informer:
        eventually(informer.synced.is_set)
        assert len(informer) == 15
    assert calls["n"] == 4  # page 1, expired page 2, then page 1 and 2 again


def test_a_failing_handler_does_not_stop_the_informer() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.add_node(fake_node("b"))
    handled: list[str] = []

    def handler(key: str, _old: str | None, _new: str | None) -> None:
        if key == "a":
            raise ValueError("bug for this one object")
        handled.append(key)

    informer: Informer[str] = Informer(
        "nodes",
        api,
        Selection("Node"),
        names,
        handler,
        backoff=Backoff(initial_seconds=0.01, cap_seconds=0.05),
    )
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    eventually(informer.synced.is_set)
    stop.set()
    thread.join(timeout=5)
    assert handled == ["b"]


def test_request_relist_cuts_the_current_watch_and_lists_at_once() -> None:
    """A rules change that reads more of each object must not wait for the watch to end."""
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.watch_quiet_seconds = 60.0  # an open, quiet watch: it would end only after a minute
    with running(api, []) as informer:
        eventually(informer.synced.is_set)
        eventually(lambda: api.count("watch") == 1)
        asked = time.monotonic()
        informer.request_relist()
        eventually(lambda: api.count("list_page") == 2, timeout=2.0)
        relisted_after = time.monotonic() - asked
        api.watch_quiet_seconds = 0.0
    assert relisted_after < 1.0


def test_a_stalled_watch_resumes_from_the_last_resource_version_and_is_reported() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    errors: list[BaseException] = []
    informer: Informer[str] = Informer(
        "nodes",
        api,
        Selection("Node"),
        names,
        lambda *_: None,
        backoff=Backoff(initial_seconds=0.01, cap_seconds=0.05),
        on_error=lambda _n, err: errors.append(err),
    )
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        eventually(informer.synced.is_set)
        bookmark = {"metadata": {"resourceVersion": "91"}}
        api.push_watch("BOOKMARK", bookmark)
        api.push_watch("RAISE", {"error": WatchStalledError("silent for 25s")})
        eventually(lambda: api.count("watch") >= 2)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert api.count("list_page") == 1
    assert [rv for call, rv in api.calls if call == "watch"][1] == "91"
    assert any(isinstance(err, WatchStalledError) for err in errors)


def test_a_run_of_failures_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.fail("list_page", *[TemporaryError("connection refused") for _ in range(6)])
    caplog.set_level(logging.INFO, logger="nodegate.informer")
    with running(api, []) as informer:
        eventually(informer.synced.is_set)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("list/watch failed")
    assert warnings[1] == "list/watch works again"
    assert api.count("list_page") == 7


def test_watches_ask_the_server_to_end_them_within_a_quarter_past_the_timeout() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    with running(api, [], watch_timeout_seconds=20) as informer:
        eventually(informer.synced.is_set)
        eventually(lambda: len(api.watch_timeouts) >= 20)
    assert all(20 <= t < 25 for t in api.watch_timeouts)


def test_a_requested_relist_that_fails_is_listed_again_not_forgotten() -> None:
    """A rules change that reads more of each object asks for a relist; if that LIST fails (an
    answer broken off, a partition), the next attempt must list again, not resume the watch
    from the old resourceVersion with a cache that still lacks what the rules now read."""
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.watch_quiet_seconds = 60.0
    with running(api, []) as informer:
        eventually(informer.synced.is_set)
        eventually(lambda: api.count("watch") == 1)
        api.fail("list_page", TemporaryError("answer broke off"))
        informer.request_relist()
        eventually(lambda: api.count("list_page") == 3)  # the start, the failed one, again
        api.watch_quiet_seconds = 0.0
    calls = [name for name, _ in api.calls if name in ("list_page", "watch")]
    # No watch from the old resourceVersion between the failed relist and the next one.
    assert calls[:4] == ["list_page", "watch", "list_page", "list_page"], calls


def test_a_list_rbac_refuses_is_kept_as_refused_until_it_works() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    forbidden = PermanentError('nodes is forbidden: cannot list resource "nodes"', 403)
    api.fail("list_page", forbidden, forbidden, forbidden)
    seen_refused: list[str | None] = []
    with running(api, []) as informer:
        eventually(lambda: informer.refused is not None or informer.synced.is_set())
        seen_refused.append(informer.refused)
        eventually(informer.synced.is_set)
        assert informer.refused is None
    assert seen_refused == ['nodes is forbidden: cannot list resource "nodes"']


def test_other_failures_are_not_refusals() -> None:
    api = FakeApi()
    api.add_node(fake_node("a"))
    api.fail("list_page", PermanentError("bad request", 400), TemporaryError("reset"))
    refusals: list[str | None] = []
    with running(api, []) as informer:
        while not informer.synced.is_set():
            refusals.append(informer.refused)
            time.sleep(0.001)
    assert set(refusals) <= {None}
