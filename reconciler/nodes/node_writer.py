"""The one write path to Nodes: dry run, the client-side write limit, the leader fence, the
preconditioned patch, and what each write is worth in metrics, logs and Events.

A write either happens and is reported, or raises the API's error kind for the caller to turn
into an outcome; the writer counts node-write results only, so a failing ConfigMap never shows
up as a failing node write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from nodegate.core.plan import NodePlan
from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.kube import NodeApi
from nodegate.reconciler.kit.ratelimit import TokenBucket
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.patch import describe, merge_patch

log = logging.getLogger("nodegate.controller")


class NodeWriter:
    def __init__(
        self,
        api: NodeApi,
        recorder: Recorder,
        metrics: Metrics,
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
        # Refused (TemporaryError) unless leading, and counted in flight while it runs, so a
        # hand-back of the Lease waits for it.
        with self._fence.writing():
            self._patch(node, node_plan)
        self._metrics.writes.labels("ok").inc()
        self._count_changes(node_plan)
        log.info("changed node", extra={"node": name, "change": summary})
        self._recorder.on_node(name, node.state.uid, "NodegateUpdated", summary)

    def _patch(self, node: CachedNode, node_plan: NodePlan) -> None:
        try:
            self._api.patch_node(node.state.name, merge_patch(node, node_plan))
        except ConflictError:
            self._metrics.conflicts.inc()
            raise
        except TemporaryError:
            self._metrics.writes.labels("error").inc()
            raise
        except PermanentError as err:
            self._metrics.writes.labels("error").inc()
            self._refused(node, err)
            raise

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

    def forget(self, name: str) -> None:
        """The node is gone: a node of the same name later is told its dry run afresh."""
        self._dry_run_said.pop(name, None)

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

    def _refused(self, node: CachedNode, err: PermanentError) -> None:
        self._recorder.on_node(
            node.state.name,
            node.state.uid,
            "NodegateWriteRefused",
            f"the API server refused nodegate's change ({err}); retrying at the next resync",
            warning=True,
        )
