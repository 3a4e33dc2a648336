"""One list-then-watch informer for every kind nodegate watches (`kube.Kind`).

The official client offers the watch stream but no informer, so this keeps client-go's
reflector contract: a paginated LIST, then WATCH from its resourceVersion; a watch that ends or
breaks is resumed from the last resourceVersion seen; 410 Gone means LIST again and report the
difference, so no event is lost across reconnects. Every failure backs off with jitter
(800 ms doubling to 15 s, each wait stretched by up to 100 %), whatever was raised: the loop
only ends when `stop` is set. The cap is half client-go's so that, after an outage of any
length, the next attempt comes at most 30 s after the network is back.

A watch that stays silent past its liveness bound (`errors.WatchStalledError`) is one more
failure: resumed from the last resourceVersion on a new connection. A run of failures (a
partition, an outage) is logged once when it starts and once when it ends, not once per retry;
`on_error` is told every failure, for metrics.

`request_relist` interrupts the current watch (its read is cut), so a relist after a rules
change that reads more of each object happens at once, not when the watch would have ended.

Memory: the cache holds what `transform` makes of each object (a slim view), never the raw
object, and a relist replaces entries page by page instead of building a second full cache.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import GoneError, PermanentError, WatchStalledError
from nodegate.reconciler.kit.kube import ListWatch, RawObject, Selection, WatchCancel

log = logging.getLogger("nodegate.informer")

V = TypeVar("V")

MAX_RETRY_SECONDS = 15.0
MIN_WATCH_SECONDS = 1.0
"""A watch that ends sooner than this having delivered nothing counts as a failure."""

Handler = Callable[[str, V | None, V | None], None]
"""handler(key, old, new): old None = added, new None = deleted."""
ErrorHook = Callable[[str, BaseException], None]
"""Called with (informer name, error) for every failure, for metrics."""


def object_key(raw: RawObject) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKey)."""
    meta = raw.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


class Informer(Generic[V]):
    def __init__(
        self,
        name: str,
        api: ListWatch,
        selection: Selection,
        transform: Callable[[RawObject], V],
        handler: Handler[V],
        *,
        page_size: int = 200,
        watch_timeout_seconds: int = 20,
        backoff: Backoff | None = None,
        on_error: ErrorHook = lambda _name, _err: None,
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._api = api
        self.selection = selection
        self._transform = transform
        self._handler = handler
        self._page_size = page_size
        self._watch_timeout = watch_timeout_seconds
        self._backoff = backoff or Backoff(cap_seconds=MAX_RETRY_SECONDS)
        self._on_error = on_error
        self.on_synced = on_synced or (lambda: None)
        self._cache: dict[str, V] = {}
        self._lock = threading.Lock()
        self._relist_requested = threading.Event()
        self._current_watch: WatchCancel | None = None
        self._failing_since: float | None = None
        self._failures = 0
        self._resource_version = ""
        self.synced = threading.Event()
        self.refused: str | None = None
        """Why the API server refuses this list/watch (403: RBAC withholds it), until it works;
        None: not refused."""

    # --- reads (any thread) --------------------------------------------------------------------

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._cache.get(key)

    def cached_keys(self) -> list[str]:
        with self._lock:
            return list(self._cache)

    def items(self) -> list[tuple[str, V]]:
        with self._lock:
            return list(self._cache.items())

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def put(self, raw: RawObject) -> None:
        """Put our own write's answer in the cache now (its watch event may come later). A late
        event carrying an older version only costs a 409 on the next write, never a wrong one."""
        key = object_key(raw)
        new = self._transform(raw)
        with self._lock:
            self._cache[key] = new

    def discard(self, key: str) -> None:
        with self._lock:
            self._cache.pop(key, None)

    def request_relist(self) -> None:
        """List again now (what `transform` keeps has changed): the current watch is cut."""
        self._relist_requested.set()
        with self._lock:
            current = self._current_watch
        if current is not None:
            current.cancel()

    # --- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Keep the cache current until `stop` is set; survives any exception."""
        while not stop.is_set():
            try:
                if not self._resource_version or self._relist_requested.is_set():
                    self._relist_once(stop)
                self._watch(stop)
            except GoneError:
                log.info("watch expired (410); listing again", extra={"informer": self.name})
                self._resource_version = ""
            except Exception as err:
                # Anything at all (network, API, a bug in a handler): back off and carry on
                # from the last resourceVersion seen; a stale one answers 410 and forces a relist.
                self._failed(err, stop)

    def _relist_once(self, stop: threading.Event) -> None:
        """List again; a relist that was asked for and fails is asked for again, or the next
        attempt would resume the watch from the old resourceVersion and the cache would keep
        lacking what the new `transform` keeps (a rules change that reads an annotation), for
        objects that never change, until the next 410."""
        requested = self._relist_requested.is_set()
        self._relist_requested.clear()
        try:
            self._resource_version = self._relist(stop)
        except BaseException:
            if requested:
                self._relist_requested.set()
            raise
        self._succeeded()

    def _failed(self, err: Exception, stop: threading.Event) -> None:
        """Back off; the first failure of a run is logged (a warning), later ones are not."""
        delay = self._backoff.next_delay()
        self._failures += 1
        if isinstance(err, PermanentError) and err.status == 403:
            self.refused = err.said
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            stalled = isinstance(err, WatchStalledError)
            log.warning(
                "watch silent past its bound; presumed dead, resuming on a new connection"
                if stalled
                else "list/watch failed; retrying with backoff until it works (logged once)",
                extra={
                    "informer": self.name,
                    "error": f"{type(err).__name__}: {err}",
                    "retry_in_seconds": round(delay, 2),
                },
            )
        else:
            log.debug("list/watch failed again", extra={"informer": self.name, "error": str(err)})
        self._on_error(self.name, err)
        stop.wait(delay)

    def _succeeded(self) -> None:
        """A list or a watch event went through: the end of a run of failures is logged once."""
        self._backoff.reset()
        self.refused = None
        if self._failing_since is not None:
            log.warning(
                "list/watch works again",
                extra={
                    "informer": self.name,
                    "failures": self._failures,
                    "down_seconds": round(time.monotonic() - self._failing_since, 1),
                },
            )
            self._failing_since = None
            self._failures = 0

    def _relist(self, stop: threading.Event) -> str:
        """A paginated LIST; entries are replaced as pages arrive, deletions reported last."""
        seen: set[str] = set()
        continue_token: str | None = None
        while True:
            try:
                page = self._api.list_page(self.selection, self._page_size, continue_token)
            except GoneError:
                if continue_token is None:
                    raise
                # The continuation expired mid-list (a slow consumer): start the list over.
                log.info("list continuation expired; listing again", extra={"informer": self.name})
                seen.clear()
                continue_token = None
                continue
            for raw in page.items:
                self._upsert(raw, seen)
            if stop.is_set():
                return ""
            continue_token = page.continue_token
            if continue_token is None:
                break
        with self._lock:
            gone = {key: self._cache.pop(key) for key in list(self._cache) if key not in seen}
        for key, old in gone.items():
            self._dispatch(key, old, None)
        if not self.synced.is_set():
            self.synced.set()
            self.on_synced()
        return page.resource_version

    def _watch(self, stop: threading.Event) -> None:
        """Follow one watch until it ends, recording each resourceVersion as it is seen."""
        started = time.monotonic()
        delivered = 0
        cancel = WatchCancel()
        with self._lock:
            self._current_watch = cancel
        if self._relist_requested.is_set():
            return  # asked for between the check in `run` and now: relist first
        # A server-side timeout in [base, 1.25*base), so replicas don't reconnect in step (the
        # jitter is small: the timeout is also the watch's liveness bound).
        timeout = self._watch_timeout + random.randrange(max(1, self._watch_timeout // 4))
        events = self._api.watch(self.selection, self._resource_version, timeout, cancel)
        for kind, raw in events:
            delivered += 1
            if stop.is_set() or cancel.cancelled:
                break
            meta = raw.get("metadata") or {}
            self._resource_version = str(meta.get("resourceVersion") or self._resource_version)
            self._succeeded()
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                key = object_key(raw)
                with self._lock:
                    old = self._cache.pop(key, None)
                self._dispatch(key, old, None)
            else:
                self._upsert(raw, None)
        if cancel.cancelled:
            return
        if not delivered and time.monotonic() - started < MIN_WATCH_SECONDS and not stop.is_set():
            # Something in between closes watches at once: don't reconnect in a hot loop.
            stop.wait(self._backoff.next_delay())

    def _upsert(self, raw: RawObject, seen: set[str] | None) -> None:
        key = object_key(raw)
        if seen is not None:
            seen.add(key)
        try:
            new = self._transform(raw)
        except Exception as err:
            # One malformed object must not stop the others; it stays out of the cache.
            log.error("could not read object", extra={"informer": self.name, "key": key})
            self._on_error(self.name, err)
            return
        with self._lock:
            old = self._cache.get(key)
            self._cache[key] = new
        self._dispatch(key, old, new)

    def _dispatch(self, key: str, old: V | None, new: V | None) -> None:
        try:
            self._handler(key, old, new)
        except Exception as err:
            # A handler bug for one object must not end the watch for all of them.
            log.exception("event handler failed", extra={"informer": self.name, "key": key})
            self._on_error(self.name, err)
