"""The day-2 commands' side of the source seam (`core.decisions.sources`): what the rules read
from the cluster about one node, listed once through `cli.live.cluster` (the reconciler's own
readers and parsers), one source per kind of `cluster_reads.SOURCES`, driven without naming
them as the reconciler drives its informers; a kind without a source here is refused by name.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from nodegate.cli.live.cluster import Cluster
from nodegate.cli.live.options import stderr_console
from nodegate.cli.plan_sources import AgentObjects
from nodegate.core.decisions.gate_plan import needs_backfill
from nodegate.core.decisions.node_agents import AgentReadiness, lifted_taints
from nodegate.core.decisions.sightings import Sighting
from nodegate.core.decisions.sources import ReadWhenAsked, Sources
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.node_waits import InitPod
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import KubeError


class _Listed(ReadWhenAsked):
    """One node's source, listed when its facts are asked (or its rules followed)."""

    def __init__(self, cluster: Cluster, node: NodeState) -> None:
        self._cluster = cluster
        self._node = node


class InitPods(_Listed):
    kind = "init-pods"

    def __init__(self, cluster: Cluster, node: NodeState, at: datetime) -> None:
        super().__init__(cluster, node)
        self._at = at
        self._signals: dict[str, tuple[Sighting, ...]] = {}
        self.shown: dict[str, tuple[InitPod, ...]] = {}
        """The pods each rule reads on the node, as explain shows them."""

    def follow(self, rules: NodeRules) -> None:
        self._signals, self.shown = self._cluster.gate_pods(rules, self._node.name, self._at)

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        return replace(facts, gate_pod_signals=self._signals)


class WorkloadPods(_Listed):
    """Counted, as the reconciler counts them, only on a node some gate would backfill."""

    kind = "workload-pods"

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        if not any(needs_backfill(node, node.labels, gate) for gate in rules.startup_gates):
            return facts
        try:
            count: int | None = self._cluster.workload_pods(node.name)
        except KubeError as err:  # a user who may not list every pod: unknown, as the reconciler
            stderr_console().print(
                f"note: workload pods on {node.name} not read ({err}): "
                "whether a gate would be backfilled is not shown"
            )
            count = None
        return replace(facts, workload_pods=count)


class CsiNodes(_Listed):
    kind = "csi-nodes"

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        return replace(facts, csi_drivers=self._cluster.csi_drivers(rules, node))


class NodeAgents(_Listed):
    """After `CsiNodes` in the list: a rule's agents include its CSI drivers."""

    kind = "node-agents"

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        """The DaemonSets of the namespaces the rules read and the DaemonSet pods on the node,
        looked up as the reconciler does (and the Node object of its name before it)."""
        agents: dict[str, AgentReadiness] = {}
        if rules.node_agents:
            daemon_sets, pods, _ = self._cluster.agent_objects(rules, True, False, node.name)
            agents = AgentObjects.of(rules, daemon_sets, pods).readiness(
                rules, node, facts.csi_drivers, facts.departed, lifted_taints(rules)
            )
        return replace(facts, agents=agents)


def node_sources(cluster: Cluster, node: NodeState, at: datetime) -> tuple[Sources, InitPods]:
    """Every source of one node, and its init pods (what explain shows of them)."""
    init = InitPods(cluster, node, at)
    rest = (WorkloadPods(cluster, node), CsiNodes(cluster, node), NodeAgents(cluster, node))
    return Sources([init, *rest]), init
