"""Which taints nodegate's rules have owned, kept where nodes cannot write.

The ownership annotation on a Node lets a deleted rule still clean up its taints, but a kubelet
may edit its own Node's annotations, so the annotation alone must never decide a removal. This
record, a ConfigMap in the reconciler's namespace that only the reconciler (and cluster admins)
may write, lists every (key, effect) some accepted rules generation owned; the planner removes
a taint the annotation claims only if it is listed here (`core.plan.removable_taints`).

Format (`data["taints.json"]`): {"version": 1, "taints": [{"key", "effect", "lastOwned"}]},
oldest entries dropped past `MAX_ENTRIES`. An unreadable record is reported and treated as
empty: that can only make nodegate remove less, never more.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from nodegate.core.rules.node import format_time
from nodegate.core.text.stored_document import read_document
from nodegate.reconciler.kit.configmap_data import write_data
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject

log = logging.getLogger("nodegate.history")

HISTORY_CONFIGMAP = "nodegate-taint-history"
DATA_KEY = "taints.json"
MAX_ENTRIES = 2000
"""Far above what a rules file owns (hundreds of taints); keeps the record well under 1 MiB."""

Identity = tuple[str, str]


class HistoryError(ValueError):
    """The stored record cannot be read."""


def decode_history(data: Mapping[str, Any] | None) -> dict[Identity, str]:
    """(key, effect) -> lastOwned from a ConfigMap's data; HistoryError if malformed."""
    where = (HISTORY_CONFIGMAP, DATA_KEY)
    return read_document(data, where, 1, _entries, HistoryError) or {}


def _entries(document: dict[str, Any]) -> dict[Identity, str]:
    return {
        (str(e["key"]), str(e["effect"])): str(e.get("lastOwned", "")) for e in document["taints"]
    }


def encode_history(entries: Mapping[Identity, str]) -> dict[str, str]:
    newest = sorted(entries.items(), key=lambda item: (item[1], item[0]), reverse=True)
    kept = sorted(newest[:MAX_ENTRIES])
    taints = [{"key": k, "effect": e, "lastOwned": t} for (k, e), t in kept]
    return {DATA_KEY: json.dumps({"version": 1, "taints": taints}, indent=1, sort_keys=True)}


def merged(
    entries: Mapping[Identity, str], owned: frozenset[Identity], now: datetime
) -> dict[Identity, str]:
    stamp = format_time(now)
    return {**entries, **dict.fromkeys(owned, stamp)}


class TaintHistory:
    """The record, read once by the leader and extended before each rules generation applies."""

    def __init__(
        self,
        api: ConfigMapApi,
        namespace: str,
        on_error: Callable[[str], None] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._on_error = on_error
        self._now = now
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

    def record(self, owned: frozenset[Identity]) -> None:
        """Add `owned` (in memory at once, on the API with optimistic concurrency)."""
        with self._lock:
            before = dict(self._entries)
            self._entries = merged(self._entries, owned, self._now())
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
            if self._on_error is not None:
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
            if self._on_error is not None:
                self._on_error("history")
            return {}
