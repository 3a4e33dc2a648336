"""What `nodegate plan` plans with (`PlanInputs`), read from the live cluster or from files
(`plan --nodes FILE`, offline, for a CI job without cluster credentials), and what node-agent
rules read beyond the Node, as the reconciler's informers hold it (`AgentObjects`: the plan's,
and `nodegate explain`'s of its one node).

`plan_cmd.planned` makes every decision from either source, in one sequence, so the offline
plan cannot drift from the live one. This module stays free of the Kubernetes client, so the
offline plan never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from nodegate.core.decisions.node_agents import AgentReadiness, LiftedTaints, agent_readiness
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.rules.cluster_reads import cluster_reads
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.rules.rule_kinds import ALL_NAMESPACES
from nodegate.core.views.csi_nodes import CsiNodeView, slim_csinode
from nodegate.core.views.daemon_sets import (
    DAEMON_SET_POD_LABEL,
    AgentPod,
    DaemonSetView,
    slim_agent_pod,
    slim_daemon_set,
)
from nodegate.core.views.raw import RawObject


@dataclass(frozen=True)
class AgentObjects:
    """What node-agent rules read beyond the Node, as the reconciler reads it."""

    daemon_sets: tuple[DaemonSetView, ...]
    pods: Mapping[str, tuple[AgentPod, ...]]
    """The DaemonSet pods, by the node they are bound to."""
    csi_nodes: Mapping[str, CsiNodeView]
    """The CSINodes, by name (a node's own is named after it)."""
    departures: Mapping[str, Departure]
    """What the leader kept of the Node objects it saw go, by name (`re_registration`)."""

    @classmethod
    def of(
        cls,
        rules: NodeRules,
        daemon_sets: Iterable[RawObject],
        pods: Iterable[RawObject],
        csi_nodes: Iterable[RawObject] = (),
        departures: Mapping[str, Departure] | None = None,
    ) -> AgentObjects:
        """The objects as the reconciler's informers hold them: DaemonSets and DaemonSet pods of
        the namespaces the rules read (the cluster lists only those; a file may hold more),
        slimmed by the reconciler's own parsers."""
        namespaces = rules.reads().agent_namespaces

        def read(raw: RawObject) -> bool:
            namespace = (raw.get("metadata") or {}).get("namespace") or "default"
            return ALL_NAMESPACES in namespaces or namespace in namespaces

        by_node: dict[str, list[AgentPod]] = {}
        for raw in pods:
            labels = (raw.get("metadata") or {}).get("labels") or {}
            if read(raw) and DAEMON_SET_POD_LABEL in labels:
                pod = slim_agent_pod(raw)
                if pod.node:
                    by_node.setdefault(pod.node, []).append(pod)
        return cls(
            daemon_sets=tuple(slim_daemon_set(raw) for raw in daemon_sets if read(raw)),
            pods={node: tuple(found) for node, found in by_node.items()},
            csi_nodes={view.node: view for view in map(slim_csinode, csi_nodes)},
            departures=dict(departures or {}),
        )

    def readiness(
        self,
        rules: NodeRules,
        node: NodeState,
        drivers: Mapping[str, bool],
        departed: Departure | None,
        lifted: LiftedTaints,
    ) -> dict[str, AgentReadiness]:
        """Each node-agent rule's agents on `node` (`PlanFacts.agents`), as the reconciler looks
        them up for the rules it judges."""
        pods = self.pods.get(node.name, ())
        return {
            rule.name: agent_readiness(
                rule, node, self.daemon_sets, pods, drivers, lifted, departed
            )
            for rule in rules.node_agents
        }


@dataclass(frozen=True)
class PlanInputs:
    """What a plan plans with, from the cluster or from files; what files cannot say is
    assumed, and `assumed` says what (live: nothing)."""

    in_force: NodeRules | None
    which: str
    """The rules in force, in words."""
    at: datetime
    owned: frozenset[tuple[str, str]]
    """The taint history: what earlier rules generations owned."""
    nodes: list[NodeState]
    agents: AgentObjects | None = None
    """What the new rules' node agents read (None: they have none)."""
    published_limit: float | None = None
    """The guard's limit the running reconciler published (None: not said; its default then)."""
    assumed: tuple[str, ...] = ()


def agents_read(rules: NodeRules, source: str) -> bool:
    """Whether node-agent rules read `source` (`cluster_reads`): "node-agents" (DaemonSets and
    their pods, listed or `daemonSets: auto`) or "csi-nodes" (CSI drivers)."""
    read = cluster_reads(rules).of(source)
    return read is not None and any(r.name in read.rules for r in rules.node_agents)
