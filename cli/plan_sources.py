"""Where `nodegate plan` reads what it plans with: the live cluster, or files (`plan --nodes
FILE`, offline, for a CI job without cluster credentials).

A source answers the questions the plan asks (the rules in force, the clock, the taint history,
the Nodes, and for node-agent rules the DaemonSets, their pods and the CSINodes) and says what
it could not read and assumed instead. `plan_cmd.planned` makes every decision from either, in
one sequence, so the offline plan cannot drift from the live one. The live source is
`cli.live.plan_source.LiveSource` (it needs the Kubernetes client); this module stays free of
it, so the offline plan never loads the client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from nodegate.core.decisions.dry_run import live_owned_taints
from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    LiftedTaints,
    agent_readiness,
)
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.rules.cluster_reads import cluster_reads
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.rules.rule_kinds import ALL_NAMESPACES
from nodegate.core.views.csi_nodes import CsiNodeView, registered_drivers, slim_csinode
from nodegate.core.views.daemon_sets import (
    DAEMON_SET_POD_LABEL,
    AgentPod,
    DaemonSetView,
    slim_agent_pod,
    slim_daemon_set,
)
from nodegate.core.views.raw import RawObject

Owned = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class InForce:
    """The rules the new ones are compared with, in words, and the guard's limit the running
    reconciler published (None: not said; the reconciler's default then)."""

    rules: NodeRules | None
    which: str
    max_untaint_share: float | None = None


@dataclass(frozen=True)
class AgentObjects:
    """What node-agent rules read beyond the Node, as the reconciler reads it."""

    daemon_sets: tuple[DaemonSetView, ...] = ()
    pods: Mapping[str, tuple[AgentPod, ...]] = field(default_factory=dict)
    """The DaemonSet pods, by the node they are bound to."""
    csi_nodes: Mapping[str, CsiNodeView] = field(default_factory=dict)
    """The CSINodes, by name (a node's own is named after it)."""
    departures: Mapping[str, Departure] = field(default_factory=dict)
    """What the leader kept of the Node objects it saw go, by name (`re_registration`)."""


class PlanSource(Protocol):
    """What `nodegate plan` plans with. Each read may raise what its source raises (the live
    cluster: `KubeError`, `RulesInForceUnknownError`)."""

    def in_force(self) -> InForce: ...

    def now(self) -> datetime: ...

    def previously_owned(self, in_force: NodeRules | None) -> Owned:
        """The taint history: what earlier rules generations owned."""
        ...

    def nodes(self, on_page: Callable[[int], None]) -> list[NodeState]: ...

    def agent_objects(self, rules: NodeRules) -> AgentObjects:
        """What `rules`' node agents read (asked only when the rules have any)."""
        ...

    def assumed(self, new: NodeRules) -> tuple[str, ...]:
        """What the source could not read and assumed instead, in words (none: live)."""
        ...


def agents_read(rules: NodeRules, source: str) -> bool:
    """Whether node-agent rules read `source` (`cluster_reads`): "node-agents" (DaemonSets and
    their pods, listed or `daemonSets: auto`) or "csi-nodes" (CSI drivers)."""
    read = cluster_reads(rules).of(source)
    return read is not None and any(r.name in read.rules for r in rules.node_agents)


def agent_objects(
    rules: NodeRules,
    daemon_sets: Iterable[RawObject],
    pods: Iterable[RawObject],
    csi_nodes: Iterable[RawObject],
    departures: Mapping[str, Departure],
) -> AgentObjects:
    """The objects as the reconciler's informers hold them: DaemonSets and DaemonSet pods of
    the namespaces the rules read (the live source lists only those; a file may hold more),
    slimmed by the reconciler's own parsers."""
    namespaces = rules.reads().agent_namespaces

    def read(raw: RawObject) -> bool:
        namespace = (raw.get("metadata") or {}).get("namespace") or "default"
        return ALL_NAMESPACES in namespaces or namespace in namespaces

    by_node: dict[str, list[AgentPod]] = {}
    for raw in pods:
        if read(raw) and DAEMON_SET_POD_LABEL in ((raw.get("metadata") or {}).get("labels") or {}):
            pod = slim_agent_pod(raw)
            if pod.node:
                by_node.setdefault(pod.node, []).append(pod)
    return AgentObjects(
        daemon_sets=tuple(slim_daemon_set(raw) for raw in daemon_sets if read(raw)),
        pods={node: tuple(found) for node, found in by_node.items()},
        csi_nodes={view.node: view for view in map(slim_csinode, csi_nodes)},
        departures=dict(departures),
    )


def node_agents(
    rules: NodeRules, node: NodeState, objects: AgentObjects, lifted: LiftedTaints
) -> dict[str, AgentReadiness]:
    """Each node-agent rule's agents on `node` (`PlanFacts.agents`), as the reconciler's
    blast-radius guard looks them up for the rules it judges."""
    drivers = registered_drivers(objects.csi_nodes.get(node.name), node.uid)
    departed = objects.departures.get(node.name)
    pods = objects.pods.get(node.name, ())
    return {
        rule.name: agent_readiness(rule, node, objects.daemon_sets, pods, drivers, lifted, departed)
        for rule in rules.node_agents
    }


@dataclass(frozen=True)
class FileSource:
    """The plan's inputs read from files (the shell reads them): the Nodes as `kubectl get
    nodes -o yaml` prints them, the rules in force if given, the objects node agents read if
    given, and the clock. What files cannot say is assumed, and `assumed` says what."""

    node_list: tuple[NodeState, ...]
    rules_in_force: InForce
    at: datetime
    daemon_sets: tuple[RawObject, ...] = ()
    pods: tuple[RawObject, ...] = ()
    csi_nodes: tuple[RawObject, ...] = ()
    limit_given: bool = False
    clock_given: bool = False

    def in_force(self) -> InForce:
        return self.rules_in_force

    def now(self) -> datetime:
        return self.at

    def previously_owned(self, in_force: NodeRules | None) -> Owned:
        """The reconciler records the taints of the rules it applies: at least those of the
        rules in force are in its history."""
        return live_owned_taints(in_force) if in_force is not None else frozenset()

    def nodes(self, on_page: Callable[[int], None]) -> list[NodeState]:
        on_page(len(self.node_list))
        return list(self.node_list)

    def agent_objects(self, rules: NodeRules) -> AgentObjects:
        return agent_objects(rules, self.daemon_sets, self.pods, self.csi_nodes, {})

    def assumed(self, new: NodeRules) -> tuple[str, ...]:
        history = "the taints of the rules in force only" if self.rules_in_force.rules else "none"
        said = [
            f"the taint history holds {history}: a taint that only an earlier rules generation "
            "owned stays in this plan, where the reconciler would remove it"
        ]
        if not self.limit_given:
            said.append(
                "the guard's limit is the reconciler's default (the running reconciler's is in "
                "its status record; --max-untaint-share sets it)"
            )
        if not self.clock_given:
            said.append("now is this host's clock, not the API server's (--now sets it)")
        if new.node_agents:
            said.append(
                "no Node object was seen go (the reconciler's sightings record): a pod Ready "
                "for a deleted Node of the same name does not count for its successor"
            )
        return tuple(said)
