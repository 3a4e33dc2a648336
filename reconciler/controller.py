"""The reconcile loop: watch nodes, plan each one with the pure core, write the difference.

Handlers only read, call `plan`, write the result and report it; every decision is in
`nodegate.core` (`plan`, `blast_radius`). What this adds is the process around it: which rules
are in force (a valid update takes effect only once the node cache is synced and past the
blast-radius guard), the write path (fenced by the Lease, rate limited, preconditioned), and
what each kind of API error means for the node (retry, back off, or report and wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from nodegate.core.blast_radius import blast_radius, hold_reason
from nodegate.core.gate_census import GateCensus, gate_census
from nodegate.core.gate_plan import annotations_read, needs_backfill
from nodegate.core.model import POOL_LABEL, NodeRules, PersistentLabels
from nodegate.core.node import NodeState
from nodegate.core.persisted_labels import (
    LabelDecision,
    decide,
    forget_due,
    mark_gone,
    record_key,
    record_name,
)
from nodegate.core.plan import (
    NodePlan,
    PlanFacts,
    plan,
    relevant_view,
    track_first_seen,
)
from nodegate.reconciler.backoff import Backoff
from nodegate.reconciler.events import Recorder
from nodegate.reconciler.gate_pods import GatePods, workload_pods_on
from nodegate.reconciler.health import Health, supervised
from nodegate.reconciler.informer import Informer
from nodegate.reconciler.kube import (
    Api,
    ConflictError,
    NotFoundError,
    PermanentError,
    Selection,
    TemporaryError,
)
from nodegate.reconciler.label_store import LabelStore, StoredRecord
from nodegate.reconciler.leader import LeaderFence
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.node_view import CachedNode, annotation_filter, slim_node
from nodegate.reconciler.patch import describe, merge_patch
from nodegate.reconciler.ratelimit import TokenBucket
from nodegate.reconciler.rules_source import CONFIRM_ANNOTATION, RulesUpdate, report_on_source
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.taint_history import TaintHistory
from nodegate.reconciler.workqueue import WorkQueue

log = logging.getLogger("nodegate.controller")

_NOT_YET = object()
"""A node that must wait (the record cache is not synced yet)."""


@dataclass(frozen=True)
class LabelWork:
    """The persisted-label decision for one node, and where its record lives."""

    name: str
    stored: StoredRecord | None
    decision: LabelDecision


Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Applied:
    """The rules in force and their generation (1 = the first rules applied)."""

    update: RulesUpdate
    generation: int

    @property
    def rules(self) -> NodeRules:
        return self.update.rules


class Controller:
    def __init__(
        self,
        settings: ReconcilerSettings,
        api: Api,
        recorder: Recorder,
        metrics: Metrics,
        history: TaintHistory,
        fence: LeaderFence | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        health: Health | None = None,
    ) -> None:
        self._settings = settings
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._history = history
        self._fence = fence or LeaderFence(None)
        self._now = clock
        self._health = health
        self.queue = WorkQueue()
        # Counted when scraped: counting on every add would cost O(n) per node in a resync.
        metrics.queue_depth.set_function(lambda: len(self.queue))
        self._limiter = TokenBucket(settings.write_qps, settings.write_burst)
        self._stop = threading.Event()
        self._keep_annotation = annotation_filter(None)
        self.informer: Informer[CachedNode] = Informer(
            "nodes",
            api,
            Selection("Node"),
            lambda raw: slim_node(raw, self._keep_annotation),
            self._on_node_event,
            page_size=settings.list_page_size,
            watch_timeout_seconds=settings.watch_timeout_seconds,
            on_error=lambda informer, _err: metrics.informer_errors.labels(informer).inc(),
            on_synced=self._consider_rules,
        )
        self.labels = LabelStore(api, settings.records_namespace, metrics)
        self.gate_pods = GatePods(
            api,
            metrics,
            health or Health(metrics),
            self._on_gate_pod_node,
            settings.watch_timeout_seconds,
        )
        metrics.gate_census.source = self._gate_census
        self._reported: set[tuple[str, str, str]] = set()
        """(node uid, gate, what) already reported: timeouts and skipped backfills, once each."""
        self._deleted: dict[str, NodeState] = {}
        """Nodes deleted since their last reconcile: their records are marked gone."""
        self._rules_lock = threading.Lock()
        self._offered: RulesUpdate | None = None
        self._held: RulesUpdate | None = None
        self.applied: Applied | None = None
        self._failures: dict[str, Backoff] = {}
        self._first_seen: dict[str, dict[tuple[str, str, str], datetime]] = {}
        self._dry_run_said: dict[str, str] = {}

    def _gate_census(self) -> GateCensus | None:
        rules = self.rules
        if rules is None or not rules.startup_gates or not self.informer.synced.is_set():
            return None
        nodes = (cached.state for _, cached in self.informer.items())
        return gate_census(nodes, rules, self._now())

    # --- rules: which are in force --------------------------------------------------------------

    def offer_rules(self, update: RulesUpdate) -> None:
        """A valid rules update (any thread); it takes effect once the guard lets it."""
        with self._rules_lock:
            self._offered = update
        if self.informer.synced.is_set():
            self._consider_rules()

    @property
    def rules(self) -> NodeRules | None:
        applied = self.applied
        return applied.rules if applied is not None else None

    def _consider_rules(self) -> None:
        with self._rules_lock:
            update = self._offered
            applied = self.applied
            if update is None or (applied is not None and applied.update == update):
                return
            radius = blast_radius(
                ((node.state, self._facts(key)) for key, node in self.informer.items()),
                update.rules,
            )
            reason = hold_reason(radius, update.rules, self._settings.max_untaint_share)
            if reason is not None and not update.confirmed:
                self._hold(update, reason)
                return
            self._history.record(
                update.rules.owned_taints()
                | (applied.rules.owned_taints() if applied else frozenset())
            )
            self.applied = Applied(update, (applied.generation if applied else 0) + 1)
            self._held = None
        self._metrics.rules_held.set(0)
        self._metrics.rules_generation.set(self.applied.generation)
        log.info(
            "rules in force",
            extra={
                "source": update.source,
                "digest": update.digest,
                "generation": self.applied.generation,
                "untainting_nodes": radius.untainted_nodes,
                "confirmed": update.confirmed,
            },
        )
        self.gate_pods.follow(update.rules)
        needs_relist = self._reads_new_annotations(update.rules)
        self._keep_annotation = annotation_filter(update.rules)
        if needs_relist:
            self.informer.request_relist()
        for key in self.informer.cached_keys():
            self._enqueue(key, "resync")

    def _reads_new_annotations(self, rules: NodeRules) -> bool:
        """Whether the new rules read annotations the cache has been dropping."""
        old = self._keep_annotation
        return any(not old(key) for key in annotations_read(rules))

    def _hold(self, update: RulesUpdate, reason: str) -> None:
        self._metrics.rules_held.set(1)
        if self._held == update:
            return
        self._held = update
        in_force = (
            f"generation {self.applied.generation} stays in force"
            if self.applied
            else "no rules are in force"
        )
        how = (
            f"annotate the ConfigMap {CONFIRM_ANNOTATION}={update.digest}"
            if update.ref is not None
            else f"restart with --confirm-rules {update.digest}"
        )
        message = f"rules update held: {reason}; {in_force}. To apply it anyway, {how}."
        log.error("rules update held", extra={"source": update.source, "reason": reason})
        report_on_source(self._recorder, update.ref, "RulesHeld", message)

    # --- event intake: decide cheaply whether a node needs work ---------------------------------

    def _on_node_event(self, key: str, old: CachedNode | None, new: CachedNode | None) -> None:
        self._metrics.cached_objects.labels("nodes").set(len(self.informer))
        if new is None:
            self._metrics.node_events.labels("deleted").inc()
            self._failures.pop(key, None)
            self._first_seen.pop(key, None)
            self._dry_run_said.pop(key, None)
            self.queue.forget(key)
            rules = self.rules
            if old is not None and rules is not None and rules.persistent_labels is not None:
                self._deleted[key] = old.state
                self._enqueue(key, "event")
            return
        if any(c.last_transition_time is None for c in new.state.conditions):
            self._first_seen[key] = track_first_seen(
                self._first_seen.get(key, {}), new.state.conditions, self._now()
            )
        else:
            self._first_seen.pop(key, None)
        rules = self.rules
        if rules is None:
            self._metrics.node_events.labels("no_rules").inc()
            return
        if old is not None and relevant_view(old.state, rules) == relevant_view(new.state, rules):
            self._metrics.node_events.labels("unchanged").inc()
            return  # a heartbeat or a change in something the rules don't read
        self._metrics.node_events.labels("queued").inc()
        self._enqueue(key, "event")

    def _enqueue(self, key: str, lane: str = "event") -> None:
        self.queue.add(key, "resync" if lane == "resync" else "event")

    def _facts(self, key: str) -> PlanFacts:
        return PlanFacts(
            now=self._now(),
            previously_owned=self._history.known,
            conditions_first_seen=self._first_seen.get(key, {}),
        )

    # --- running --------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Run the informer, the workers and the periodic resync until `stop` is set."""
        self._stop = stop
        self._load_history(stop)
        health = self._health or Health(self._metrics)
        threads = [
            supervised("informer", self.informer.run, stop, health),
            supervised("label-records", self.labels.informer.run, stop, health),
            supervised("label-gc", self._collect_label_records, stop, health),
        ]
        threads += [
            supervised(f"worker-{i}", lambda _stop: self._worker(), stop, health)
            for i in range(self._settings.workers)
        ]
        while not stop.wait(self._settings.resync_seconds):
            if not self._history.persisted:
                self._history.persist()
            if self.rules is not None:
                for key in self.informer.cached_keys():
                    self._enqueue(key, "resync")
        self.queue.shutdown()
        self.gate_pods.stop_all()
        for thread in threads:
            thread.join(timeout=5)

    def _load_history(self, stop: threading.Event) -> None:
        """Read the taint-key history before anything is planned; retried with backoff.

        Without it the planner removes only what the current rules own, which is safe, so a
        reconciler that cannot read it for long still runs (and keeps trying on each resync).
        """
        backoff = Backoff()
        deadline = time.monotonic() + 30
        while not stop.is_set():
            try:
                self._history.load()
                return
            except TemporaryError as err:
                if time.monotonic() > deadline:
                    log.error(
                        "taint history not loaded; going on without it", extra={"error": str(err)}
                    )
                    return
                stop.wait(backoff.next_delay())
            except PermanentError as err:
                log.error("taint history cannot be read", extra={"error": str(err)})
                self._metrics.errors.labels("permanent").inc()
                return

    def _worker(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.reconcile(key)
            except Exception:
                # A bug or an unexpected answer for one node must not stop the others.
                log.exception("reconcile failed", extra={"node": key})
                self._metrics.errors.labels("internal").inc()
                self._retry_later(key)
            finally:
                self.queue.done(key)

    # --- one node -------------------------------------------------------------------------------

    def reconcile(self, key: str) -> None:
        """Read, plan, write once; on 409 read again and re-plan. Zero writes if nothing differs."""
        rules = self.rules
        if rules is None:
            return
        started = time.perf_counter()
        node = self.informer.get(key)
        if node is None:
            self._node_gone(key, rules)
            return
        for attempt in range(self._settings.max_conflict_retries):
            if node is None:
                return
            labels = self._label_decision(key, node, rules)
            if labels is _NOT_YET:
                return
            facts = replace(
                self._facts(key),
                gate_pods_ready_since=self.gate_pods.ready_since(rules, key),
                workload_pods=self._workload_pods(node, rules),
            )
            if isinstance(labels, LabelWork):
                facts = replace(facts, restored_labels=labels.decision.restore)
            result = plan(node.state, rules, facts)
            self._report_timeouts(node, result)
            if result.recheck_after is not None:
                self.queue.add_after(key, result.recheck_after.total_seconds() + 0.05)
            for warning in result.warnings:
                log.warning(warning, extra={"node": key})
            if result.is_empty:
                self._failures.pop(key, None)
                self._store_labels(key, node, labels)
                break
            if not self._fence.holds():
                log.warning("not writing: leadership not proven", extra={"node": key})
                return
            try:
                self._write(node, result)
            except ConflictError:
                self._metrics.conflicts.inc()
                log.info("write conflict; re-reading", extra={"node": key, "attempt": attempt + 1})
                try:
                    fresh = self._api.get_node(key)
                except (TemporaryError, PermanentError) as err:
                    self._temporary(key, "re-read after a conflict failed", err)
                    return
                node = slim_node(fresh, self._keep_annotation) if fresh is not None else None
                continue
            except NotFoundError:
                return
            except TemporaryError as err:
                self._temporary(key, "node write failed", err)
                return
            except PermanentError as err:
                self._permanent(key, node, err)
                if isinstance(labels, LabelWork) and labels.decision.restore:
                    self._metrics.label_restore_failures.labels("refused").inc()
                return
            self._failures.pop(key, None)
            self._store_labels(key, node, labels)
            self._count_gates(node, result)
            break
        else:
            self._retry_later(key)
        self._metrics.reconcile_seconds.observe(time.perf_counter() - started)

    def _write(self, node: CachedNode, result: NodePlan) -> None:
        name = node.state.name
        summary = describe(result)
        if self._settings.dry_run:
            if self._dry_run_said.get(name) != summary:
                self._dry_run_said[name] = summary
                log.info("dry run: would change node", extra={"node": name, "change": summary})
                self._recorder.on_node(
                    name, node.state.uid, "NodegateDryRun", f"would have {summary}"
                )
            self._metrics.writes.labels("dry_run").inc()
            return
        waited = self._limiter.wait(self._stop)
        if waited:
            self._metrics.write_wait_seconds.inc(waited)
        if not self._fence.holds():
            raise TemporaryError("leadership not proven after the rate-limit wait")
        self._api.patch_node(name, merge_patch(node, result))
        self._metrics.writes.labels("ok").inc()
        for change in result.add_taints:
            for rule in change.rules:
                self._metrics.changes.labels(rule, "add_taint").inc()
        for change in result.remove_taints:
            for rule in change.rules or ("(deleted rule)",):
                self._metrics.changes.labels(rule, "remove_taint").inc()
        for label in result.set_labels:
            self._metrics.changes.labels(label.why, "set_label").inc()
        log.info("changed node", extra={"node": name, "change": summary})
        self._recorder.on_node(name, node.state.uid, "NodegateUpdated", summary)

    # --- startup gates --------------------------------------------------------------------------

    def _on_gate_pod_node(self, node: str) -> None:
        if self.rules is not None:
            self._enqueue(node, "event")

    def _workload_pods(self, node: CachedNode, rules: NodeRules) -> int | None:
        """Workload pods on a backfill candidate (one LIST), None when no gate would backfill
        it or the answer is unknown; a busy node is remembered and never looked at again."""
        candidates = [
            g
            for g in rules.startup_gates
            if needs_backfill(node.state, node.state.labels, g)
            and (node.state.uid, g.name, "busy") not in self._reported
        ]
        if not candidates:
            return None
        try:
            busy = workload_pods_on(self._api, node.state.name)
        except (TemporaryError, PermanentError) as err:
            log.warning("backfill check failed", extra={"node": node.state.name, "error": str(err)})
            return None
        if busy:
            for gate in candidates:
                self._reported.add((node.state.uid, gate.name, "busy"))
                self._metrics.backfill_skipped.labels(gate.name).inc()
                shown = ", ".join(busy[:5]) + (" ..." if len(busy) > 5 else "")
                self._recorder.on_node(
                    node.state.name,
                    node.state.uid,
                    "NodegateBackfillSkipped",
                    f"startup gate {gate.name} not backfilled: the node already runs workload "
                    f"pods ({shown}); a node with workloads is never gated afterwards",
                )
        return len(busy)

    def _report_timeouts(self, node: CachedNode, result: NodePlan) -> None:
        for gate in result.timed_out_gates:
            if (node.state.uid, gate, "timeout") in self._reported:
                continue
            self._reported.add((node.state.uid, gate, "timeout"))
            lifted = gate in result.lifted_gates
            self._metrics.gate_timeouts.labels(gate, "lift" if lifted else "keep").inc()
            self._recorder.on_node(
                node.state.name,
                node.state.uid,
                "StartupGateTimedOut",
                f"startup gate {gate} was not ready within its timeout; "
                + ("lifted (onTimeout: lift)" if lifted else "kept (onTimeout: keep)"),
                warning=True,
            )

    def _count_gates(self, node: CachedNode, result: NodePlan) -> None:
        if self._settings.dry_run:
            return
        pool = node.state.labels.get(POOL_LABEL, "")
        created = node.state.created
        for gate in result.lifted_gates:
            if created is not None:
                elapsed = (self._now() - created).total_seconds()
                self._metrics.time_to_ungate.labels(gate, pool).observe(max(elapsed, 0.0))
        for gate in result.gates_put_back:
            self._metrics.gates_put_back.labels(gate).inc()

    # --- persisted labels -----------------------------------------------------------------------

    def _label_decision(
        self, key: str, node: CachedNode, rules: NodeRules
    ) -> LabelWork | object | None:
        """What the record says for this node: a LabelWork, None (no persisted labels), or
        _NOT_YET when the record cache is not synced (the node is retried shortly)."""
        config = rules.persistent_labels
        if config is None:
            return None
        if not self.labels.informer.synced.is_set():
            self.queue.add_after(key, 1.0)
            return _NOT_YET
        name = record_name(record_key(node.state, config))
        stored = self.labels.get(name)
        if stored is not None and stored.record is None:
            self._quarantine(node, stored)
            stored = None
        record = stored.record if stored is not None else None
        return LabelWork(name, stored, decide(node.state, record, config, self._now()))

    def _store_labels(self, key: str, node: CachedNode, labels: object) -> None:
        """After the node write: report restored labels, then sync the record."""
        if not isinstance(labels, LabelWork):
            return
        restored = labels.decision.restore
        if restored and not self._settings.dry_run:
            self._metrics.label_restores.inc(len(restored))
            listed = ", ".join(f"{k}={v}" for k, v in sorted(restored.items()))
            message = f"restored label(s) {listed} from record {labels.name}"
            log.info(
                "restored persisted labels",
                extra={"node": key, "record": labels.name, "labels": restored},
            )
            self._recorder.on_node(key, node.state.uid, "NodegateLabelsRestored", message)
        if labels.decision.record is None or self._settings.dry_run:
            return
        try:
            self.labels.save(labels.name, labels.stored, labels.decision.record)
        except ConflictError:
            # Someone else changed or created the record since it was read: plan again.
            self._metrics.label_restore_failures.labels("record_conflict").inc()
            self._retry_later(key)
        except (TemporaryError, PermanentError, NotFoundError) as err:
            self._metrics.label_restore_failures.labels("record_write").inc()
            self._temporary(key, "label record write failed", err)

    def _quarantine(self, node: CachedNode, stored: StoredRecord) -> None:
        try:
            copy = self.labels.quarantine(stored)
        except (TemporaryError, PermanentError, ConflictError) as err:
            log.warning(
                "could not quarantine a record", extra={"record": stored.name, "error": str(err)}
            )
            return
        self._recorder.on_node(
            node.state.name,
            node.state.uid,
            "LabelRecordQuarantined",
            f"persisted-label record {stored.name} is unreadable ({stored.error}); kept as "
            f"{copy} for a human, the node keeps the labels it has",
            warning=True,
        )

    def _node_gone(self, key: str, rules: NodeRules) -> None:
        gone = self._deleted.pop(key, None)
        config = rules.persistent_labels
        if gone is None or config is None or self._settings.dry_run:
            return
        name = record_name(record_key(gone, config))
        stored = self.labels.get(name)
        if stored is None or stored.record is None:
            return
        marked = mark_gone(stored.record, gone.uid, self._now())
        if marked is None:
            return
        try:
            self.labels.save(name, stored, marked)
        except (ConflictError, TemporaryError, PermanentError, NotFoundError) as err:
            log.warning(
                "could not mark a record gone; the GC loop will",
                extra={"record": name, "error": str(err)},
            )

    def _collect_label_records(self, stop: threading.Event) -> None:
        """Mark records of nodes deleted while nobody watched; forget those gone too long."""
        while not stop.wait(self._gc_interval()):
            rules = self.rules
            if rules is None or rules.persistent_labels is None or self._settings.dry_run:
                continue
            if not (self.informer.synced.is_set() and self.labels.informer.synced.is_set()):
                continue
            live = {node.state.uid for _, node in self.informer.items()}
            for stored in self.labels.all():
                try:
                    self._collect(stored, rules.persistent_labels, live)
                except (ConflictError, TemporaryError, PermanentError) as err:
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
                self.labels.save(stored.name, stored, marked)
            return
        if forget_due(record, config, now):
            self.labels.delete(stored)
            self._metrics.label_records_forgotten.inc()
            message = (
                f"forgot the persisted labels of {', '.join(record.node_names)} "
                f"(key {record.key}): gone since {record.node_gone_at}, forgetAfter passed"
            )
            log.info("label record forgotten", extra={"record": stored.name, "key": record.key})
            self._recorder.on_namespaced(
                "ConfigMap",
                self.labels.namespace,
                stored.name,
                str((stored.raw.get("metadata") or {}).get("uid", "")),
                "LabelRecordForgotten",
                message,
            )

    def _gc_interval(self) -> float:
        rules = self.rules
        forget = rules.persistent_labels.forget_after if rules and rules.persistent_labels else None
        if forget is None:
            return 5.0  # cheap: look again soon in case rules with persistent labels arrive
        return max(0.5, min(60.0, forget.total_seconds() / 4))

    def _temporary(
        self, key: str, what: str, err: TemporaryError | PermanentError | NotFoundError
    ) -> None:
        self._metrics.errors.labels("temporary").inc()
        self._metrics.writes.labels("error").inc()
        retry_after = err.retry_after if isinstance(err, TemporaryError) else None
        delay = self._retry_later(key, retry_after)
        log.warning(what, extra={"node": key, "error": str(err), "retry_in_seconds": delay})

    def _permanent(self, key: str, node: CachedNode, err: PermanentError) -> None:
        """Refused for this node (403, 422...): report, and try again only at the next resync."""
        self._metrics.errors.labels("permanent").inc()
        self._metrics.writes.labels("error").inc()
        log.error(
            "node write refused", extra={"node": key, "status": err.status, "error": str(err)}
        )
        self._recorder.on_node(
            key,
            node.state.uid,
            "NodegateWriteRefused",
            f"the API server refused nodegate's change ({err}); retrying at the next resync",
            warning=True,
        )
        self.queue.add_after(key, self._settings.resync_seconds)

    def _retry_later(self, key: str, at_least: float | None = None) -> float:
        backoff = self._failures.setdefault(key, Backoff(initial_seconds=1.0))
        delay = max(backoff.next_delay(), at_least or 0.0)
        self.queue.add_after(key, delay)
        return round(delay, 2)
