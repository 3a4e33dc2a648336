"""Persisted-label records in ConfigMaps of the reconciler's namespace, one per node key.

ConfigMaps rather than a CRD (the node-label-operator's choice, kept): nothing to install
before the reconciler runs, the same RBAC and tooling as the rules ConfigMap, and a record is a
few hundred bytes. Records are watched through the one informer type, so a re-created node is
matched against a cache, not a LIST. Every write carries the resourceVersion that was read (a
concurrent edit by another reconciler or a human answers 409 and is retried on fresh state);
an unreadable record is quarantined (copied aside, then removed with a precondition), never
overwritten and never silently dropped.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Protocol

from nodegate.core.decisions.persisted_labels import (
    QUARANTINE_LABEL,
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    LabelRecord,
    encode_record,
    record_configmap,
)
from nodegate.core.objects.installation import quarantine_name
from nodegate.core.objects.label_records import (
    QUARANTINE_REASON_ANNOTATION,
    StoredRecord,
    stored_record,
)
from nodegate.core.rules.node import format_time
from nodegate.reconciler.kit.errors import NotFoundError
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import ConfigMapApi, ListWatch, RawObject, Selection
from nodegate.reconciler.nodes.metrics import LabelStoreMetrics

log = logging.getLogger("nodegate.labels")


class RecordApi(ListWatch, ConfigMapApi, Protocol):
    """Watching the records and writing them."""


class LabelStore:
    def __init__(self, api: RecordApi, namespace: str, metrics: LabelStoreMetrics) -> None:
        self._api = api
        self.namespace = namespace
        self._metrics = metrics
        selector = f"{RECORD_LABEL}={RECORD_LABEL_VALUE}"
        self.informer: Informer[StoredRecord] = Informer(
            "label-records",
            api,
            Selection("ConfigMap", namespace, label_selector=selector),
            stored_record,
            self._on_record,
            on_error=metrics.on_informer_error,
        )

    def _on_record(self, _key: str, _old: StoredRecord | None, _new: StoredRecord | None) -> None:
        self._metrics.label_records.set(len(self.informer))

    def get(self, name: str) -> StoredRecord | None:
        return self.informer.get(f"{self.namespace}/{name}")

    def all(self) -> list[StoredRecord]:
        return [stored for _, stored in self.informer.items()]

    def save(self, name: str, stored: StoredRecord | None, record: LabelRecord) -> None:
        """Create, or replace the version that was read (ConflictError if it changed)."""
        data = encode_record(record)
        if stored is None:
            body = record_configmap(self.namespace, name, data)
            written = self._api.create_configmap(self.namespace, body)
        else:
            written = self._api.replace_configmap(
                self.namespace, name, {**stored.raw, "data": data}
            )
        # Our own write is in the cache at once (the watch event may come later), so the next
        # reconcile of the node does not plan against the older record.
        self.informer.put(written)

    def delete(self, stored: StoredRecord) -> None:
        with contextlib.suppress(NotFoundError):  # already gone: what we wanted
            self._api.delete_configmap(self.namespace, stored.name, stored.resource_version)
        self.informer.discard(f"{self.namespace}/{stored.name}")

    def quarantine(self, stored: StoredRecord) -> str:
        """Copy an unreadable record aside (not watched, never written again), then remove the
        original, only if unchanged since read. Returns the copy's name."""
        stamp = format_time(datetime.now(UTC)).replace(":", "").replace("-", "").lower()
        copy_name = quarantine_name(stored.name, stamp)
        meta = stored.raw.get("metadata") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != RECORD_LABEL}
        body: RawObject = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": copy_name,
                "namespace": self.namespace,
                "labels": {**labels, QUARANTINE_LABEL: "true"},
                "annotations": {QUARANTINE_REASON_ANNOTATION: (stored.error or "")[:1000]},
            },
            "data": stored.raw.get("data") or {},
        }
        self._api.create_configmap(self.namespace, body)
        self.delete(stored)
        self._metrics.label_records_quarantined.inc()
        log.error(
            "label record quarantined",
            extra={"record": stored.name, "copy": copy_name, "error": stored.error},
        )
        return copy_name
