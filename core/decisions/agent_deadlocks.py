"""Rules that wait for each other on a node, so that none of them is ever lifted. Pure:
`nodegate validate` looks for them on the nodes the rules make (each pool's as it is born, with
the DaemonSets it is given or from the rules alone), the reconciler on each node as it stands.

A startup gate lifted by its init pods (`readyWhen.pods`) waits for them; a node-agent rule
waits for its DaemonSets' pods (`node_agents.waits_for`). The DaemonSet controller makes no
pod on a node carrying a NoSchedule or NoExecute taint the pod's DaemonSet does not tolerate
(`daemon_set_placement`), so a rule *waits on* another when a pod it waits for is kept away by
the other's taint; a cycle of such waits never ends. The one docs/agents.md warns of: the gate
waits for its init pod, which waits for the agent taint to go, and the agent rule waits for a
DaemonSet the gate's taint keeps away (an agent rule waits for DaemonSets a gate keeps away:
they run once the gate is lifted, `node_agents.lifted_taints`).

Given the DaemonSets, a wait is seen (`Wait.certain`): that DaemonSet does not tolerate that
taint. Without them, or without the one a rule waits for, it is possible: the rules say who
would wait on whom, not what the DaemonSet tolerates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations, islice

from nodegate.core.decisions.node_agents import LiftedTaints, lifted_taints, waits_for
from nodegate.core.rules.model import InitPods, LabelSelector, NodeAgentRule, NodeRules, StartupGate
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.rules.registration import gates_for, label_taints_for
from nodegate.core.rules.rule_kinds import TaintRule
from nodegate.core.text.durations import format_duration
from nodegate.core.views.daemon_set_placement import KEEPS_PODS_AWAY, refusal, tolerates
from nodegate.core.views.daemon_sets import DaemonSetView

Waiter = StartupGate | NodeAgentRule
"""The rules that wait for pods on the node."""
MAX_CYCLES = 20
"""Cycles reported per node (a handful of rules make at most a few)."""
MAX_WALKED = 1000
"""Cycles looked at per node, said or not: a bound for rules that all wait on each other."""
CHECK_WITH_DAEMON_SETS = "nodegate validate RULES --daemon-sets <(kubectl get ds -A -o yaml)"


@dataclass(frozen=True)
class Scene:
    """Nodes looked at: one node as it stands, or the nodes of a pool as they are born."""

    where: str
    """`node n1`, `pool 'workers'`: where the report says it happens."""
    node: NodeState
    labels_known: bool = True
    """False for nodes still to be born: they carry more labels than the rules give (the
    cloud's, the kubelet's), so a DaemonSet's placement is read on the labels the rules set
    only (`_as_seen`)."""


def node_scene(node: NodeState) -> Scene:
    return Scene(f"node {node.name}", node)


@dataclass(frozen=True, order=True)
class Wait:
    """One rule waiting on another: a pod it waits for is kept away by the other's taint."""

    waiter: str
    """The waiting rule's name."""
    blocker: str
    """The name of the rule whose taint keeps the pod away."""
    certain: bool
    """Seen: the DaemonSet is known and does not tolerate the taint."""
    said: str
    fix: str
    """The toleration that ends this wait, and where it goes."""


@dataclass(frozen=True)
class Deadlock:
    """Rules each waiting on the next, the last on the first."""

    rules: tuple[str, ...]
    """Their names, in the cycle's order, the first in the rules file's order first."""
    labels: tuple[str, ...]
    """Each as reports name it (`startupGates 'boot'`)."""
    steps: tuple[tuple[Wait, ...], ...]
    """The waits of each rule on the next (the seen ones, when any is)."""
    certain: bool
    """Every step seen."""
    escapes: tuple[str, ...] = ()
    """What may still lift one of them (a gate's other signal, its timeout)."""
    where: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[object, ...]:
        """The same deadlock wherever it is seen."""
        return (self.rules, self.steps, self.escapes)

    def message(self) -> str:
        """What waits on what, where, and the tolerations that end it."""
        names, where = _and(self.labels), _and(self.where)
        each = "each other" if len(self.rules) == 2 else "one another"
        held = "for ever" if not self.escapes else "until " + " or ".join(self.escapes)
        said = "; ".join(w.said for step in self.steps for w in step)
        fixes = "; or ".join(" and ".join(w.fix for w in step) for step in self.steps)
        if self.certain:
            return (
                f"{names} wait for {each} on {where}, so those nodes keep their taints {held}: "
                f"{said}. Any one step's tolerations end it: {fixes}"
            )
        return (
            f"{names} may wait for {each} on {where}, and then those nodes keep their taints "
            f"{held}: {said}. Unless the DaemonSets already tolerate them (check with "
            f"{CHECK_WITH_DAEMON_SETS}), {fixes}"
        )


def deadlocks(
    rules: NodeRules,
    scene: Scene,
    daemon_sets: Sequence[DaemonSetView] | None = None,
    running: frozenset[str] = frozenset(),
) -> tuple[Deadlock, ...]:
    """The cycles of waits among the rules whose taints the scene's nodes carry. `daemon_sets`:
    every DaemonSet there is (None: not known, every wait is possible); `running`: the uids of
    the DaemonSets with a pod on the node already (nothing keeps that pod away)."""
    waits = _waits(rules, scene, daemon_sets, running)
    if not waits:
        return ()
    by_name: dict[str, TaintRule] = {r.name: r for r in rules.taint_rules()}
    edges: dict[str, set[str]] = {}
    for wait in waits:
        edges.setdefault(wait.waiter, set()).add(wait.blocker)
    seen_edges = {(w.waiter, w.blocker) for w in waits if w.certain}
    found = []
    for cycle in islice(_cycles(list(by_name), edges), MAX_WALKED):
        steps = []
        for waiter, blocker in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            step = sorted(w for w in waits if (w.waiter, w.blocker) == (waiter, blocker))
            steps.append(tuple(w for w in step if w.certain) or tuple(step))
        certain = all(step[0].certain for step in steps)
        if _has_chord(cycle, seen_edges if certain else {(w.waiter, w.blocker) for w in waits}):
            continue  # the shorter cycle through the chord is said instead
        found.append(
            Deadlock(
                rules=cycle,
                labels=tuple(_label(by_name[name]) for name in cycle),
                steps=tuple(steps),
                certain=certain,
                escapes=tuple(e for name in cycle for e in _escapes(by_name[name])),
                where=(scene.where,),
            )
        )
        if len(found) == MAX_CYCLES:
            break
    return tuple(found)


def may_wait_on_each_other(rules: NodeRules, node: NodeState) -> bool:
    """Whether the node carries the taints of two rules that wait for pods (else `deadlocks`
    has nothing to find: a cheap look first, for every reconcile)."""
    return len({rule.name for _, rule in _waiters_on(rules, node)}) > 1


def birth_deadlocks(
    rules: NodeRules, daemon_sets: Sequence[DaemonSetView] | None = None
) -> tuple[Deadlock, ...]:
    """The deadlocks on the nodes the rules make (`birth_scenes`), each once, naming every
    pool it is found on."""
    merged: dict[tuple[object, ...], Deadlock] = {}
    for scene in birth_scenes(rules):
        for found in deadlocks(rules, scene, daemon_sets):
            seen = merged.get(found.key)
            merged[found.key] = (
                found if seen is None else replace(seen, where=(*seen.where, *found.where))
            )
    return tuple(merged.values())


@dataclass(frozen=True)
class NeverRuns:
    """A DaemonSet a node-agent rule lists that the DaemonSet controller never runs on nodes
    the rule taints: the taints they keep (a label taint) or its placement keep it away."""

    rule: str
    label: str
    daemon_set: str
    why: str
    waits: bool
    """`cannotRun: wait`: those nodes keep the rule's taint for ever."""
    taint: str
    fix: str
    where: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.rule, self.daemon_set, self.why)

    def message(self) -> str:
        where = _and(self.where)
        if self.waits:
            return (
                f"{self.label}: the DaemonSet controller never runs {self.daemon_set} on "
                f"{where} ({self.why}), and the rule waits for it there (cannotRun: wait), so "
                f"those nodes keep {self.taint} for ever: {self.fix}, narrow the rule's match, "
                "or set cannotRun: skip"
            )
        return (
            f"{self.label} does not wait for {self.daemon_set} on {where} (cannotRun: skip): "
            f"the DaemonSet controller never runs it there ({self.why})"
        )


def never_runs(rules: NodeRules, daemon_sets: Sequence[DaemonSetView]) -> tuple[NeverRuns, ...]:
    """The listed DaemonSets kept off the nodes the rules make for good: by the taints those
    nodes keep (label taints), or by a nodeSelector on the labels the rules give them (a
    startup taint goes, and is the deadlocks' business)."""
    by_ref = {d.ref: d for d in daemon_sets}
    kept = {r.taint.identity for r in rules.taint_rules() if r.kind.at_registration == "permanent"}
    merged: dict[tuple[str, str, str], NeverRuns] = {}
    for scene in birth_scenes(rules):
        node = scene.node
        permanent = [t for t in node.taints if t.identity in kept]
        for rule in rules.node_agents:
            if not _carries(node, rule):
                continue
            for ref in rule.listed_daemon_sets:
                if (found := by_ref.get(ref.ref)) is None:
                    continue
                seen = _as_seen(found, scene)
                why = refusal(seen.placement, node.name, node.labels, permanent)
                if why is None:
                    continue
                untolerated = [t for t in permanent if not tolerates(seen.placement, t)]
                fix = (
                    f"add to its spec.template.spec.tolerations {_toleration(untolerated[0])}"
                    if untolerated
                    else "let it run there (its nodeSelector)"
                )
                report = NeverRuns(
                    rule.name,
                    _label(rule),
                    ref.ref,
                    why,
                    rule.cannot_run == "wait",
                    rule.taint.flag(),
                    fix,
                    (scene.where,),
                )
                if (before := merged.get(report.key)) is not None:
                    report = replace(before, where=(*before.where, scene.where))
                merged[report.key] = report
    return tuple(merged.values())


# --- the nodes the rules make --------------------------------------------------------------------


def birth_scenes(rules: NodeRules) -> tuple[Scene, ...]:
    """The nodes as they are born: each pool's (its eventual labels, every taint it is born
    with: `registration`), and, for two rules no pool holds together, a node both match (the
    labels their selectors name), so rules written without pools are looked at too."""
    pools = [
        _born(f"pool '{pool.name}'", pool.eventual_labels(), rules) for pool in rules.node_pools
    ]
    scenes = list(pools)
    waiters: list[Waiter] = [*rules.startup_gates, *rules.node_agents]
    waiting = [r for r in waiters if _waits_for_pods(r)]
    kept = [r for r in rules.label_taints if not r.dry_run]
    pairs: list[tuple[TaintRule, TaintRule]] = [*combinations(waiting, 2)]
    pairs += [(a, b) for a in rules.node_agents if _waits_for_pods(a) for b in kept]
    for a, b in pairs:
        if any(_carries(s.node, a) and _carries(s.node, b) for s in pools):
            continue
        labels = _both(a, b)
        if labels is None or not (a.born_with(labels) and b.born_with(labels)):
            continue
        scenes.append(_born(f"nodes both {_label(a)} and {_label(b)} match", labels, rules))
    return tuple(scenes)


def _born(where: str, labels: Mapping[str, str], rules: NodeRules) -> Scene:
    born = [*label_taints_for(rules, labels), *(r.taint for r in gates_for(rules, labels))]
    taints = {t.identity: NodeTaint(t.key, t.effect, t.value) for t in born}
    return Scene(
        where, NodeState(name="", labels=dict(labels), taints=tuple(taints.values())), False
    )


def _both(*rules: TaintRule) -> dict[str, str] | None:
    """Labels every rule's `match` selects, built from what they name (None: they disagree)."""
    labels: dict[str, str] = {}
    matches = [getattr(rule, "match", None) for rule in rules]
    given = [m for m in matches if isinstance(m, LabelSelector)]
    for selector in given:
        for key, value in selector.labels.items():
            if labels.setdefault(key, value) != value:
                return None
    for selector in given:
        for expression in selector.expressions:
            if expression.key not in labels and expression.operator in ("In", "Exists"):
                labels[expression.key] = (expression.values or ("true",))[0]
    return labels


def _as_seen(ds: DaemonSetView, scene: Scene) -> DaemonSetView:
    """The DaemonSet as the scene can judge it: on nodes still to be born, its nodeSelector on
    the labels the rules give them only (any other may match), and no affinity nor node name."""
    if scene.labels_known:
        return ds
    placement = ds.placement
    labels = scene.node.labels
    selector = {k: v for k, v in placement.node_selector.items() if k in labels}
    return replace(
        ds, placement=replace(placement, node_selector=selector, terms=None, node_name="")
    )


# --- the waits -----------------------------------------------------------------------------------


def _waits(
    rules: NodeRules,
    scene: Scene,
    daemon_sets: Sequence[DaemonSetView] | None,
    running: frozenset[str],
) -> list[Wait]:
    node = scene.node
    if not may_wait_on_each_other(rules, node):
        return []
    on = _waiters_on(rules, node)
    seen = None if daemon_sets is None else [_as_seen(d, scene) for d in daemon_sets]
    lifted = lifted_taints(rules)
    waits: list[Wait] = []
    for rule in {rule.name: rule for _, rule in on}.values():
        others = [(t, r) for t, r in on if r.name != rule.name and t.effect in KEEPS_PODS_AWAY]
        if not others:
            continue
        if isinstance(rule, StartupGate):
            waits += _gate_waits(rule, others, seen, running)
        else:
            waits += _agent_waits(rule, node, others, seen, running, lifted)
    return waits


def _waiters_on(rules: NodeRules, node: NodeState) -> list[tuple[NodeTaint, Waiter]]:
    """The node's taints of gates and node-agent rules (a gate's former keys too), with their
    rule; a dry-run rule lifts nothing and is left out."""
    owners: dict[tuple[str, str], Waiter] = {}
    for gate in rules.startup_gates:
        for taint in (gate.taint, *gate.former_taints):
            owners[taint.identity] = gate
    for agent in rules.node_agents:
        owners[agent.taint.identity] = agent
    return [
        (t, owner)
        for t in node.taints
        if (owner := owners.get(t.identity)) is not None and not owner.dry_run
    ]


def _gate_waits(
    gate: StartupGate,
    others: list[tuple[NodeTaint, Waiter]],
    seen: Sequence[DaemonSetView] | None,
    running: frozenset[str],
) -> list[Wait]:
    """The gate waits for its init pods: on every taint their DaemonSet does not tolerate
    (every DaemonSet that makes them, when several do)."""
    spec = gate.ready_when.pods
    if spec is None:
        return []
    label = _label(gate)
    init = [] if seen is None else [d for d in seen if _makes(d, spec)]
    if not init:
        pods = f"{spec.namespace}, {spec.label_selector}"
        said = f"{label} waits for its pods ({pods}), whose DaemonSet must tolerate"
        whom = f"the DaemonSet of the pods of {label}"
        return [_wait(gate, blocker, taint, said, whom=whom) for taint, blocker in others]
    if any(d.uid in running for d in init):
        return []
    kept = {d.ref: [(t, r) for t, r in others if not tolerates(d.placement, t)] for d in init}
    if not all(kept.values()):
        return []  # one of them runs: the gate has its pod
    said = f"{label} waits for its pods, and their DaemonSet"
    return [
        _wait(gate, blocker, taint, f"{said} {ref} does not tolerate", ref)
        for ref, pairs in kept.items()
        for taint, blocker in pairs
    ]


def _agent_waits(
    rule: NodeAgentRule,
    node: NodeState,
    others: list[tuple[NodeTaint, Waiter]],
    seen: Sequence[DaemonSetView] | None,
    running: frozenset[str],
    lifted: LiftedTaints,
) -> list[Wait]:
    """The rule waits for each of its DaemonSets (`waits_for`): on every taint one does not
    tolerate. Not known, it may wait on a gate (whose taint discovery leaves out), and, a listed
    one with `cannotRun: wait`, on another agent rule."""
    label = _label(rule)
    listed = [ref.ref for ref in rule.listed_daemon_sets]
    if seen is None:
        unknown = [(ref, ref) for ref in listed]
        if rule.discovers:
            unknown.append(("each DaemonSet it discovers", f"each DaemonSet {label} discovers"))
        known: list[DaemonSetView] = []
    else:
        by_ref = {d.ref: d for d in seen}
        unknown = [(ref, ref) for ref in listed if ref not in by_ref]
        known = list(seen) if rule.discovers else [by_ref[r] for r in listed if r in by_ref]
    waits_on_agents = not rule.discovers and rule.cannot_run == "wait"
    waits = [
        _wait(rule, blocker, taint, f"{label} waits for {what}, which must tolerate", whom=whom)
        for what, whom in unknown
        for taint, blocker in others
        if isinstance(blocker, StartupGate) or waits_on_agents
    ]
    for ds in known:
        if ds.uid in running or not waits_for(rule, ds, node, lifted):
            continue
        waits += [
            _wait(
                rule, blocker, taint, f"{label} waits for {ds.ref}, which does not tolerate", ds.ref
            )
            for taint, blocker in others
            if not tolerates(ds.placement, taint)
        ]
    return waits


def _wait(
    rule: Waiter, blocker: Waiter, taint: NodeTaint, said: str, ds: str = "", whom: str = ""
) -> Wait:
    """`rule` waits on `blocker`'s taint, as `said` (up to the taint): seen, when `ds` names the
    DaemonSet that does not tolerate it; else possible, `whom` to give the toleration."""
    fix = (
        f"add to {ds}'s spec.template.spec.tolerations {_toleration(taint)}"
        if ds
        else f"give {whom} the toleration {_toleration(taint)}"
    )
    return Wait(
        rule.name, blocker.name, bool(ds), f"{said} {taint} (the taint of {_label(blocker)})", fix
    )


def _escapes(rule: TaintRule) -> Iterator[str]:
    """What lifts a gate besides its init pods: another signal of `readyWhen` (any one lifts
    it), or its timeout with `onTimeout: lift`."""
    if not isinstance(rule, StartupGate) or rule.ready_when.pods is None:
        return
    ready, label = rule.ready_when, _label(rule)
    for name, given in (
        ("annotation", ready.annotation),
        ("conditions", ready.conditions),
        ("csiDrivers", ready.csi_drivers),
    ):
        if given:
            yield f"{label}'s readyWhen.{name} lifts it"
    if rule.timeout is not None and rule.on_timeout == "lift":
        yield f"{label} times out ({format_duration(rule.timeout)}, onTimeout: lift)"


def _cycles(order: list[str], edges: Mapping[str, set[str]]) -> Iterator[tuple[str, ...]]:
    """Every elementary cycle once, from its first rule in `order` (a depth-first walk through
    later rules only)."""
    index = {name: i for i, name in enumerate(order)}

    def walk(start: str, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for after in sorted(edges.get(path[-1], ()), key=index.__getitem__):
            if after == start and len(path) > 1:
                yield path
            elif index[after] > index[start] and after not in path:
                yield from walk(start, (*path, after))

    for start in order:
        if start in edges:
            yield from walk(start, (start,))


def _has_chord(cycle: tuple[str, ...], edges: set[tuple[str, str]]) -> bool:
    """Whether two rules of the cycle that are not consecutive wait one on the other: a
    shorter cycle then goes through that wait (fixing the shorter ones is what to do first)."""
    following = set(zip(cycle, cycle[1:] + cycle[:1], strict=True))
    members = set(cycle)
    return any(
        (a, b) not in following and a in members and b in members for a, b in edges if a != b
    )


# --- small words ---------------------------------------------------------------------------------


def _waits_for_pods(rule: Waiter) -> bool:
    if rule.dry_run:
        return False
    if isinstance(rule, StartupGate):
        return rule.ready_when.pods is not None
    return bool(rule.daemon_sets)


def _carries(node: NodeState, rule: TaintRule) -> bool:
    return node.taint(rule.taint.identity) is not None


def _makes(ds: DaemonSetView, spec: InitPods) -> bool:
    """Whether the DaemonSet's pods are the gate's: in its namespace, with its labels."""
    labels = ds.pod_labels
    return ds.namespace == spec.namespace and all(
        labels.get(k) == v for k, v in spec.selector.items()
    )


def _toleration(taint: NodeTaint) -> str:
    return f"{{key: {taint.key}, operator: Exists, effect: {taint.effect}}}"


def _label(rule: TaintRule) -> str:
    return f"{rule.kind.field} '{rule.name}'"


def _and(items: Iterable[str]) -> str:
    said = list(items)
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
