"""The reconcile loop: watch nodes, plan each one with the pure core, write the difference.

Handlers only read, call `plan`, write the result and report it; every decision is in
`nodegate.core.plan`.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from nodegate.core.model import NodeRules
from nodegate.core.node import NodeState
from nodegate.core.plan import NodePlan, PlanFacts, plan, relevant_view
from nodegate.reconciler.events import EventRecorder
from nodegate.reconciler.informer import NodeInformer
from nodegate.reconciler.kube import ConflictError, KubeApi, KubeError, NotFoundError, RawObject
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.patch import describe, merge_patch
from nodegate.reconciler.rules_source import RulesInForce
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.workqueue import WorkQueue

log = logging.getLogger("nodegate.controller")

RETRY_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)


class Controller:
    def __init__(
        self,
        settings: ReconcilerSettings,
        api: KubeApi,
        rules: RulesInForce,
        recorder: EventRecorder,
        metrics: Metrics,
    ) -> None:
        self._settings = settings
        self._api = api
        self._rules = rules
        self._recorder = recorder
        self._metrics = metrics
        self.queue = WorkQueue()
        self.informer = NodeInformer(api, self._on_node_event)
        self._failures: dict[str, int] = {}
        self._views: dict[str, tuple[object, ...]] = {}
        """Last relevant view per node, so each watch event parses only the new object."""

    # --- event intake: decide cheaply whether a node needs work -------------------------------

    def _on_node_event(self, name: str, old: RawObject | None, new: RawObject | None) -> None:
        if new is None:
            self._failures.pop(name, None)
            self._views.pop(name, None)
            return
        rules = self._rules.rules
        if rules is None:
            return
        view = relevant_view(NodeState.from_k8s(new), rules)
        if old is not None and self._views.get(name) == view:
            return  # a heartbeat or a change in something the rules don't read
        self._views[name] = view
        self._enqueue(name)

    def on_rules_changed(self, _rules: NodeRules) -> None:
        """New rules apply to every node, without a restart."""
        self._views.clear()  # what a view holds depends on the rules (gate annotations)
        for name in self.informer.names():
            self._enqueue(name)

    def _enqueue(self, name: str) -> None:
        self.queue.add(name)
        self._metrics.queue_depth.set(len(self.queue))

    # --- running -----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Run the informer, the workers and the periodic resync until `stop` is set."""
        threads = [
            threading.Thread(target=self.informer.run, args=(stop,), name="informer", daemon=True)
        ]
        threads += [
            threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            for i in range(self._settings.workers)
        ]
        for thread in threads:
            thread.start()
        while not stop.wait(self._settings.resync_seconds):
            if self._rules.rules is not None:
                self.on_rules_changed(self._rules.rules)
        self.queue.shutdown()
        for thread in threads:
            thread.join(timeout=5)

    def _worker(self) -> None:
        while (name := self.queue.get()) is not None:
            try:
                self.reconcile(name)
            except Exception:
                # A bug or an unexpected API answer for one node must not stop the others.
                log.exception("reconcile failed", extra={"node": name})
                self._metrics.errors.labels("internal").inc()
                self._retry_later(name)
            finally:
                self.queue.done(name)
                self._metrics.queue_depth.set(len(self.queue))

    # --- one node ------------------------------------------------------------------------------

    def reconcile(self, name: str) -> None:
        """Read, plan, write once; on 409 read again and re-plan. Zero writes if nothing differs."""
        rules = self._rules.rules
        if rules is None:
            return
        started = time.perf_counter()
        raw = self.informer.get(name)
        for attempt in range(self._settings.max_conflict_retries):
            if raw is None:
                return
            node = NodeState.from_k8s(raw)
            result = plan(node, rules, PlanFacts(now=datetime.now(UTC)))
            if result.recheck_after is not None:
                self.queue.add_after(name, result.recheck_after.total_seconds() + 0.05)
            for warning in result.warnings:
                log.warning(warning, extra={"node": name})
            if result.is_empty:
                self._failures.pop(name, None)
                break
            try:
                self._write(raw, result)
            except ConflictError:
                self._metrics.conflicts.inc()
                log.info("write conflict; re-reading", extra={"node": name, "attempt": attempt + 1})
                raw = self._fresh(name)
                continue
            except NotFoundError:
                return
            except KubeError as err:
                self._metrics.errors.labels("api").inc()
                self._metrics.writes.labels("error").inc()
                log.warning("node write failed", extra={"node": name, "error": str(err)})
                self._retry_later(name)
                return
            self._failures.pop(name, None)
            break
        else:
            self._retry_later(name)
        self._metrics.reconcile_seconds.observe(time.perf_counter() - started)

    def _fresh(self, name: str) -> RawObject | None:
        try:
            return self._api.get_node(name)
        except KubeError as err:
            log.warning("re-read failed", extra={"node": name, "error": str(err)})
            return None

    def _write(self, raw: RawObject, result: NodePlan) -> None:
        name = raw["metadata"]["name"]
        summary = describe(result)
        if self._settings.dry_run:
            log.info("dry run: would change node", extra={"node": name, "change": summary})
            self._recorder.on_node(raw, "NodegateDryRun", f"would have {summary}")
            self._metrics.writes.labels("dry_run").inc()
            return
        self._api.patch_node(name, merge_patch(raw, result))
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
        self._recorder.on_node(raw, "NodegateUpdated", summary)

    def _retry_later(self, name: str) -> None:
        failures = self._failures.get(name, 0)
        self._failures[name] = failures + 1
        delay = RETRY_BACKOFF_SECONDS[min(failures, len(RETRY_BACKOFF_SECONDS) - 1)]
        self.queue.add_after(name, delay)
