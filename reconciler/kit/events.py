"""Kubernetes Events: every change nodegate makes to a node, and every refused or held update.

Repeated identical Events are aggregated as client-go's recorder does: the first is created,
repeats within the aggregation window patch its `count` and `lastTimestamp`, so a condition
that flaps or a write refused on every resync is one Event with a count, not thousands.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from nodegate.reconciler.kit.errors import KubeError, NotFoundError
from nodegate.reconciler.kit.kube import EventApi, RawObject

log = logging.getLogger("nodegate.events")


def format_time(value: datetime) -> str:
    """An Event's timestamps: Kubernetes' `Time`, RFC 3339 in seconds with a Z."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


COMPONENT = "nodegate-reconciler"
MESSAGE_LIMIT = 1024  # the API server refuses Event messages longer than this
CACHE_ENTRIES = 4096  # client-go's maxLruCacheEntries
AGGREGATION_WINDOW_SECONDS = 600.0


@dataclass
class _Recorded:
    namespace: str
    name: str
    count: int
    at: float


class EventRecorder:
    def __init__(self, api: EventApi, node_event_namespace: str, instance: str) -> None:
        self._api = api
        self._node_namespace = node_event_namespace
        self._instance = instance
        self._recent: OrderedDict[tuple[str, ...], _Recorded] = OrderedDict()
        self._lock = threading.Lock()

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        involved = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
        self._emit(self._node_namespace, involved, reason, message, warning)

    def on_rules_object(self, name: str, uid: str, reason: str, message: str) -> None:
        """An Event on a NodeRules object (cluster-scoped: its Events live where Nodes' do,
        and `kubectl describe noderules NAME` shows them)."""
        involved = {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", "name": name, "uid": uid}
        self._emit(self._node_namespace, involved, reason, message, warning=True)

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        """A Warning on a namespaced object (the rules ConfigMap, or our own Pod)."""
        involved = {
            "apiVersion": "v1",
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "uid": uid,
        }
        self._emit(namespace, involved, reason, message, warning=True)

    def _emit(
        self, namespace: str, involved: dict[str, Any], reason: str, message: str, warning: bool
    ) -> None:
        text = message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."
        kind = "Warning" if warning else "Normal"
        key = (namespace, involved["kind"], involved["name"], involved["uid"], reason, kind, text)
        now = datetime.now(UTC)
        try:
            if self._repeat(key, now):
                return
            event: RawObject = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "generateName": f"{involved['name']}.nodegate.",
                    "namespace": namespace,
                },
                "involvedObject": involved,
                "reason": reason,
                "message": text,
                "type": kind,
                "source": {"component": COMPONENT},
                "reportingComponent": "nodegate.dev/reconciler",
                "reportingInstance": self._instance[:128],
                "firstTimestamp": format_time(now),
                "lastTimestamp": format_time(now),
                "count": 1,
            }
            created = self._api.create_event(namespace, event)
            recorded = _Recorded(namespace, created["metadata"]["name"], 1, time.monotonic())
            with self._lock:
                self._recent[key] = recorded
                self._recent.move_to_end(key)
                while len(self._recent) > CACHE_ENTRIES:
                    self._recent.popitem(last=False)
        except KubeError as err:
            # An Event is a report, not the change itself: losing one must not undo the work.
            log.warning("could not record event", extra={"reason": reason, "error": str(err)})

    def _repeat(self, key: tuple[str, ...], now: datetime) -> bool:
        """Patch the count of an identical recent Event; False if there is none to patch."""
        with self._lock:
            recorded = self._recent.get(key)
            if recorded is None or time.monotonic() - recorded.at > AGGREGATION_WINDOW_SECONDS:
                return False
            recorded.count += 1
            recorded.at = time.monotonic()
            self._recent.move_to_end(key)
            count = recorded.count
        patch = {"count": count, "lastTimestamp": format_time(now)}
        try:
            self._api.patch_event(recorded.namespace, recorded.name, patch)
        except NotFoundError:
            with self._lock:
                self._recent.pop(key, None)
            return False  # the Event expired (TTL): create a fresh one
        return True


class Recorder(Protocol):
    """What the reconciler's parts report through (fakes in unit tests)."""

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None: ...

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None: ...

    def on_rules_object(self, name: str, uid: str, reason: str, message: str) -> None: ...


QUEUE_CAPACITY = 10_000
"""Events waiting to be sent. client-go keeps 1,000 (maxQueuedEvents) and drops the rest; a
storm over 5,000 nodes is 5,000 changes, each owed an Event on its node, and they wait while
node writes go first (`HOLD_SECONDS`), so the queue holds a storm's worth (about 0.7 KiB each)."""
HOLD_SECONDS = 60.0
"""The longest an Event waits for node writes to go first, counted from its queueing."""
QUIET_POLL_SECONDS = 0.05


class QueuedEvents:
    """Events sent by a thread of their own, off the node write path, after the node writes.

    Measured with `make bench` (py-spy): the worker that wrote a node then waited for the API
    server to create its Event, two round trips per change, which halved how many changes the
    workers carried in a burst. client-go's broadcaster does the same: a bounded queue that
    drops, and logs, what does not fit rather than slow the controller down. A standard
    `queue.Queue` and one sender keep the Events in order, so aggregation is unchanged.

    While `busy()` (nodes waiting for a write), an Event waits, up to `hold_seconds` from its
    queueing, and only while the queue is less than half full (nodes that never stop changing
    keep `busy()` true; then the backlog goes out as fast as the sender can send it). In a
    storm the API server is the bottleneck (docs/benchmarks.md), and every Event created then
    delays a taint; the taint is the protection, its Event the report of it.
    """

    def __init__(
        self,
        recorder: EventRecorder,
        capacity: int = QUEUE_CAPACITY,
        busy: Callable[[], bool] = lambda: False,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recorder = recorder
        self._queue: queue.Queue[tuple[float, Callable[[], None]]] = queue.Queue(capacity)
        self._busy = busy
        self._hold = hold_seconds
        self._clock = clock
        self.dropped = 0

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        self._put(lambda: self._recorder.on_node(name, uid, reason, message, warning))

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        self._put(lambda: self._recorder.on_namespaced(kind, namespace, name, uid, reason, message))

    def on_rules_object(self, name: str, uid: str, reason: str, message: str) -> None:
        self._put(lambda: self._recorder.on_rules_object(name, uid, reason, message))

    def _put(self, send: Callable[[], None]) -> None:
        try:
            self._queue.put_nowait((self._clock(), send))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning("event queue full: events dropped", extra={"dropped": self.dropped})

    def run(self, stop: threading.Event) -> None:
        """Send queued Events until `stop`; then what is left, for at most a second."""
        while not stop.is_set():
            try:
                queued_at, send = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self._after_node_writes(queued_at, stop)
            self._send(send)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                self._send(self._queue.get_nowait()[1])
            except queue.Empty:
                return
        if left := self._queue.qsize():
            self.dropped += left
            log.warning("stopping: events not sent", extra={"dropped": left})

    def _after_node_writes(self, queued_at: float, stop: threading.Event) -> None:
        """Wait while nodes wait for a write, until the Event has waited `hold_seconds`."""
        while (
            self._busy()
            and self._clock() - queued_at < self._hold
            and self._queue.qsize() < self._queue.maxsize // 2  # a backlog goes out at once
        ):
            if stop.wait(QUIET_POLL_SECONDS):
                return

    @staticmethod
    def _send(send: Callable[[], None]) -> None:
        try:
            send()
        except Exception:  # a report, never a reason to stop reporting the next one
            log.exception("could not send event")
