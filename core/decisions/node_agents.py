"""Node agents (`nodeAgents` rules): which agents a node waits for, whether each is Ready
there, and what the rule's taint does about it. Pure; the reconciler's DaemonSet and pod
informers and `nodegate explain` give it the same slim views.

An agent is a DaemonSet's pod on the node (owned by that DaemonSet's uid, not being deleted,
Ready, and Ready for this Node object: `re_registration`), or a CSI driver the node's CSINode
lists.
Whether the node has been without one long enough (`for`) is counted from nodegate's first
sight of the episode (`sightings`), on the API server's clock; the episode is named by what
was seen (which pod, its Ready condition's transition as written), so a pod replaced or Ready
again in between starts a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodegate.core.decisions.re_registration import Departure, PodWrites, of_this_node
from nodegate.core.decisions.sightings import ConditionKey
from nodegate.core.rules.autoscalers import GATE_PREFIXES
from nodegate.core.rules.model import NodeAgentRule, NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.text.k8s_names import READINESS_TAINT_PREFIX
from nodegate.core.views.daemon_set_placement import refusal, tolerates
from nodegate.core.views.daemon_sets import AgentPod, DaemonSetView

AGENT_EPISODE_PREFIX = "agents.nodegate.dev/"
"""The sighting of a rule's not-Ready episode is kept beside the node's conditions' under this
type prefix and the rule's name (`agent_episode_key`)."""


@dataclass(frozen=True)
class AgentState:
    """One agent on one node."""

    agent: str
    """`namespace/name` of a DaemonSet, or `CSI driver <name>`."""
    ready: bool
    why: str
    episode: str = ""
    """Its not-Ready episode as seen (empty when Ready); ending in '@': one that cannot be told
    from the next (nothing the node wrote changes between them)."""
    refused: str | None = None
    """Why the DaemonSet controller will not run this listed DaemonSet's pod on the node (its
    placement, another taint), when it will not; its rule's own taint aside."""
    awaited: bool = True
    """False: refused, and the rule does not wait for it there (`cannotRun: skip`)."""


@dataclass(frozen=True)
class AgentReadiness:
    """A rule's agents on one node."""

    agents: tuple[AgentState, ...]

    @property
    def ready(self) -> bool:
        return all(a.ready for a in self.agents)

    @property
    def not_ready(self) -> tuple[AgentState, ...]:
        return tuple(a for a in self.agents if not a.ready)

    @property
    def not_awaited(self) -> tuple[AgentState, ...]:
        return tuple(a for a in self.agents if not a.awaited)

    def summary(self) -> str:
        awaited = [a for a in self.agents if a.awaited]
        skipped = "; ".join(f"{a.agent} ({a.why})" for a in self.not_awaited)
        if not awaited:
            said = "no agent runs on the node"
        elif self.ready:
            said = "agents Ready: " + ", ".join(a.agent for a in awaited)
        else:
            said = "waiting for " + "; ".join(
                f"{a.agent} ({a.why})" for a in awaited if not a.ready
            )
        return f"{said}; not awaited: {skipped}" if skipped else said


def agent_episode_type(rule: NodeAgentRule) -> str:
    """The sighting type of the rule's agents' not-Ready episodes (one per agent, the agent's
    name in the status place: `agent_episode_key`)."""
    return AGENT_EPISODE_PREFIX + rule.name


def agent_episode_key(rule: NodeAgentRule, agent: AgentState) -> ConditionKey:
    return (agent_episode_type(rule), agent.agent)


TRANSIENT_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("karpenter.sh/unregistered", "NoExecute"),
    }
)
"""Taints a node carries while it starts (the node lifecycle controller's, the cloud
controller's, Karpenter's until the node registers): a DaemonSet kept away only by them runs on
the node once it is up, so discovery waits for it (Vigil leaves such known startup taints out
the same way)."""
START_UP_KEY_PREFIXES = (*GATE_PREFIXES, READINESS_TAINT_PREFIX)
"""Keys autoscalers and node-readiness-controller read as startup taints (lifted by whoever
put them)."""
START_UP_KEY_SUFFIX = "/agent-not-ready"
"""Another agent's own startup taint (Cilium's node.cilium.io/agent-not-ready, the EBS, EFS
and FSx CSI drivers' <driver>/agent-not-ready): lifted by that agent."""


@dataclass(frozen=True)
class LiftedTaints:
    """The taints discovery leaves out (`lifted_taints`)."""

    known: frozenset[tuple[str, str]]
    """(key, effect) left out whatever they are: start-up taints and the gates' (former keys
    too)."""
    agents: frozenset[tuple[str, str]]
    """The node-agent rules' own: never left out for another rule, whatever their key."""
    passing: frozenset[tuple[str, str]] = frozenset()
    """Taints nodegate puts on and takes off as a node changes (the condition and node-agent
    rules'): one keeping a listed DaemonSet away now does not mean it never runs there
    (`cannotRun`)."""

    def on(self, node: NodeState) -> frozenset[tuple[str, str]]:
        """Those of the node's taints to leave out."""
        return frozenset(
            t.identity
            for t in node.taints
            if t.identity in self.known or (t.identity not in self.agents and _starts_up(t.key))
        )


def _starts_up(key: str) -> bool:
    return key.startswith(START_UP_KEY_PREFIXES) or key.endswith(START_UP_KEY_SUFFIX)


def lifted_taints(rules: NodeRules) -> LiftedTaints:
    """The taints discovery leaves out: the node's start-up taints (the platform's, the
    autoscalers' startup prefixes, other agents' agent-not-ready) and the startup gates' (lifted
    by signals of their own, after which the DaemonSets they kept away run). Another node-agent
    rule's taint is not left out: two rules each waiting for a DaemonSet the other's taint keeps
    away would wait for ever."""
    gates = {t.identity for r in rules.startup_gates for t in (r.taint, *r.former_taints)}
    agents = {r.taint.identity for r in rules.node_agents}
    conditions = {r.taint.identity for r in rules.condition_taints}
    return LiftedTaints(
        TRANSIENT_TAINTS | frozenset(gates - agents),
        frozenset(agents),
        frozenset(agents | conditions),
    )


NOTHING_LIFTED = LiftedTaints(frozenset(), frozenset())


def agents_matter(rule: NodeAgentRule, node: NodeState) -> bool:
    """Whether the rule's verdict on the node depends on its agents (`agent_plan`): not when
    the node does not match, nor for a bootstrapOnly taint the node no longer carries."""
    if rule.match is not None and not rule.match.matches(dict(node.labels)):
        return False
    return rule.mode == "continuous" or node.taint(rule.taint.identity) is not None


def continues(before: str, now: str) -> bool:
    """Whether the agent episode `now` is the outage `before` went on (both seen not Ready at
    consecutive looks): yes, unless the same pod shows another state (it may have been Ready in
    between); a pod replaced, made or deleted is the same outage."""
    if before == now:
        return True
    old_pod, new_pod = _pod_of(before), _pod_of(now)
    return old_pod is None or new_pod is None or old_pod != new_pod


def _pod_of(token: str) -> str | None:
    """The pod uid of a `<ds>:<uid>:<state>` episode; None for one without a pod."""
    parts = token.split(":", 2)
    return parts[1] if len(parts) == 3 else None


def agent_readiness(
    rule: NodeAgentRule,
    node: NodeState,
    daemon_sets: Iterable[DaemonSetView],
    pods: Iterable[AgentPod],
    csi_drivers: Mapping[str, bool],
    lifted: LiftedTaints = NOTHING_LIFTED,
    departed: Departure | None = None,
) -> AgentReadiness:
    """The rule's agents on `node`: its listed DaemonSets (or, with `auto`, every DaemonSet that
    would run a pod there, the taints in `lifted` aside), given the DaemonSet pods on the node,
    the CSI drivers its own CSINode registered (`csi_nodes.registered_drivers`) and, if nodegate
    saw the Node object of its name before this one go, what it kept of it (`departed`)."""
    by_ref = {d.ref: d for d in daemon_sets}
    on_node = [p for p in pods if p.node == node.name]
    states: list[AgentState] = []
    if rule.discovers:
        for ds in sorted(by_ref.values(), key=lambda d: d.ref):
            if _discovered(rule, ds, node, lifted):
                states.append(_daemon_set_state(rule, ds, node, on_node, lifted, departed))
    for ref in rule.listed_daemon_sets:
        found = by_ref.get(ref.ref)
        if found is None:
            states.append(AgentState(ref.ref, False, "DaemonSet not found", f"{ref.ref}:absent@"))
        else:
            states.append(_daemon_set_state(rule, found, node, on_node, lifted, departed))
    for driver in rule.csi_drivers:
        registered = driver.name in csi_drivers
        counts = registered and (csi_drivers[driver.name] or not driver.require_allocatable)
        why = (
            "registered"
            if counts
            else "registered, no allocatable count yet"
            if registered
            else "not registered on the node"
        )
        states.append(AgentState(f"CSI driver {driver.name}", counts, why, f"csi:{driver.name}@"))
    return AgentReadiness(tuple(states))


def _discovered(
    rule: NodeAgentRule, ds: DaemonSetView, node: NodeState, lifted: LiftedTaints
) -> bool:
    """Whether `daemonSets: auto` waits for this DaemonSet on the node: not excluded, placed
    there once the lifted taints are gone, and tolerating the rule's own taint (one that does
    not never runs on a node carrying it: waiting for it would keep the taint for ever)."""
    excluded = rule.exclude_daemon_sets
    if excluded is not None and excluded.matches(dict(ds.labels)):
        return False
    if rule.namespaces and ds.namespace not in rule.namespaces:
        return False
    return _tolerates_own(rule, ds) and _refused(rule, ds, node, lifted) is None


def waits_for(
    rule: NodeAgentRule, ds: DaemonSetView, node: NodeState, lifted: LiftedTaints
) -> bool:
    """Whether the rule waits for this DaemonSet's pod on the node, as `agent_readiness`
    decides it: discovered (`auto`), or listed and not skipped (`cannotRun: skip` leaves out a
    listed one its placement or another taint keeps away; one that does not tolerate the
    rule's own taint is waited for, and reported: `daemon_set_problems`)."""
    if rule.discovers:
        return _discovered(rule, ds, node, lifted)
    if all(ref.ref != ds.ref for ref in rule.listed_daemon_sets):
        return False
    return (
        rule.cannot_run == "wait"
        or not _tolerates_own(rule, ds)
        or _refused(rule, ds, node, lifted) is None
    )


def _tolerates_own(rule: NodeAgentRule, ds: DaemonSetView) -> bool:
    """PreferNoSchedule keeps no daemon pod away: tolerated whatever the tolerations say."""
    return rule.taint.effect == "PreferNoSchedule" or tolerates(ds.placement, rule.taint)


def _refused(
    rule: NodeAgentRule,
    ds: DaemonSetView,
    node: NodeState,
    lifted: LiftedTaints,
    lasting: bool = False,
) -> str | None:
    """Why the DaemonSet controller would not run its pod on the node, its start-up taints,
    the gates' and this rule's own left out (`lifted_taints`); `lasting`: the condition and
    node-agent rules' taints left out too (why it will not run there however they change)."""
    ignoring = lifted.on(node) | {rule.taint.identity}
    if lasting:
        ignoring |= {t.identity for t in node.taints if t.identity in lifted.passing}
    return refusal(ds.placement, node.name, node.labels, node.taints, ignoring=ignoring)


def _daemon_set_state(
    rule: NodeAgentRule,
    ds: DaemonSetView,
    node: NodeState,
    on_node: list[AgentPod],
    lifted: LiftedTaints,
    departed: Departure | None,
) -> AgentState:
    pods = sorted((p for p in on_node if p.owner_uid == ds.uid), key=lambda p: p.uid)
    ready = ready_agent_pods(pods)
    if any(of_this_node(node, uid, written, departed) for uid, written in ready.items()):
        return AgentState(ds.ref, True, "Ready")
    if pods:
        pod = pods[0]
        why = "pod terminating" if pod.terminating else "pod not Ready"
        if pod.ready and not pod.terminating:
            why = _ready_before(pod, departed)
        state = "terminating" if pod.terminating else pod.transition
        return AgentState(ds.ref, False, why, f"{ds.ref}:{pod.uid}:{state}")
    refused = _refused(rule, ds, node, lifted)
    lasting = None if refused is None else _refused(rule, ds, node, lifted, lasting=True)
    if not _tolerates_own(rule, ds):
        refused = f"it does not tolerate this rule's taint {rule.taint.flag()}: add a toleration"
    elif lasting is not None:
        # Kept away by its placement or a taint no rule of nodegate's takes off: a decision
        # (`cannotRun`). One kept away only by another rule's taint runs once that goes.
        why = f"the DaemonSet controller will not run it here: {lasting}"
        if rule.cannot_run == "skip":
            return AgentState(ds.ref, True, why, refused=lasting, awaited=False)
        return AgentState(ds.ref, False, f"{why} (cannotRun: wait)", f"{ds.ref}:none@", lasting)
    why = "no pod on the node yet" if refused is None else f"no pod: {refused}"
    return AgentState(ds.ref, False, why, f"{ds.ref}:none@")


CannotRunKey = tuple[str, str, str, str]
"""(rule, DaemonSet, why the DaemonSet controller will not run its pod, skip|wait): one
report."""


def cannot_run(agents: Mapping[str, AgentReadiness]) -> frozenset[CannotRunKey]:
    """The listed DaemonSets the DaemonSet controller will not run on this node, by rule, reason
    and what the rule does (skip, wait): each is reported once while it lasts."""
    return frozenset(
        (rule, agent.agent, agent.refused, "wait" if agent.awaited else "skip")
        for rule, readiness in agents.items()
        for agent in readiness.agents
        if agent.refused is not None
    )


def cannot_run_message(
    rule: NodeAgentRule, daemon_set: str, refused: str, node: str, action: str
) -> str:
    """The report of one (rule, DaemonSet, reason, action), with the fix."""
    head = (
        f"nodeAgents '{rule.name}': the DaemonSet controller will not run {daemon_set} on node "
        f"{node} (nor on any node like it): {refused}."
    )
    if action == "skip":
        return (
            f"{head} Such nodes do not wait for it (cannotRun: skip). If they should, let the "
            "DaemonSet run there (a toleration, its nodeSelector), or set cannotRun: wait."
        )
    return (
        f"{head} Such nodes keep {rule.taint.flag()} until that changes (cannotRun: wait): let "
        "the DaemonSet run there (a toleration, its nodeSelector), narrow the rule's match, or "
        "set cannotRun: skip."
    )


def _ready_before(pod: AgentPod, departed: Departure | None) -> str:
    """Why a Ready pod does not count for the node, with what ends the wait."""
    if departed is not None and pod.uid in departed.pods:
        return (
            "pod Ready on the machine this name had before (another bootID or systemUUID): "
            "waiting for this machine's kubelet to write it Ready"
        )
    return (
        "pod Ready before this Node object was created, on a machine nodegate cannot tell is "
        "this one: it counts once its kubelet writes it again; delete the pod to have it made "
        "again"
    )


def ready_agent_pods(pods: Iterable[AgentPod]) -> PodWrites:
    """The Ready, staying pods of `pods`, with their status writes (what a departure keeps)."""
    return {p.uid: p.status_written for p in pods if p.ready and not p.terminating}


def agent_episodes(
    rules: NodeRules, readiness: Mapping[str, AgentReadiness]
) -> dict[ConditionKey, str]:
    """The not-Ready episode of each agent of the node's continuous rules, to be sighted with
    its conditions (`condition_sightings`): one per agent, so one agent's changes never restart
    another's count."""
    return {
        agent_episode_key(rule, agent): agent.episode
        for rule in rules.node_agents
        if rule.mode == "continuous" and (found := readiness.get(rule.name)) is not None
        for agent in found.not_ready
    }


def agent_types_unknown(
    rules: NodeRules, readiness: Mapping[str, AgentReadiness]
) -> frozenset[str]:
    """The episode types of the continuous rules whose agents were not looked up (informers
    not synced yet): their sightings are carried as they were, not forgotten."""
    return frozenset(
        agent_episode_type(rule)
        for rule in rules.node_agents
        if rule.mode == "continuous" and rule.name not in readiness
    )


def daemon_set_problems(
    rules: Iterable[NodeAgentRule], daemon_sets: Iterable[DaemonSetView]
) -> tuple[str, ...]:
    """What keeps a node-agent rule's listed DaemonSet from ever running on the nodes it
    taints, with the fix: not found, or not tolerating the rule's own taint (its pod is then
    never made on a node carrying it, and the node waits for ever)."""
    by_ref = {d.ref: d for d in daemon_sets}
    problems = []
    for rule in rules:
        taint = rule.taint
        for ref in rule.listed_daemon_sets:
            found = by_ref.get(ref.ref)
            if found is None:
                problems.append(f"nodeAgents '{rule.name}': DaemonSet {ref.ref} not found")
            elif not _tolerates_own(rule, found):
                problems.append(
                    f"nodeAgents '{rule.name}': DaemonSet {ref.ref} does not tolerate the rule's "
                    f"taint {taint.flag()}, so its pod never runs on a node that carries it and "
                    "the node waits for ever: add to its spec.template.spec.tolerations "
                    f"{{key: {taint.key}, operator: Exists, effect: {taint.effect}}}"
                )
    return tuple(problems)
