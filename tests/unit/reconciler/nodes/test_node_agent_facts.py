"""Node agents in the reconciler's shell, as a hostile review attacked them: since when an agent
is not Ready across heartbeats and pod replacements, nothing judged before its informers listed,
what the sightings record keeps, a stopped informer's late events, a rules edit naming a missing
DaemonSet, and explain reading what the reconciler reads. (Each failed on 4a3ca7c.)"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_readiness,
    lifted_taints,
    ready_agent_pods,
)
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.re_registration import Departure, PodWrites
from nodegate.core.decisions.sightings import Sighting
from nodegate.core.objects.sightings_record import (
    NodeSightings,
    decode_sightings,
    encode_sightings,
    worth_keeping,
)
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.views.daemon_sets import (
    AgentPod,
)
from nodegate.reconciler.nodes.decide.node_facts import NodeFacts
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.sources.csi_nodes import CsiNodes
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents
from tests.unit.core.builders import NOW, node, rules
from tests.unit.core.test_node_agents import daemon_set, pod

CNI_TAINT = NodeTaint("example.com/cni-not-ready", "NoSchedule")
CONTINUOUS = rules(
    """\
    nodeAgents:
      - name: cni
        daemonSets: [{namespace: kube-system, name: cilium}]
        for: 2m
        taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    """
)
NODE = replace(node(created=NOW - timedelta(days=1)), uid="uid-node-a")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Agents:
    """NodeAgents as far as NodeFacts uses it: the agents' readiness from the pods given."""

    def __init__(self) -> None:
        self.pods: list[AgentPod] = []

    def readiness(
        self, found: NodeRules, on: NodeState, csi: Any, departed: Departure | None = None
    ) -> dict[str, AgentReadiness]:
        sets = [daemon_set()]
        return {
            r.name: agent_readiness(r, on, sets, self.pods, csi, lifted_taints(found), departed)
            for r in found.node_agents
        }

    def ready_pods(self, name: str) -> PodWrites:
        return ready_agent_pods(p for p in self.pods if p.node == name)

    def bound(self, name: str) -> PodWrites | None:
        return {p.uid: p.status_written for p in self.pods if p.node == name}


def node_facts(
    found: NodeRules, clock: Clock, agents: Any, csi_nodes: Any = None, on: NodeState = NODE
) -> NodeFacts:
    cached = CachedNode(on, ())
    return NodeFacts(
        clock,
        lambda: found,
        lambda key: cached if key == on.name else None,
        frozenset,
        SimpleNamespace(facts=lambda n, r, f: f),  # type: ignore[arg-type]
        SimpleNamespace(  # type: ignore[arg-type]
            signals=lambda r, k: {}, ready_pods=lambda r, k: {}, bound=lambda k: {}
        ),
        csi_nodes or SimpleNamespace(drivers=lambda k, u: {}),  # type: ignore[arg-type]
        agents,
        lambda *_: None,
    )


def added(found: NodeRules, facts: NodeFacts, on: NodeState = NODE) -> set[str]:
    return {c.taint.key for c in plan(on, found, facts.of(on.name)).add_taints}


# --- since when: continuity -------------------------------------------------


def test_a_node_heartbeat_between_two_looks_does_not_restart_a_replaced_agents_for() -> None:
    """8c3e979: one outage lasts across pod replacements within a process. `saw` (every Node
    watch event, agents=False) carries the agent's sighting as `unknown` and so marks it
    unconfirmed; the next look then drops the continuity and the `for` starts again."""
    clock, agents = Clock(), Agents()
    facts = node_facts(CONTINUOUS, clock, agents)
    agents.pods = [pod(ready=False, uid="pod-1", transition="2026-11-21T11:59:00Z")]
    facts.of(NODE.name)  # a plan look at NOW: pod-1 not Ready
    clock.now = NOW + timedelta(seconds=5)
    facts.saw(NODE.name, NODE)  # a Node heartbeat (any Node watch event)
    clock.now = NOW + timedelta(seconds=60)
    agents.pods = [pod(ready=False, uid="pod-2", transition="2026-11-21T12:00:59Z")]
    facts.of(NODE.name)  # pod-1 replaced by pod-2, never Ready in between
    clock.now = NOW + timedelta(seconds=125)

    assert added(CONTINUOUS, facts) == {CNI_TAINT.key}, "for restarted by a heartbeat"


def test_the_same_pod_not_ready_again_after_an_unseen_ready_is_a_new_episode() -> None:
    """docs/agents.md 'Time': "the same pod Ready and then not Ready again, is a new episode".
    Its Ready condition's lastTransitionTime changed between two looks, so it was Ready (or at
    least transitioned) in between; continuity keeps the first episode's first sight and the
    `for` is counted from before the current not-Ready stretch began."""
    clock, agents = Clock(), Agents()
    facts = node_facts(CONTINUOUS, clock, agents)
    agents.pods = [pod(ready=False, transition="2026-11-21T11:59:00Z")]
    facts.of(NODE.name)  # NOW: not Ready since 11:59:00
    # Ready at NOW+60s, not Ready again at NOW+70s; the reconcile queued by the Ready event ran
    # after the second change (coalesced), so no look saw it Ready.
    clock.now = NOW + timedelta(seconds=75)
    agents.pods = [pod(ready=False, transition="2026-11-21T12:01:10Z")]
    facts.of(NODE.name)
    clock.now = NOW + timedelta(seconds=125)

    assert added(CONTINUOUS, facts) == set(), "for counted from before the agent was Ready"


# --- nothing judged on data never listed ------------------------------------------

CSI_CONTINUOUS = rules(
    """\
    nodeAgents:
      - name: csi
        csiDrivers: [{name: ebs.csi.aws.com}]
        for: 0s
        taint: {key: example.com/csi-not-ready, effect: NoSchedule}
    """
)


class UnsyncedInformer:
    def __init__(self) -> None:
        self.synced = threading.Event()

    def get(self, key: str) -> None:
        return None

    def items(self) -> list[tuple[str, Any]]:
        return []


def test_a_csi_rule_is_not_looked_up_before_the_csinode_informer_has_listed() -> None:
    """A DaemonSet rule is left out (its taint left as it is) until its informers synced; a
    csiDrivers rule is always looked up, and CsiNodes.drivers answers {} while its informer is
    still listing (a restart, a failover, RBAC for csinodes missing): every driver reads as
    unregistered and a continuous rule taints every node."""
    watching = SimpleNamespace(
        start=lambda *a: (UnsyncedInformer(), threading.Event()), on_node=lambda n: None
    )
    csi = CsiNodes(watching)  # type: ignore[arg-type]
    csi.follow(CSI_CONTINUOUS)
    agents = NodeAgents(watching, lambda: None)  # type: ignore[arg-type]
    agents.follow(CSI_CONTINUOUS)
    facts = node_facts(CSI_CONTINUOUS, Clock(), agents, csi)

    assert added(CSI_CONTINUOUS, facts) == set(), "tainted while no CSINode was read"


# --- the sightings record ----------------------------------------------------------------

POOL = rules(
    """\
    nodeAgents:
      - name: logs
        match: {labels: {pool: workers}}
        daemonSets: [{namespace: logging, name: fluent-bit}]
        taint: {key: example.com/logs-not-ready, effect: NoSchedule}
    """
)


def test_a_node_the_rule_does_not_match_keeps_no_agent_sighting_in_the_record() -> None:
    """A listed DaemonSet that runs on one pool only (nodeSelector = the rule's match) is 'no
    pod' for ever on every other node: those nodes are released, never tainted, yet each keeps
    a sighting in the record (written every few seconds, limited to 512 KiB)."""
    other_pool = node(labels={"pool": "system"})
    assert worth_keeping(other_pool, POOL) == frozenset()


def test_a_hold_a_restart_can_restore_is_not_left_out_for_sightings_it_would_drop() -> None:
    """encode_sightings keeps the earliest first; 'no pod' episodes (token ending '@') are
    dropped by `restored` when read back, yet written first. 2,500 nodes' worth of them (as
    the previous test's pool produces) push out a pod-present hold a restart would keep."""
    key = ("agents.nodegate.dev/logs", "logging/fluent-bit")
    old = NOW - timedelta(days=3)
    nodes = {
        f"system-{i:05d}": NodeSightings(
            f"uid-{i:05d}", {key: Sighting("logging/fluent-bit:none@", old, True)}
        )
        for i in range(2500)
    }
    hold = Sighting("logging/fluent-bit:pod-9:False@2026-11-21T11:59:00Z", NOW, True)
    nodes["worker-1"] = NodeSightings("uid-worker-1", {key: hold})

    assert "worker-1" in decode_sightings(encode_sightings(nodes))


# --- a Node registered again under its name -------------------------------------------------


def test_the_node_the_same_machine_registers_again_is_planned_with_the_pod_ready_for_the_last() -> (
    None
):
    """`went`, as the old Node object goes, keeps the machine it reported and its Ready agent
    pods (`re_registration`): the new Node object of that machine and boot, born with the
    taint, has it lifted by the pod still running there; another machine's does not."""
    gone = replace(NODE, boot_id="boot-1", system_uuid="machine-1")
    agents = Agents()
    agents.pods = [pod(written="2026-11-21T11:00:00Z")]  # before the new Node was created
    for machine, lifted in (("machine-1", True), ("machine-7", False)):
        again = replace(gone, uid="uid-node-a2", created=NOW, taints=(CNI_TAINT,))
        again = replace(again, system_uuid=machine)
        facts = node_facts(CONTINUOUS, Clock(), agents, on=again)
        facts.went(again.name, gone)
        removed = {c.taint.key for c in plan(again, CONTINUOUS, facts.of(again.name)).remove_taints}
        assert (CNI_TAINT.key in removed) == lifted, machine


def test_a_departure_is_kept_until_its_pods_are_gone() -> None:
    gone = replace(NODE, boot_id="boot-1", system_uuid="machine-1")
    agents = Agents()
    agents.pods = [pod(written="2026-11-21T11:00:00Z")]
    facts = node_facts(CONTINUOUS, Clock(), agents, on=replace(NODE, name="elsewhere"))
    facts.went(gone.name, gone)
    facts.prune_departures()
    assert facts.departures.changes() == {gone.name: facts.departures.get(gone.name)}
    agents.pods = []  # the pod GC deleted it
    facts.prune_departures()
    assert facts.departures.get(gone.name) is None
    assert facts.departures.changes() == {}


# --- NodeAgents.follow: pods of a namespace no longer watched ------------------------------

LOGS_LISTED = rules(
    """\
    nodeAgents:
      - name: cni
        daemonSets: [{namespace: kube-system, name: cilium}]
        taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    """
)
OTHER_NS = rules(
    """\
    nodeAgents:
      - name: cni
        daemonSets: [{namespace: networking, name: cilium}]
        taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    """
)


class SyncedInformer:
    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self.synced = threading.Event()
        self.synced.set()
        self._items = items

    def items(self) -> list[tuple[str, Any]]:
        return list(self._items)


def test_a_pod_event_from_an_informer_follow_stopped_does_not_stay_indexed() -> None:
    """`follow` stops a namespace's informers and drops its pods, but the stopped informer may
    still be dispatching (the rest of a list page): its late event must not index the pod
    again, or a stale Ready pod would lift the taint once the namespace is watched again."""
    cilium = daemon_set()
    handlers: list[Any] = []

    def start(name: str, _selection: Any, _slim: Any, on_event: Any, *_: Any) -> Any:
        informer = SyncedInformer([(cilium.ref, cilium)] if name.startswith("daemonsets") else [])
        handlers.append(on_event)
        return informer, threading.Event()

    agents = NodeAgents(SimpleNamespace(start=start, on_node=lambda n: None), lambda: None)  # type: ignore[arg-type]
    agents.follow(LOGS_LISTED)
    stopped_pods = handlers[1]
    agents.follow(OTHER_NS)  # kube-system no longer read: its informers stopped
    stopped_pods("kube-system/cilium-x", None, pod(uid="old"))  # in flight from the stopped one
    agents.follow(LOGS_LISTED)  # read again: a new informer, whose list has no cilium-x
    tainted = node(taints=(CNI_TAINT,))

    assert not agents.readiness(LOGS_LISTED, tainted, {})["cni"].ready


# --- NodeAgentCannotRun: said once, when a DaemonSet changes, an informer syncs or the rules do

CILIUM_ONLY = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
nodeAgents:
  - name: cni
    daemonSets: [{namespace: kube-system, name: cilium}]
    taint: {key: example.com/cni-not-ready, effect: NoSchedule}
"""
WITH_TYPO = CILIUM_ONLY.replace(
    "[{namespace: kube-system, name: cilium}]",
    "[{namespace: kube-system, name: cilium}, {namespace: kube-system, name: cilum}]",
)


def test_a_rules_edit_listing_a_missing_daemon_set_in_a_watched_namespace_is_reported() -> None:
    """The check runs only when a DaemonSet changes or an informer first syncs
    (`AgentReports.daemon_sets_changed`). An edit that lists a missing DaemonSet in a namespace
    already watched starts no informer, so nothing is reported until some DaemonSet there
    changes; meanwhile, continuous, every matching node is tainted after `for`."""
    from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
    from tests.unit.reconciler.nodes.test_controller import synced, update

    api = FakeApi()
    api.add_node(fake_node("n1", {}))
    controller = synced(api)
    reported: list[str] = []
    controller._agent_reports._warn = lambda reason, _message: reported.append(reason)
    cilium = daemon_set()

    def start(name: str, *_: Any) -> tuple[SyncedInformer, threading.Event]:
        informer = SyncedInformer([(cilium.ref, cilium)] if name.startswith("daemonsets") else [])
        return informer, threading.Event()

    agents = NodeAgents(
        SimpleNamespace(start=start, on_node=lambda n: None),  # type: ignore[arg-type]
        controller._agent_reports.daemon_sets_changed,
    )
    controller.sources[controller.sources.index(controller.node_agents)] = agents
    controller.node_agents = agents
    controller.offer_rules(update(CILIUM_ONLY))
    controller._agent_reports.daemon_sets_changed()  # the informers' first sync, as they call it
    assert reported == []
    controller.offer_rules(update(WITH_TYPO))

    assert (
        controller.rules is not None
        and len(controller.rules.node_agents[0].listed_daemon_sets) == 2
    )
    assert reported == ["NodeAgentCannotRun"]


# --- explain reads what the reconciler reads ------------------------------------------------

CSI_ONLY = rules(
    """\
    nodeAgents:
      - name: csi
        csiDrivers: [{name: ebs.csi.aws.com}]
        mode: bootstrapOnly
        taint: {key: example.com/csi-not-ready, effect: NoSchedule}
    """
)


def test_explain_looks_up_a_csi_only_rule_as_the_reconciler_does() -> None:
    """8c3e979 made the reconciler look up a rule reading no DaemonSet namespace (csiDrivers
    only); explain's lookup (`cli.live.sources.NodeAgents`) still returned {} when the rules
    read no namespace, so `nodegate explain` said "agents not looked up" (keep) where the
    reconciler lifts the taint."""
    from nodegate.cli.live.cluster import Cluster
    from nodegate.cli.live.sources import NodeAgents as ExplainedAgents
    from nodegate.core.decisions.verdicts import PlanFacts

    cluster = Cluster.__new__(Cluster)
    cluster._all = lambda selection: []  # type: ignore[method-assign]
    born = node(taints=(NodeTaint("example.com/csi-not-ready", "NoSchedule"),))
    facts = PlanFacts(NOW, csi_drivers={"ebs.csi.aws.com": True})

    found = ExplainedAgents(cluster, born).facts(born, CSI_ONLY, facts).agents

    assert "csi" in found and found["csi"].ready
