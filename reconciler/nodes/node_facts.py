"""What the planner is told about one node beyond the Node itself (`PlanFacts`), gathered in one
place for everyone who plans a node: the blast-radius guard (every cached node, `of`) and one
node's reconcile (`for_plan`).

The facts come from the clock, the taints earlier rules owned (the taint history), what this
leader has seen of the node over time (its conditions' episodes, `condition_sightings`, and its
boots, `BootSightings`: both tables are kept here, sighted on every watch event by `saw`) and,
for a reconcile only, its gates' init pods, its workload pods (the backfill check), the eviction
budget's holds and the labels its record restores. `plan_facts` puts what was gathered together
(pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from nodegate.core.decisions.boot_sight import BootSight, track_boot
from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_episodes,
    agent_types_unknown,
)
from nodegate.core.decisions.sightings import ConditionKey, Sighting
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.sightings_record import worth_keeping
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.nodes.condition_sightings import ConditionSightings
from nodegate.reconciler.nodes.csi_nodes import CsiNodes
from nodegate.reconciler.nodes.gate_pods import GatePods
from nodegate.reconciler.nodes.gate_reports import GateReports
from nodegate.reconciler.nodes.label_records import LabelWork
from nodegate.reconciler.nodes.node_agents import NodeAgents
from nodegate.reconciler.nodes.node_view import CachedNode

Owned = frozenset[tuple[str, str]]
"""(key, effect) of the taints rules of earlier generations owned (`TaintHistory.known`)."""


def plan_facts(
    now: datetime,
    previously_owned: Owned,
    sightings: Mapping[ConditionKey, Sighting],
    boot: BootSight | None,
    agents: Mapping[str, AgentReadiness] | None = None,
    *,
    gate_pod_signals: Mapping[str, tuple[Sighting, ...]] | None = None,
    csi_drivers: Mapping[str, bool] | None = None,
    workload_pods: int | None = None,
    budget_waiting: Mapping[str, str] | None = None,
    restored_labels: Mapping[str, str] | None = None,
) -> PlanFacts:
    """A node's facts from what was gathered about it; the keywords only a reconcile gathers
    (the guard plans every node without them)."""
    return PlanFacts(
        now=now,
        restored_labels=restored_labels or {},
        previously_owned=previously_owned,
        condition_sightings=sightings,
        gate_pod_signals=gate_pod_signals or {},
        csi_drivers=csi_drivers or {},
        agents=agents or {},
        boot_first_seen=boot.first_seen if boot is not None else None,
        previous_boot_seen=boot.previous_last_seen if boot is not None else None,
        workload_pods=workload_pods,
        budget_waiting=budget_waiting or {},
    )


class BootSightings:
    """When this leader saw each node's boots (`boot_sight`), by node name: set from the watch
    events only, read by any thread."""

    def __init__(self) -> None:
        self._by_node: dict[str, BootSight] = {}

    def see(self, key: str, boot_id: str, now: datetime) -> None:
        if (boot := track_boot(self._by_node.get(key), boot_id, now)) is not None:
            self._by_node[key] = boot

    def get(self, key: str) -> BootSight | None:
        return self._by_node.get(key)

    def forget(self, key: str) -> None:
        self._by_node.pop(key, None)


class NodeFacts:
    """The one place a node's facts are gathered and built, and the two tables of what this
    leader has seen of each node over time (`conditions`, `boots`)."""

    def __init__(
        self,
        clock: Callable[[], datetime],
        rules: Callable[[], NodeRules | None],
        cached: Callable[[str], CachedNode | None],
        previously_owned: Callable[[], Owned],
        gate_pods: GatePods,
        gates: GateReports,
        csi_nodes: CsiNodes,
        node_agents: NodeAgents,
        on_agents: Callable[[str, NodeState, NodeRules, Mapping[str, AgentReadiness]], None] = (
            lambda *_: None
        ),
    ) -> None:
        """`rules`: the rules in force, whose condition types are sighted; `cached`: the node
        cache, whose node is sighted again when its facts are asked for; `gate_pods` and
        `gates`: the init pods and the workload-pod check, and `csi_nodes` the CSI drivers
        registered, asked by a reconcile only; `node_agents` the node-agent rules' DaemonSets and
        pods, asked at every look (a `for` counts from the first sight of a not-Ready agent);
        `on_agents` is told what a reconcile found of them, and of which node (`agent_reports`,
        `deadlock_reports`)."""
        self._now = clock
        self._on_agents = on_agents
        self._rules = rules
        self._cached = cached
        self._previously_owned = previously_owned
        self._gate_pods = gate_pods
        self._gates = gates
        self._csi_nodes = csi_nodes
        self._agents = node_agents
        self.conditions = ConditionSightings()
        self.boots = BootSightings()

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): its sightings and boots go."""
        self.conditions.forget(name)
        self.boots.forget(name)

    def saw(self, key: str, node: NodeState) -> None:
        """A watch event: sight the node's conditions and its boot (its agents are looked at
        when it is planned: a heartbeat says nothing of them)."""
        self._look(key, node, self._now(), agents=False)
        self.boots.see(key, node.boot_id, self._now())

    def of(self, key: str, judged: NodeRules | None = None) -> PlanFacts:
        """The node's facts as the blast-radius guard plans it: nothing asked of its init pods
        or of the API server; its agents looked up for the rules `judged` (an offered update)
        when given, so a rule renamed or retargeted is judged by its own agents."""
        now, sightings, agents = self._sighted(key)
        cached = self._cached(key)
        if judged is not None and judged.node_agents and cached is not None:
            drivers = self._csi_nodes.drivers(key, cached.state.uid)
            agents = self._agents.readiness(judged, cached.state, drivers)
        return plan_facts(now, self._previously_owned(), sightings, self.boots.get(key), agents)

    def for_plan(
        self,
        key: str,
        node: CachedNode,
        rules: NodeRules,
        work: LabelWork | None,
        waiting: Mapping[str, str] | None = None,
    ) -> PlanFacts:
        """The node's facts for its reconcile: the guard's, and its gates' init pods, its
        workload pods if a gate would backfill it, the rules whose evicting taint waits for
        the budget (`waiting`) and the labels its record restores (`work`)."""
        now, sightings, agents = self._sighted(key)
        self._on_agents(key, node.state, rules, agents)
        return plan_facts(
            now,
            self._previously_owned(),
            sightings,
            self.boots.get(key),
            agents,
            gate_pod_signals=self._gate_pods.signals(rules, key),
            csi_drivers=self._csi_nodes.drivers(key, node.state.uid) or {},
            workload_pods=self._gates.workload_pods(node, rules),
            budget_waiting=waiting,
            restored_labels=work.decision.restore if work is not None else None,
        )

    def _sighted(
        self, key: str
    ) -> tuple[datetime, Mapping[ConditionKey, Sighting], Mapping[str, AgentReadiness]]:
        """Now, the cached node's conditions sighted once more (a node that sent no event
        since the rules began reading a condition type is sighted then), and its agents."""
        now = self._now()
        cached = self._cached(key)
        if cached is None:
            return now, {}, {}
        return now, *self._look(key, cached.state, now)

    def _look(
        self, key: str, node: NodeState, now: datetime, agents: bool = True
    ) -> tuple[Mapping[ConditionKey, Sighting], Mapping[str, AgentReadiness]]:
        """Sight the node's conditions and (`agents`) its agents' not-Ready episodes; those
        still deciding something are kept for a restart, and those of agents not looked up
        are carried as they were."""
        rules = self._rules()
        if rules is None:
            return self.conditions.look(key, node, rules, now), {}
        found: Mapping[str, AgentReadiness] = {}
        if agents and rules.node_agents:
            found = self._agents.readiness(rules, node, self._csi_nodes.drivers(key, node.uid))
        sighted = self.conditions.look(
            key,
            node,
            rules,
            now,
            worth_keeping(node, rules),
            agent_episodes(rules, found),
            agent_types_unknown(rules, found),
        )
        return sighted, found
