"""List-then-watch of all Nodes with a local cache, as client-go's informer does.

The official client offers the watch stream but no informer, so this keeps the usual contract:
one LIST, then WATCH from its resourceVersion; on 410 GoneError or a dropped stream, LIST again and
report the difference, so no event is lost across reconnects.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from nodegate.reconciler.kube import GoneError, KubeApi, KubeError, RawObject

log = logging.getLogger("nodegate.informer")

NodeHandler = Callable[[str, RawObject | None, RawObject | None], None]
"""handler(name, old, new): old None = added, new None = deleted."""


class NodeInformer:
    def __init__(
        self, api: KubeApi, handler: NodeHandler, watch_timeout_seconds: int = 240
    ) -> None:
        self._api = api
        self._handler = handler
        self._watch_timeout = watch_timeout_seconds
        self._cache: dict[str, RawObject] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()

    def get(self, name: str) -> RawObject | None:
        with self._lock:
            return self._cache.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._cache)

    def run(self, stop: threading.Event) -> None:
        """Keep the cache current until `stop` is set."""
        resource_version = ""
        while not stop.is_set():
            try:
                if not resource_version:
                    resource_version = self._relist()
                for kind, raw in self._api.watch_nodes(resource_version, self._watch_timeout):
                    if stop.is_set():
                        return
                    resource_version = (
                        raw.get("metadata", {}).get("resourceVersion") or resource_version
                    )
                    self._apply(kind, raw)
            except GoneError:
                log.info("node watch expired (410); listing again")
                resource_version = ""
            except (KubeError, OSError, ValueError) as err:
                # Network blips and API errors are temporary: back off and list again.
                log.warning("node watch failed; listing again", extra={"error": str(err)})
                resource_version = ""
                stop.wait(1.0)

    def _relist(self) -> str:
        items, resource_version = self._api.list_nodes()
        fresh = {item["metadata"]["name"]: item for item in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
        for name, raw in fresh.items():
            self._handler(name, old.get(name), raw)
        for name in old.keys() - fresh.keys():
            self._handler(name, old[name], None)
        self.synced.set()
        return resource_version

    def _apply(self, kind: str, raw: dict[str, Any]) -> None:
        if kind == "BOOKMARK":
            return
        name = raw["metadata"]["name"]
        with self._lock:
            old = self._cache.get(name)
            if kind == "DELETED":
                self._cache.pop(name, None)
            else:
                self._cache[name] = raw
        self._handler(name, old, None if kind == "DELETED" else raw)
