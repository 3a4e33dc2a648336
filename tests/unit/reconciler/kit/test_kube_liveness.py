"""KubeApi's liveness bounds on a real socket: a watch that goes silent is presumed dead, and a
cancelled watch ends at once, whatever the server does (which a fake could not show: the bound
is urllib3's read timeout and the cut is a socket shutdown)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from nodegate.reconciler.kit import kube
from nodegate.reconciler.kit.errors import TimedOutError, WatchStalledError
from nodegate.reconciler.kit.kube import KubeApi, Selection, WatchCancel

BOOKMARK = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}\n'


class SilentServer:
    """Answers one watch with its headers and a bookmark, then holds the connection open
    without a byte more: a partition that neither closes nor refuses it. A write it never
    answers at all."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._held.append(conn)
            if not conn.recv(65536).startswith(b"GET"):
                continue  # a write: never answered
            chunk = b"%x\r\n%s\r\n" % (len(BOOKMARK), BOOKMARK)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunk
            )

    def close(self) -> None:
        for sock in [self._listener, *self._held]:
            sock.close()


@pytest.fixture
def silent() -> Iterator[KubeApi]:
    server = SilentServer()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.port}")
    try:
        yield KubeApi(client.ApiClient(configuration))
    finally:
        server.close()


def test_a_watch_silent_past_its_bound_is_presumed_dead(
    silent: KubeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "WATCH_SILENCE_SLACK_SECONDS", 0.5)
    events = silent.watch(Selection("Node"), "1", timeout_seconds=1)
    started = time.monotonic()
    assert next(events)[0] == "BOOKMARK"
    with pytest.raises(WatchStalledError):
        next(events)
    assert time.monotonic() - started < 5


def test_a_cancelled_watch_ends_at_once_even_while_its_read_is_blocked(silent: KubeApi) -> None:
    cancel = WatchCancel()
    events = silent.watch(Selection("Node"), "1", timeout_seconds=60, cancel=cancel)
    assert next(events)[0] == "BOOKMARK"
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    assert list(events) == []
    assert time.monotonic() - started < 3


def test_one_silent_watch_takes_the_clients_other_watches_with_it(
    silent: KubeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other watches took the same path: re-established now, not after their own bound."""
    monkeypatch.setattr(kube, "WATCH_SILENCE_SLACK_SECONDS", 0.5)
    long = silent.watch(Selection("Node"), "1", timeout_seconds=60)
    assert next(long)[0] == "BOOKMARK"
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            list(long)
        except BaseException as err:
            failed.append(err)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    short = silent.watch(Selection("Node"), "1", timeout_seconds=1)
    assert next(short)[0] == "BOOKMARK"
    with pytest.raises(WatchStalledError):
        next(short)
    follower.join(timeout=3)
    assert not follower.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], WatchStalledError)


def test_a_write_is_cut_at_its_deadline_and_leaves_the_watches_alone() -> None:
    """The leader's writes end before its Lease could pass on (reconciler/main.py); one that
    times out failed, and is no sign of a dead path: the watches are not severed."""
    server = SilentServer()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.port}")
    api = KubeApi(client.ApiClient(configuration)).within(0.8)
    try:
        watch = api.watch(Selection("Node"), "1", timeout_seconds=60)
        assert next(watch)[0] == "BOOKMARK"
        started = time.monotonic()
        with pytest.raises(TimedOutError):
            api.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
        waited = time.monotonic() - started
        severed = [s for _, (_, s) in api._watches.items() if s[0]]
    finally:
        server.close()

    assert 0.3 < waited < 0.8  # half the deadline for the answer
    assert severed == []
