"""What a node waits for, in words: the live `nodegate explain NODE`. Pure.

The plan (`node_decision.decide`, with the facts the shell read: init pods, persisted labels,
and the eviction budget as recorded) says what nodegate would write now; this says, for what it
would *not* write yet, what has to happen first: the gate's init pod and its state and the time
left to the gate's timeout, the `for` of a condition rule, the eviction budget, a held rules
update, a quarantined record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from nodegate.core.decisions.eviction_budget import WAITING, Charge, Grant, admit, census
from nodegate.core.decisions.gate_plan import carried_gate_taints, life_began
from nodegate.core.decisions.node_decision import Budget
from nodegate.core.decisions.plan import NodePlan
from nodegate.core.objects.eviction_ledger import spent
from nodegate.core.objects.status_record import HeldUpdate
from nodegate.core.reports.cluster_status import age
from nodegate.core.rules.model import NodeRules, StartupGate
from nodegate.core.rules.node import NodeState, format_time


@dataclass(frozen=True)
class InitPod:
    """One init pod of a gate on the node, as the shell read it."""

    name: str
    """namespace/name"""
    phase: str
    ready: bool


@dataclass(frozen=True)
class NodeContext:
    """What the shell found beside the Node."""

    gate_pods: Mapping[str, tuple[InitPod, ...]] = field(default_factory=dict)
    """Gate name -> its init pods on this node (gates with `readyWhen.pods`)."""
    held: HeldUpdate | None = None
    """A rules update the guard holds (None when explaining with `--rules FILE`)."""
    quarantined: tuple[str, ...] = ()
    """Quarantined label records that were this node's."""


def waits(
    node: NodeState, rules: NodeRules, result: NodePlan, context: NodeContext, now: datetime
) -> tuple[str, ...]:
    """One line per thing nodegate waits for before it changes this node further."""
    lines: list[str] = []
    gates = {g.name: g for g in rules.startup_gates}
    agents = {a.name for a in rules.node_agents}
    for decision in result.decisions:
        gate = gates.get(decision.rule)
        if gate is not None and decision.verdict == "keep" and carried_gate_taints(node, gate):
            if decision.taint.identity == gate.taint.identity:
                lines.append(_gate_wait(node, gate, decision.why, context, now))
        elif decision.why.startswith(WAITING):
            lines.append(f"{decision.rule}: taint {decision.taint.flag()} {decision.why}")
        elif (decision.verdict == "keep" and "of `for`" in decision.why) or (
            decision.rule in agents
            and decision.verdict != "release"
            and node.taint(decision.taint.identity) is not None
        ):  # a `for` under way, or its agents: "waiting for <agent> (<state>)"
            lines.append(f"{decision.rule}: {decision.why}")
    held = context.held
    if held is not None:
        lines.append(
            f"rules update {held.digest} held since {format_time(held.since)}: {held.reason}; "
            "explained with the rules in force (confirm its digest to apply it)"
        )
    lines += [f"persisted labels: record quarantined as {name}" for name in context.quarantined]
    return tuple(lines)


def _gate_wait(
    node: NodeState, gate: StartupGate, why: str, context: NodeContext, now: datetime
) -> str:
    if "timed out" in why:
        return f"{gate.name}: {why}; nothing lifts it but its readiness signal"
    signals = []
    pods = gate.ready_when.pods
    if pods is not None:
        found = context.gate_pods.get(gate.name, ())
        if not found:
            signals.append(
                f"an init pod in {pods.namespace} with labels {pods.label_selector} on this "
                "node (none yet)"
            )
        for pod in found:
            state = "Ready" if pod.ready else "not Ready"
            signals.append(f"init pod {pod.name} ({pod.phase}, {state})")
        if pods.ready_annotation is not None:
            signals.append(f"its annotation {pods.ready_annotation}")
    if gate.ready_when.annotation is not None:
        signals.append(f"the node annotation {gate.ready_when.annotation}")
    conditions = gate.ready_when.conditions
    if conditions:
        joined = (" and " if gate.ready_when.condition_policy == "allOf" else " or ").join(
            f"{c.type}={c.status}" for c in conditions
        )
        signals.append(f"the node condition{'s' if len(conditions) > 1 else ''} {joined}")
    drivers = gate.ready_when.csi_drivers
    if drivers:
        shown = [d.name + (" with allocatable" if d.require_allocatable else "") for d in drivers]
        plural = "s" if len(drivers) > 1 else ""
        signals.append(f"CSI driver{plural} {' and '.join(shown)} on the node's CSINode")
    text = f"{gate.name}: waits for " + " or ".join(signals)
    if "minHold" in why:
        text += f" ({why})"
    began = life_began(node, gate, now)
    if gate.timeout is not None and began is not None:
        left = began + gate.timeout - now
        text += f"; times out in {age(left.total_seconds())} (onTimeout: {gate.on_timeout})"
    if began is not None:
        text += f"; gated for {age((now - began).total_seconds())}"
    return text


def recorded_budget(
    rules: NodeRules, nodes: Sequence[NodeState], now: datetime, recorded: Sequence[Grant] = ()
) -> Budget:
    """The eviction budget as the reconciler's breaker decides it, for `decide`: from the
    eviction ledger's grants (`recorded`) and the evicting taints on the nodes; each grant it
    makes counts for the nodes asked after (a NodeList explained node after node)."""
    granted = spent(nodes, rules, recorded, now)
    counts = census(nodes)

    def budget(node: NodeState, wanted: tuple[Charge, ...]) -> Mapping[str, str]:
        decided = admit(rules, node, wanted, granted, counts, now)
        granted.extend(decided.granted)
        return decided.waiting

    return budget
