"""The one write path to Nodes: dry run, the client-side write limit, the leader fence (in the
`FencedApi` it writes through), the preconditioned patch, and what each write is worth in
metrics, logs and Events.

A write either happens and is reported, or raises the API's error kind for the caller to turn
into an outcome; the writer counts node-write results only, so a failing ConfigMap never shows
up as a failing node write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from nodegate.core.decisions.dry_run import DryRunChange
from nodegate.core.decisions.plan import NodePlan
from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.kube import NodeApi
from nodegate.reconciler.kit.ratelimit import TokenBucket
from nodegate.reconciler.nodes.decide.patch import describe, merge_patch
from nodegate.reconciler.nodes.metrics import WriterMetrics
from nodegate.reconciler.nodes.node_view import CachedNode

log = logging.getLogger("nodegate.controller")


class NodeWriter:
    def __init__(
        self,
        api: NodeApi,
        recorder: Recorder,
        metrics: WriterMetrics,
        fence: LeaderFence,
        limiter: TokenBucket,
        dry_run: bool,
    ) -> None:
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._fence = fence
        self._limiter = limiter
        self.dry_run = dry_run
        self.stop = threading.Event()
        """Set when the reconciler stops: a write waiting for the limit gives up."""
        self._dry_run_said: dict[str, str] = {}
        self._would: dict[str, frozenset[DryRunChange]] = {}
        """node -> what dry-run rules would change on it, as last reported."""
        self._would_nodes: dict[tuple[str, str], int] = {}
        """(rule, action) -> nodes it is pending on (nodegate_dry_run_nodes)."""
        self._would_lock = threading.Lock()

    def leading(self) -> bool:
        """Whether this replica may write now (the Lease's fence)."""
        return self._fence.holds()

    def write(self, node: CachedNode, node_plan: NodePlan) -> None:
        """Carry out `node_plan` in one patch; raises ConflictError, NotFoundError,
        TemporaryError or PermanentError (the last reported on the node as refused)."""
        name = node.state.name
        summary = describe(node_plan)
        if self.dry_run:
            self._say_dry_run(node, summary)
            return
        waited = self._limiter.wait(self.stop)
        if waited:
            self._metrics.write_wait_seconds.inc(waited)
        try:
            # Through the fence: the api is a `FencedApi` (what that guarantees: fenced_api.py).
            self._api.patch_node(name, merge_patch(node, node_plan))
        except ConflictError:
            self._metrics.conflicts.inc()
            raise
        except TemporaryError:
            self._metrics.writes.labels("error").inc()
            raise
        except PermanentError as err:
            self._metrics.writes.labels("error").inc()
            self._recorder.on_node(
                name,
                node.state.uid,
                "NodegateWriteRefused",
                f"the API server refused nodegate's change ({err}); retrying at the next resync",
                warning=True,
            )
            raise
        self._metrics.writes.labels("ok").inc()
        self._count_changes(node_plan)
        log.info("changed node", extra={"node": name, "change": summary})
        self._recorder.on_node(name, node.state.uid, "NodegateUpdated", summary)
        if node_plan.owned_annotation is not None:
            self._say_adopted(node, node_plan)

    def _say_adopted(self, node: CachedNode, node_plan: NodePlan) -> None:
        """Each taint the write claimed from the node as it was: an Event and a count."""
        for change in node_plan.adopted_taints:
            rules = ", ".join(change.rules)
            for rule in change.rules:
                self._metrics.taints_adopted.labels(rule).inc()
            log.info(
                "adopted taint",
                extra={"node": node.state.name, "taint": str(change.taint), "rules": rules},
            )
            self._recorder.on_node(
                node.state.name,
                node.state.uid,
                "TaintAdopted",
                f"taint {change.taint} was already on the node; it is now managed by rule "
                f"{rules} (recorded in the owned-taints annotation)",
            )

    def say_would(self, node: CachedNode, changes: tuple[DryRunChange, ...]) -> None:
        """What dry-run rules would change on the node: each change not pending before is an
        Event (its reason by action, aggregated) and a count; the per-rule node gauge follows.
        Reported by the leader only, like every write."""
        name = node.state.name
        now = frozenset(changes)
        with self._would_lock:
            before = self._would.get(name, frozenset())
            if now == before:
                return
            if now:
                self._would[name] = now
            else:
                self._would.pop(name, None)
            self._recount(before, now)
        for change in sorted(now - before, key=lambda c: (c.rule, c.action, c.subject)):
            self._metrics.dry_run_changes.labels(change.rule, change.action).inc()
            log.info(
                "dry run: rule would change node",
                extra={"node": name, "rule": change.rule, "action": change.action},
            )
            self._recorder.on_node(name, node.state.uid, change.reason, change.message())

    def _recount(self, before: frozenset[DryRunChange], now: frozenset[DryRunChange]) -> None:
        old = {(c.rule, c.action) for c in before}
        new = {(c.rule, c.action) for c in now}
        for pair in old - new:
            self._would_nodes[pair] = self._would_nodes.get(pair, 1) - 1
            self._metrics.dry_run_nodes.labels(*pair).set(self._would_nodes[pair])
        for pair in new - old:
            self._would_nodes[pair] = self._would_nodes.get(pair, 0) + 1
            self._metrics.dry_run_nodes.labels(*pair).set(self._would_nodes[pair])

    def say_waiting(self, node: CachedNode, waiting: Mapping[str, str]) -> None:
        """In a dry run, say which taints would wait for the eviction budget (a real hold is
        reported once for all nodes, by the breaker)."""
        if self.dry_run:
            held = "; ".join(f"rule {rule}: {why}" for rule, why in sorted(waiting.items()))
            message = f"would wait to add evicting taints ({held})"
            log.info("dry run: " + message, extra={"node": node.state.name})
            self._recorder.on_node(node.state.name, node.state.uid, "NodegateDryRun", message)

    def say_written_alone(self, node: CachedNode, err: Exception) -> None:
        """The node's whole write was refused and its taints went alone: a Warning for a human
        (aggregated), and a count, since something on the node keeps its labels from landing."""
        self._metrics.writes_refused.inc()
        self._recorder.on_node(
            node.state.name,
            node.state.uid,
            "NodegateTaintsWrittenAlone",
            f"the API server refused this node's update ({err}); its taint changes were written "
            "alone, its labels and annotations wait (look for what fills the node's metadata)",
            warning=True,
        )

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): a node of the same name later is told its dry run
        afresh."""
        self._dry_run_said.pop(name, None)
        with self._would_lock:
            self._recount(self._would.pop(name, frozenset()), frozenset())

    def _say_dry_run(self, node: CachedNode, summary: str) -> None:
        name = node.state.name
        if self._dry_run_said.get(name) != summary:
            self._dry_run_said[name] = summary
            log.info("dry run: would change node", extra={"node": name, "change": summary})
            self._recorder.on_node(name, node.state.uid, "NodegateDryRun", f"would have {summary}")
        self._metrics.writes.labels("dry_run").inc()

    def _count_changes(self, node_plan: NodePlan) -> None:
        for change in node_plan.add_taints:
            for rule in change.rules:
                self._metrics.changes.labels(rule, "add_taint").inc()
        for change in node_plan.remove_taints:
            for rule in change.rules or ("(deleted rule)",):
                self._metrics.changes.labels(rule, "remove_taint").inc()
        for label in node_plan.set_labels:
            self._metrics.changes.labels(label.why, "set_label").inc()
