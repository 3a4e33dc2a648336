"""What startup gates need around a node's plan: the workload-pod count that decides a backfill,
and the reports of what the plan did (a timeout, a skipped backfill, a lift, a gate put back),
each said once per node.

What is remembered is keyed by node uid and dropped when the node is deleted, so node churn
cannot grow it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from nodegate.core.decisions.gate_plan import needs_backfill
from nodegate.core.decisions.plan import NodePlan
from nodegate.core.decisions.sources import ReadWhenAsked
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import POOL_LABEL, NodeRules, StartupGate
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.kube import ListWatch
from nodegate.reconciler.nodes.metrics import GateMetrics
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.sources.gate_pods import workload_pods_on

log = logging.getLogger("nodegate.controller")

BUSY_SHOWN = 5
"""Workload pods named in a skipped-backfill Event."""


class GateReports(ReadWhenAsked):
    """Also the source of the workload pods a backfill reads (`cluster_reads`): listed on
    each backfill candidate as it is reconciled, nothing followed."""

    kind = "workload-pods"

    def __init__(
        self,
        api: ListWatch,
        recorder: Recorder,
        metrics: GateMetrics,
        clock: Callable[[], datetime],
        dry_run: bool,
    ) -> None:
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._now = clock
        self._dry_run = dry_run
        self._said: dict[str, set[tuple[str, str]]] = {}
        """node uid -> (gate, what) already reported: timeouts and skipped backfills."""
        self._lock = threading.Lock()

    def forget(self, name: str, uid: str | None) -> None:
        """The node is deleted (`NodeMemory`): nothing about it needs remembering any more."""
        if uid is None:
            return
        with self._lock:
            self._said.pop(uid, None)

    def keep_only(self, live: set[str]) -> None:
        """Forget every node not in `live` (uids): a delete missed in a watch gap, or a report
        made by a worker just after the node's delete was handled."""
        with self._lock:
            for uid in [uid for uid in self._said if uid not in live]:
                del self._said[uid]

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        return replace(facts, workload_pods=self.workload_pods(node, rules))

    def workload_pods(self, node: NodeState, rules: NodeRules) -> int | None:
        """Workload pods on a backfill candidate (one LIST), None when no gate would backfill
        it or the answer is unknown; a busy node is remembered and never looked at again."""
        with self._lock:
            said = self._said.get(node.uid, set())
            candidates = [
                gate
                for gate in rules.startup_gates
                if needs_backfill(node, node.labels, gate) and (gate.name, "busy") not in said
            ]
        if not candidates:
            return None
        try:
            busy = workload_pods_on(self._api, node.name)
        except KubeError as err:
            log.warning("backfill check failed", extra={"node": node.name, "error": str(err)})
            return None
        if busy:
            for gate in candidates:
                self._skipped_backfill(node, gate, busy)
        return len(busy)

    def report_timeouts(self, node: CachedNode, node_plan: NodePlan) -> None:
        for gate in node_plan.timed_out_gates:
            if not self._say(node.state.uid, gate, "timeout"):
                continue
            lifted = gate in node_plan.lifted_gates
            self._metrics.gate_timeouts.labels(gate, "lift" if lifted else "keep").inc()
            self._recorder.on_node(
                node.state.name,
                node.state.uid,
                "StartupGateTimedOut",
                f"startup gate {gate} was not ready within its timeout; "
                + ("lifted (onTimeout: lift)" if lifted else "kept (onTimeout: keep)"),
                warning=True,
            )

    def count_written(self, node: CachedNode, node_plan: NodePlan) -> None:
        """After a write: time to ungate of each lifted gate, and each gate put back."""
        if self._dry_run:
            return
        pool = node.state.labels.get(POOL_LABEL, "")
        if (created := node.state.created) is not None and node_plan.lifted_gates:
            elapsed = max((self._now() - created).total_seconds(), 0.0)
            for gate in node_plan.lifted_gates:
                self._metrics.time_to_ungate.labels(gate, pool).observe(elapsed)
        for gate in node_plan.gates_put_back:
            self._metrics.gates_put_back.labels(gate).inc()

    def _skipped_backfill(self, node: NodeState, gate: StartupGate, busy: list[str]) -> None:
        self._say(node.uid, gate.name, "busy")
        self._metrics.backfill_skipped.labels(gate.name).inc()
        shown = ", ".join(busy[:BUSY_SHOWN]) + (" ..." if len(busy) > BUSY_SHOWN else "")
        self._recorder.on_node(
            node.name,
            node.uid,
            "NodegateBackfillSkipped",
            f"startup gate {gate.name} not backfilled: the node already runs workload "
            f"pods ({shown}); a node with workloads is never gated afterwards",
        )

    def _say(self, uid: str, gate: str, what: str) -> bool:
        """Remember (gate, what) for the node; False if it was said before."""
        with self._lock:
            said = self._said.setdefault(uid, set())
            if (gate, what) in said:
                return False
            said.add((gate, what))
            return True
