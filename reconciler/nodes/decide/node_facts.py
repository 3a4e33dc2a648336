"""What the planner is told about one node beyond the Node itself (`PlanFacts`), gathered in one
place for everyone who plans a node: the blast-radius guard (every cached node, `of`) and one
node's reconcile (`for_plan`).

The facts come from the clock, the taints earlier rules owned (the taint history), what this
leader has seen of the node over time (its conditions' episodes, `condition_sightings`, and its
boots, `track_boot`: both tables are kept here, sighted on every watch event by `saw`; and
the Node object of its name before it, seen go, `Departures`) and,
for a reconcile only, its gates' init pods, its workload pods (the backfill check) and the
labels its record restores; `core.decisions.node_decision.plan_facts` puts what was gathered
together (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from nodegate.core.decisions.node_agents import AgentReadiness, agent_episodes, agent_types_unknown
from nodegate.core.decisions.node_decision import plan_facts
from nodegate.core.decisions.re_registration import Departure, departure, still_deciding
from nodegate.core.decisions.sightings import BootSight, ConditionKey, Sighting, track_boot
from nodegate.core.decisions.sources import Sources
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.sightings_record import worth_keeping
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.records.condition_sightings import ConditionSightings, Departures
from nodegate.reconciler.nodes.records.label_records import LabelWork
from nodegate.reconciler.nodes.sources.csi_nodes import CsiNodes
from nodegate.reconciler.nodes.sources.gate_pods import GatePods
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents


class NodeFacts:
    """The one place a node's facts are gathered and built, and the two tables of what this
    leader has seen of each node over time (`conditions`, `boots`)."""

    def __init__(
        self,
        clock: Callable[[], datetime],
        rules: Callable[[], NodeRules | None],
        cached: Callable[[str], CachedNode | None],
        previously_owned: Callable[[], frozenset[tuple[str, str]]],
        sources: Sources,
        gate_pods: GatePods,
        csi_nodes: CsiNodes,
        node_agents: NodeAgents,
        on_agents: Callable[[str, NodeState, NodeRules, Mapping[str, AgentReadiness]], None],
    ) -> None:
        """`rules`: the rules in force, whose condition types are sighted; `cached`: the node
        cache, whose node is sighted again when its facts are asked for; `sources`: what the
        rules read from the cluster, each asked its part of a reconcile's facts (the init pods,
        the workload-pod check, the CSI drivers registered); `gate_pods` the init pods, for a
        departure; `node_agents` the node-agent rules' DaemonSets and pods, asked at every look
        (a `for` counts from the first sight of a not-Ready agent); `on_agents` is told what a
        reconcile found of them, and of which node (`agent_reports`, `deadlock_reports`)."""
        self._now = clock
        self._on_agents = on_agents
        self._rules = rules
        self._cached = cached
        self._previously_owned = previously_owned
        self._sources = sources
        self._gate_pods = gate_pods
        self._csi_nodes = csi_nodes
        self._agents = node_agents
        self.conditions = ConditionSightings()
        self.boots: dict[str, BootSight] = {}
        """When this leader saw each node's boots, by node name: set from the watch events
        only, read by any thread."""
        self.departures = Departures()

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): its sightings and boots go (what decides for the
        next Node of its name was kept by `went`)."""
        self.conditions.forget(name)
        self.boots.pop(name, None)

    def went(self, key: str, node: NodeState) -> None:
        """The Node object `node` went (deleted, or replaced under its name while the watch was
        down), before it is forgotten: keep the machine it reported and the pods Ready for it
        (`re_registration.departure`), for the next Node of its name."""
        rules = self._rules()
        ready = dict(self._agents.ready_pods(key))
        if rules is not None:
            ready.update(self._gate_pods.ready_pods(rules, key))
        boot = self.boots.get(key)
        rebooted = boot.previous_last_seen if boot is not None else None
        before = self.departures.get(key)
        self.departures.went(key, departure(node, ready, before, self._now(), rebooted))

    def prune_departures(self) -> None:
        """Drop what the departures hold that no longer decides anything: pods gone, or written
        again for the Node of their name (`re_registration.still_deciding`)."""

        def kept(key: str, gone: Departure) -> Departure | None:
            agents, inits = self._agents.bound(key), self._gate_pods.bound(key)
            bound = None if agents is None or inits is None else {**inits, **agents}
            cached = self._cached(key)
            return still_deciding(gone, cached.state if cached is not None else None, bound)

        self.departures.prune(kept)

    def saw(self, key: str, node: NodeState) -> None:
        """A watch event: sight the node's conditions and its boot (its agents are looked at
        when it is planned: a heartbeat says nothing of them)."""
        self._look(key, node, self._now(), agents=False)
        if (boot := track_boot(self.boots.get(key), node.boot_id, self._now())) is not None:
            self.boots[key] = boot

    def of(self, key: str, judged: NodeRules | None = None) -> PlanFacts:
        """The node's facts as the blast-radius guard plans it: nothing asked of its init pods
        or of the API server; its agents looked up for the rules `judged` (an offered update)
        when given, so a rule renamed or retargeted is judged by its own agents."""
        cached = self._cached(key)
        agents = None
        if judged is not None and judged.node_agents and cached is not None:
            drivers = self._csi_nodes.drivers(key, cached.state.uid)
            agents = self._agents.readiness(judged, cached.state, drivers, self.departures.get(key))
        return self._plan_facts(key, agents)

    def for_plan(
        self, key: str, node: CachedNode, rules: NodeRules, work: LabelWork | None
    ) -> PlanFacts:
        """The node's facts for its reconcile: the guard's, and its gates' init pods, its
        workload pods if a gate would backfill it and the labels its record restores (`work`)."""
        facts = self._plan_facts(key, restored=work.decision.restore if work is not None else None)
        self._on_agents(key, node.state, rules, facts.agents)
        return self._sources.facts(node.state, rules, facts)

    def _plan_facts(
        self,
        key: str,
        agents: Mapping[str, AgentReadiness] | None = None,
        restored: Mapping[str, str] | None = None,
    ) -> PlanFacts:
        """Now, the cached node's conditions sighted once more (a node that sent no event
        since the rules began reading a condition type is sighted then), its agents (`agents`
        instead, when given) and what this leader saw of it."""
        now = self._now()
        cached = self._cached(key)
        sightings, found = self._look(key, cached.state, now) if cached is not None else ({}, {})
        return plan_facts(
            now,
            self._previously_owned(),
            sightings,
            self.boots.get(key),
            found if agents is None else agents,
            restored_labels=restored,
            departed=self.departures.get(key),
        )

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
            drivers = self._csi_nodes.drivers(key, node.uid)
            found = self._agents.readiness(rules, node, drivers, self.departures.get(key))
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
