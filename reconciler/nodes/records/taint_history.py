"""The taint history's store: read once by the leader, extended before each rules generation
applies. The record and its format: `nodegate.core.objects.taint_history`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from nodegate.core.objects.taint_history import (
    HISTORY_CONFIGMAP,
    HistoryError,
    Identity,
    decode_history,
    encode_history,
    merged,
)
from nodegate.reconciler.kit.configmap_data import write_data
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi

log = logging.getLogger("nodegate.history")


class TaintHistory:
    """The record, read once by the leader and extended before each rules generation applies;
    written through the leader's fenced client only (the type it takes)."""

    def __init__(
        self, api: FencedApi, namespace: str, on_error: Callable[[str], None] = lambda _kind: None
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._on_error = on_error
        self._entries: dict[Identity, str] = {}
        self._persisted = True
        self._lock = threading.Lock()

    @property
    def known(self) -> frozenset[Identity]:
        with self._lock:
            return frozenset(self._entries)

    def load(self) -> None:
        """Read the record (raises KubeError if the API cannot be reached; the caller retries)."""
        raw = self._api.read_configmap(self._namespace, HISTORY_CONFIGMAP)
        entries = self._decode(raw)
        with self._lock:
            self._entries = {**entries, **self._entries}

    def record(self, owned: frozenset[Identity], now: datetime) -> None:
        """Add `owned` as owned at `now`, the controller's clock (the API server's, so the
        oldest entries dropped are the oldest whichever replica wrote them): in memory at once,
        on the API with optimistic concurrency."""
        with self._lock:
            before = dict(self._entries)
            self._entries = merged(self._entries, owned, now)
            if set(before) == set(self._entries) and self._persisted:
                return
            self._persisted = False
        self.persist()

    def persist(self) -> bool:
        """Write what is in memory, merged with what is stored; True once stored."""

        def data_of(raw: RawObject | None) -> dict[str, str]:
            with self._lock:
                stored = self._decode(raw) if raw is not None else {}
                self._entries = {**stored, **self._entries}
                return encode_history(self._entries)

        try:
            write_data(self._api, self._namespace, HISTORY_CONFIGMAP, data_of)
        except KubeError as err:
            log.warning("could not store the taint history", extra={"error": str(err)})
            self._on_error("api")
            return False
        with self._lock:
            self._persisted = True
        return True

    @property
    def persisted(self) -> bool:
        with self._lock:
            return self._persisted

    def _decode(self, raw: RawObject | None) -> dict[Identity, str]:
        try:
            return decode_history((raw or {}).get("data"))
        except HistoryError as err:
            log.error("taint history unreadable; treating it as empty", extra={"error": str(err)})
            self._on_error("history")
            return {}
