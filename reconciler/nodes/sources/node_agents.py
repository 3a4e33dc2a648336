"""The DaemonSets and DaemonSet pods node-agent rules read (`nodeAgents`): watched while the
rules read them, per namespace (every namespace for `daemonSets: auto`), held slim
(`core.decisions.node_agents`), the pods indexed by node.

The pod watch selects on the label the DaemonSet controller puts on every pod it makes, so it
carries DaemonSet pods only; which DaemonSet owns a pod is its controller reference's uid,
which a kubelet cannot set (NodeRestriction lets it make mirror pods owned by its Node only).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from nodegate.core.decisions.agent_deadlocks import (
    Deadlock,
    deadlocks,
    may_wait_on_each_other,
    node_scene,
)
from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_readiness,
    agents_matter,
    daemon_set_problems,
    lifted_taints,
    ready_agent_pods,
)
from nodegate.core.decisions.re_registration import Departure, PodWrites
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.rules.rule_kinds import ALL_NAMESPACES
from nodegate.core.views.daemon_sets import (
    DAEMON_SET_POD_LABEL,
    AgentPod,
    DaemonSetView,
    slim_agent_pod,
    slim_daemon_set,
)
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import Selection
from nodegate.reconciler.nodes.sources.watched import Watching


class _OnNode(Protocol):
    @property
    def node(self) -> str: ...


PodT = TypeVar("PodT", bound=_OnNode)


@dataclass
class PodsByNode(Generic[PodT]):
    """Pods indexed by the node they are on, as an informer's events move them; a node with
    none left holds no entry. Not locked: its owner's lock guards it."""

    nodes: dict[str, dict[str, PodT]] = field(default_factory=dict)

    def move(self, key: str, old: PodT | None, new: PodT | None) -> None:
        if old is not None and (pods := self.nodes.get(old.node)) is not None:
            pods.pop(key, None)
            if not pods:
                del self.nodes[old.node]
        if new is not None and new.node:
            self.nodes.setdefault(new.node, {})[key] = new

    def on(self, node: str) -> list[PodT]:
        return list(self.nodes.get(node, {}).values())


@dataclass(frozen=True)
class _Watched:
    """One namespace's (`ALL_NAMESPACES`: every one's) DaemonSet and pod informers."""

    daemon_sets: tuple[Informer[DaemonSetView], threading.Event]
    pods: tuple[Informer[AgentPod], threading.Event]

    def stop(self) -> None:
        self.daemon_sets[1].set()
        self.pods[1].set()

    def synced(self) -> bool:
        return self.daemon_sets[0].synced.is_set() and self.pods[0].synced.is_set()


class NodeAgents:
    kind = "node-agents"

    def __init__(self, watching: Watching, on_every_node: Callable[[], None]) -> None:
        """`on_every_node`: enqueue every node (an informer synced, or a DaemonSet's placement
        changed: which nodes it concerns is for each node's plan to say)."""
        self._watching = watching
        self._on_every_node = on_every_node
        self._watched: dict[str, _Watched] = {}
        self._by_node: PodsByNode[AgentPod] = PodsByNode()
        self._live: dict[str, object] = {}
        """Namespace -> the mark of its pod informer now running: an event from one `follow`
        stopped (still dispatching a list page) is dropped, not indexed after its namespace's
        pods were."""
        self._lock = threading.Lock()

    def follow(self, rules: NodeRules) -> None:
        wanted = set(rules.reads().agent_namespaces)
        if ALL_NAMESPACES in wanted:
            wanted = {ALL_NAMESPACES}
        with self._lock:
            for namespace in set(self._watched) - wanted:
                self._watched.pop(namespace).stop()
                del self._live[namespace]
                self._by_node.nodes = {
                    node: kept
                    for node, pods in self._by_node.nodes.items()
                    if (kept := {k: p for k, p in pods.items() if not _in(namespace, k)})
                }
            for namespace in wanted - set(self._watched):
                self._watched[namespace] = self._start(namespace)

    def _start(self, namespace: str) -> _Watched:
        scope = namespace or None
        where = namespace or "all namespaces"
        live = self._live[namespace] = object()
        # Both run until the rules stop reading the namespace or the controller stops.
        return _Watched(
            self._watching.start(
                f"daemonsets {where}",
                Selection("DaemonSet", scope),
                slim_daemon_set,
                self._on_daemon_set,
                self._on_every_node,
            ),
            self._watching.start(
                f"daemonset pods {where}",
                Selection("Pod", scope, label_selector=DAEMON_SET_POD_LABEL),
                slim_agent_pod,
                lambda key, old, new: self._on_pod(key, old, new, (namespace, live)),
                self._on_every_node,
            ),
        )

    def _on_daemon_set(
        self, key: str, old: DaemonSetView | None, new: DaemonSetView | None
    ) -> None:
        # Its status changes with every pod's readiness, which the pod events carry: only a
        # change of what it is (its placement, labels, uid) is worth a look at every node.
        if old != new:
            self._on_every_node()

    def _on_pod(
        self,
        key: str,
        old: AgentPod | None,
        new: AgentPod | None,
        source: tuple[str, object] | None = None,
    ) -> None:
        if old == new:  # a relist, or a change to what agents do not read
            return
        with self._lock:
            if source is not None and self._live.get(source[0]) is not source[1]:
                return  # from an informer `follow` stopped
            self._by_node.move(key, old, new)
        for node in {v.node for v in (old, new) if v is not None and v.node}:
            self._watching.on_node(node)

    def readiness(
        self,
        rules: NodeRules,
        node: NodeState,
        csi_drivers: Mapping[str, bool] | None,
        departed: Departure | None = None,
    ) -> dict[str, AgentReadiness]:
        """Each node-agent rule's agents on `node`, for the rules whose namespaces are watched
        and synced, and whose CSI drivers are known (`csi_drivers` None: not listed yet); the
        others are left out, as are rules whose answer is not needed (the node does not match,
        or a bootstrapOnly taint already lifted): nothing is known of their agents, and their
        taints are left as they are. `departed`: the Node object of its name before it, as
        nodegate saw it go (`re_registration`)."""
        wanted = [r for r in rules.node_agents if agents_matter(r, node)]
        if not wanted:
            return {}
        with self._lock:
            synced = {ns for ns, w in self._watched.items() if w.synced()}
            daemon_sets = self._daemon_sets()
            pods = self._by_node.on(node.name)
        lifted = lifted_taints(rules)
        return {
            rule.name: agent_readiness(
                rule, node, daemon_sets, pods, csi_drivers or {}, lifted, departed
            )
            for rule in wanted
            if _known(rule.reads().agent_namespaces, synced)
            and (csi_drivers is not None or not rule.csi_drivers)
        }

    def ready_pods(self, node: str) -> PodWrites:
        """The Ready agent pods bound to the name `node`, with their status writes (what a
        departure keeps)."""
        with self._lock:
            return ready_agent_pods(self._by_node.on(node))

    def bound(self, node: str) -> PodWrites | None:
        """Every agent pod bound to the name `node`, with its status write; None until every
        watched namespace has listed (a pod not listed yet is not gone)."""
        with self._lock:
            if not all(w.synced() for w in self._watched.values()):
                return None
            return {p.uid: p.status_written for p in self._by_node.on(node)}

    def problems(self, rules: NodeRules) -> tuple[str, ...]:
        """Listed DaemonSets that can never run where their rule's taint is, of the rules whose
        namespaces are synced (a DaemonSet not listed yet is not missing)."""
        with self._lock:
            synced = {ns for ns, w in self._watched.items() if w.synced()}
            daemon_sets = self._daemon_sets()
        known = [r for r in rules.node_agents if _known(r.reads().agent_namespaces, synced)]
        return daemon_set_problems(known, daemon_sets)

    def deadlocks(self, rules: NodeRules, node: NodeState) -> tuple[Deadlock, ...]:
        """The rules waiting for each other on the node, as its DaemonSets and pods show them
        (`agent_deadlocks`; seen ones only); none until every namespace the rules read (the
        gates' init pods' too) is listed."""
        if not rules.node_agents or not may_wait_on_each_other(rules, node):
            return ()
        with self._lock:
            synced = {ns for ns, w in self._watched.items() if w.synced()}
            if not _known(rules.reads().agent_namespaces, synced):
                return ()
            daemon_sets = self._daemon_sets()
            running = frozenset(
                p.owner_uid for p in self._by_node.on(node.name) if not p.terminating
            )
        found = deadlocks(rules, node_scene(node), daemon_sets, running)
        return tuple(d for d in found if d.certain)

    def _daemon_sets(self) -> list[DaemonSetView]:
        return [view for w in self._watched.values() for _, view in w.daemon_sets[0].items()]

    def synced(self) -> bool:
        with self._lock:
            return all(w.synced() for w in self._watched.values())

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        """Its part, the agents' readiness, is looked up at every look at the node, with its
        conditions (`NodeFacts`: a `for` counts from the first sight), not at a reconcile's."""
        return facts

    def stop(self) -> None:
        with self._lock:
            for watched in self._watched.values():
                watched.stop()
            self._watched.clear()
            self._live.clear()
            self._by_node.nodes.clear()


def _in(namespace: str, key: str) -> bool:
    return namespace == ALL_NAMESPACES or key.startswith(namespace + "/")


def _known(wanted: frozenset[str], synced: set[str]) -> bool:
    """Whether every namespace a rule reads is watched and synced (every namespace's watch
    covers any)."""
    return ALL_NAMESPACES in synced or wanted <= synced
