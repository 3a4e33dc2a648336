"""Persisted labels around one node's reconcile: what its record says (read before the plan),
the record brought up to date (after the write), unreadable records quarantined, records of
deleted nodes marked gone and, after `forgetAfter`, forgotten.

Every decision is `nodegate.core.decisions.persisted_labels`; this reads and writes the records
and says what it did.

The records are ConfigMaps in the reconciler's namespace, one per node key. ConfigMaps rather
than a CRD (the node-label-operator's choice, kept): nothing to install before the reconciler
runs, the same RBAC and tooling as the rules ConfigMap, and a record is a few hundred bytes.
Records are watched through the one informer type, so a re-created node is matched against a
cache, not a LIST. Every write carries the resourceVersion that was read (a concurrent edit by
another reconciler or a human answers 409 and is retried on fresh state); an unreadable record
is quarantined (copied aside, then removed with a precondition), never overwritten and never
silently dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from nodegate.core.decisions.persisted_labels import (
    QUARANTINE_LABEL,
    QUARANTINE_REASON_ANNOTATION,
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    LabelDecision,
    LabelRecord,
    StoredRecord,
    decide,
    encode_record,
    forget_due,
    mark_gone,
    persisted_view,
    record_configmap,
    record_key,
    record_name,
    stored_record,
)
from nodegate.core.objects.installation import quarantine_name
from nodegate.core.rules.model import NodeRules, PersistentLabels
from nodegate.core.rules.node import NodeState, format_time
from nodegate.reconciler.kit.errors import ConflictError, KubeError, NotFoundError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import ConfigMapApi, ListWatch, RawObject, Selection
from nodegate.reconciler.kit.worker import RequeueAfter, Retry, retry
from nodegate.reconciler.nodes.metrics import LabelRecordMetrics
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.records.record_keys import RecordKeys

log = logging.getLogger("nodegate.controller")
quarantine_log = logging.getLogger("nodegate.labels")


class RecordApi(ListWatch, ConfigMapApi, Protocol):
    """Watching the records and writing them."""


@dataclass(frozen=True)
class LabelWork:
    """The persisted-label decision for one node, and where its record lives."""

    name: str
    stored: StoredRecord | None
    decision: LabelDecision
    dry_run: bool = False
    """persistentLabels is in dry run: the record is neither written nor its labels restored
    (the planner reports them as would-be restores)."""


COALESCE_SECONDS = 2.0
"""The shortest interval between two writes of one record that only follow its node's labels."""


class LabelRecords:
    def __init__(
        self,
        api: RecordApi,
        namespace: str,
        recorder: Recorder,
        metrics: LabelRecordMetrics,
        clock: Callable[[], datetime],
        dry_run: bool,
        alive: Callable[[str], bool] = lambda _name: True,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self.informer: Informer[StoredRecord] = Informer(
            "label-records",
            api,
            Selection(
                "ConfigMap", namespace, label_selector=f"{RECORD_LABEL}={RECORD_LABEL_VALUE}"
            ),
            stored_record,
            lambda *_: metrics.label_records.set(len(self.informer)),
            on_error=metrics.on_informer_error,
        )
        self._monotonic = time.monotonic
        self._written: dict[str, float] = {}
        """record name -> when (monotonic) this process last wrote it: a node's own label
        changes are written at most every `COALESCE_SECONDS`, the last value winning."""
        self._deferred: set[str] = set()
        """Nodes whose record write waits for its interval (`flush` at a stop)."""
        self._flushing = False
        self._recorder = recorder
        self._metrics = metrics
        self._now = clock
        self._dry_run = dry_run
        self._deleted: dict[str, NodeState] = {}
        """Nodes deleted since their last reconcile: their records are marked gone."""
        self._lock = threading.Lock()
        self._watching: threading.Event | None = None
        """The stop event of the records' watch while it runs."""
        self.keys = RecordKeys(alive)
        metrics.label_keys_contested.set_function(self.keys.contested)

    def follow(self, rules: NodeRules | None, health: Health) -> None:
        """Watch the records while `rules` persist labels, and only then: on the rules
        ConfigMap the shipped RBAC lets the reconciler list them only for such rules (least
        privilege). None: stop."""
        wanted = rules is not None and rules.persistent_labels is not None
        with self._lock:
            if wanted and self._watching is None:
                self._watching = threading.Event()
                supervised("label-records", self.informer.run, self._watching, health)
            elif not wanted and self._watching is not None:
                self._watching.set()
                self._watching = None

    def synced(self) -> bool:
        """Whether the records are cached: before that, no node's labels can be decided."""
        return self.informer.synced.is_set()

    # --- one node's reconcile -------------------------------------------------------------------

    def decide(self, node: CachedNode, config: PersistentLabels) -> LabelWork | None:
        """What the node's record says (an unreadable record is quarantined, never used); None
        while the node has no key (`keyBy: providerID` and no providerID yet)."""
        key = record_key(node.state, config)
        if not key:
            return None
        name = record_name(key)
        stored = self.informer.get(f"{self._namespace}/{name}")
        if stored is not None and stored.record is None:
            if not (config.dry_run or self._dry_run):
                self._quarantine(node, stored)
            stored = None
        record = stored.record if stored is not None else None
        rivals = self.keys.rivals(node.state.name, key)
        decision = decide(node.state, record, config, self._now(), rivals)
        return LabelWork(name, stored, decision, dry_run=config.dry_run)

    def after_write(self, node: CachedNode, work: LabelWork) -> Retry | RequeueAfter | None:
        """After the node write: report restored labels, then bring the record up to date.
        A failed record write is an outcome (retry the node), never a node-write error."""
        if self._dry_run or work.dry_run:
            return None
        self._report_withheld(node, work)
        restored = work.decision.restore
        if restored:
            self._metrics.label_restores.inc(len(restored))
            listed = ", ".join(f"{k}={v}" for k, v in sorted(restored.items()))
            log.info(
                "restored persisted labels",
                extra={"node": node.state.name, "record": work.name, "labels": restored},
            )
            self._recorder.on_node(
                node.state.name,
                node.state.uid,
                "NodegateLabelsRestored",
                f"restored label(s) {listed} from record {work.name}",
            )
        if work.decision.record is None:
            return None
        if (wait := self._coalesce(work)) is not None:
            with self._lock:
                self._deferred.add(node.state.name)
            return RequeueAfter(wait)
        try:
            self._save(work.name, work.stored, work.decision.record)
            self._wrote(work.name)
            with self._lock:
                self._deferred.discard(node.state.name)
        except ConflictError as err:
            # Someone else changed or created the record since it was read: plan again.
            self._metrics.label_restore_failures.labels("record_conflict").inc()
            return Retry(err, "label record changed meanwhile; planning again", kind=None)
        except KubeError as err:
            self._metrics.label_restore_failures.labels("record_write").inc()
            return retry(err, "label record write failed")
        return None

    def _coalesce(self, work: LabelWork) -> float | None:
        """Seconds to wait before writing a record that only follows its own node's label
        changes, if it was written less than `COALESCE_SECONDS` ago (a node flipping a label
        as fast as the API server lets it pays one record write per interval, not one per
        flip; the node is planned again then, and its latest labels are written)."""
        stored = work.stored.record if work.stored is not None else None
        record = work.decision.record
        if stored is None or record is None or work.decision.restore or self._flushing:
            return None
        if stored.node_uid != record.node_uid:
            return None  # the record changes hands: written at once
        with self._lock:
            last = self._written.get(work.name)
        if last is None:
            return None
        wait = last + COALESCE_SECONDS - self._monotonic()
        return wait if wait > 0 else None

    def flush(self, reconcile: Callable[[str], object]) -> int:
        """At a clean stop, before the Lease is handed back: the record writes still waiting
        for their interval (`COALESCE_SECONDS`) go out now, each by its node's `reconcile`, so
        a node deleted while no replica runs leaves its latest labels in its record. How many
        nodes."""
        with self._lock:
            deferred = sorted(self._deferred)
        self._flushing = True
        try:
            for key in deferred:
                reconcile(key)
        finally:
            self._flushing = False
        return len(deferred)

    def _wrote(self, name: str) -> None:
        now = self._monotonic()
        with self._lock:
            if len(self._written) >= 1024:  # only the last interval's writes matter
                self._written = {
                    k: at for k, at in self._written.items() if now - at < COALESCE_SECONDS
                }
            self._written[name] = now

    def _report_withheld(self, node: CachedNode, work: LabelWork) -> None:
        """A record not restored onto this node: a Warning Event (aggregated) and a count."""
        decision = work.decision
        if decision.refusal is None:
            return
        if decision.rivals:
            reason = "contested"
        elif decision.other_machine:
            reason = "other_machine"
        else:
            reason = "unproven"
        self._metrics.label_records_withheld.labels(reason).inc()
        withheld = ", ".join(f"{k}={v}" for k, v in sorted(decision.withheld.items()))
        message = decision.refusal + (f" (labels withheld: {withheld})" if withheld else "")
        log.warning(
            "persisted labels withheld",
            extra={"node": node.state.name, "record": work.name, "reason": reason},
        )
        self._recorder.on_node(
            node.state.name, node.state.uid, "LabelRecordWithheld", message, warning=True
        )

    def refused(self, work: LabelWork | None) -> None:
        """The node write carrying restored labels was refused."""
        if work is not None and work.decision.restore:
            self._metrics.label_restore_failures.labels("refused").inc()

    # --- deleted nodes --------------------------------------------------------------------------

    def node_deleted(self, key: str, state: NodeState) -> None:
        """Remember a deleted node until its key is reconciled (then its record is marked)."""
        with self._lock:
            self._deleted[key] = state

    def node_gone(self, key: str, config: PersistentLabels | None) -> None:
        """The node of `key` is no longer cached: mark its record gone (from now on its
        `forgetAfter` runs)."""
        with self._lock:
            gone = self._deleted.pop(key, None)
        if gone is None or config is None or self._dry_run or config.dry_run:
            return
        key = record_key(gone, config)
        if not key:
            return
        name = record_name(key)
        stored = self.informer.get(f"{self._namespace}/{name}")
        if stored is None or stored.record is None:
            return
        record = stored.record
        if record.node_uid == gone.uid:
            # The labels the watch last saw on it: a change whose record write was still
            # coalesced (`COALESCE_SECONDS`) when the node went is not lost.
            record = replace(record, labels=dict(persisted_view(gone.labels, config)))
        marked = mark_gone(record, gone.uid, self._now())
        if marked is None:
            return
        try:
            self._save(name, stored, marked)
        except KubeError as err:
            log.warning(
                "could not mark a record gone; the GC loop will",
                extra={"record": name, "error": str(err)},
            )

    # --- garbage collection ---------------------------------------------------------------------

    def collect(
        self,
        stop: threading.Event,
        rules: Callable[[], NodeRules | None],
        live: Callable[[], set[str] | None],
    ) -> None:
        """Until stopped: mark records of nodes deleted while nobody watched, and forget those
        gone longer than forgetAfter. `live` gives the uids of every node (None: not synced)."""
        while not stop.wait(gc_interval(rules())):
            current = rules()
            config = current.persistent_labels if current is not None else None
            writes = config is not None and not (self._dry_run or config.dry_run)
            uids = live() if writes and self.synced() else None
            if config is None or uids is None:
                continue
            for _, stored in self.informer.items():
                try:
                    self._collect(stored, config, uids)
                except KubeError as err:
                    log.warning(
                        "record GC failed; next round",
                        extra={"record": stored.name, "error": str(err)},
                    )

    def _collect(self, stored: StoredRecord, config: PersistentLabels, live: set[str]) -> None:
        record = stored.record
        if record is None:
            return  # quarantined when its node is next reconciled
        now = self._now()
        if record.node_gone_at is None and record.node_uid not in live:
            marked = mark_gone(record, record.node_uid, now)
            if marked is not None:
                self._save(stored.name, stored, marked)
            return
        if not forget_due(record, config, now):
            return
        self._delete(stored)
        self._metrics.label_records_forgotten.inc()
        log.info("label record forgotten", extra={"record": stored.name, "key": record.key})
        self._recorder.on_namespaced(
            "ConfigMap",
            self._namespace,
            stored.name,
            str((stored.raw.get("metadata") or {}).get("uid", "")),
            "LabelRecordForgotten",
            f"forgot the persisted labels of {', '.join(record.node_names)} "
            f"(key {record.key}): gone since {record.node_gone_at}, forgetAfter passed",
        )

    def _save(self, name: str, stored: StoredRecord | None, record: LabelRecord) -> None:
        """Create, or replace the version that was read (ConflictError if it changed)."""
        data = encode_record(record)
        if stored is None:
            body = record_configmap(self._namespace, name, data)
            written = self._api.create_configmap(self._namespace, body)
        else:
            written = self._api.replace_configmap(
                self._namespace, name, {**stored.raw, "data": data}
            )
        # Our own write is in the cache at once (the watch event may come later), so the next
        # reconcile of the node does not plan against the older record.
        self.informer.put(written)

    def _delete(self, stored: StoredRecord) -> None:
        with contextlib.suppress(NotFoundError):  # already gone: what we wanted
            self._api.delete_configmap(self._namespace, stored.name, stored.resource_version)
        self.informer.discard(f"{self._namespace}/{stored.name}")

    def _quarantine(self, node: CachedNode, stored: StoredRecord) -> None:
        """Copy an unreadable record aside (not watched, never written again), then remove the
        original, only if unchanged since read."""
        stamp = format_time(datetime.now(UTC)).replace(":", "").replace("-", "").lower()
        copy = quarantine_name(stored.name, stamp)
        meta = stored.raw.get("metadata") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != RECORD_LABEL}
        body: RawObject = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": copy,
                "namespace": self._namespace,
                "labels": {**labels, QUARANTINE_LABEL: "true"},
                "annotations": {QUARANTINE_REASON_ANNOTATION: (stored.error or "")[:1000]},
            },
            "data": stored.raw.get("data") or {},
        }
        try:
            self._api.create_configmap(self._namespace, body)
            self._delete(stored)
        except KubeError as err:
            log.warning(
                "could not quarantine a record", extra={"record": stored.name, "error": str(err)}
            )
            return
        self._metrics.label_records_quarantined.inc()
        quarantine_log.error(
            "label record quarantined",
            extra={"record": stored.name, "copy": copy, "error": stored.error},
        )
        self._recorder.on_node(
            node.state.name,
            node.state.uid,
            "LabelRecordQuarantined",
            f"persisted-label record {stored.name} is unreadable ({stored.error}); kept as "
            f"{copy} for a human, the node keeps the labels it has",
            warning=True,
        )


def gc_interval(rules: NodeRules | None) -> float:
    """A quarter of forgetAfter (0.5 to 60 s); 5 s while no rules persist labels."""
    config = rules.persistent_labels if rules is not None else None
    if config is None or config.forget_after is None:
        return 5.0  # cheap: look again soon in case rules with persistent labels arrive
    return max(0.5, min(60.0, config.forget_after.total_seconds() / 4))
