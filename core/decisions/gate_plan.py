"""Startup gates, planned: when a gate's taint stays, goes, or comes back on one node.

Pure, like `plan.py`, which calls `gate_outcome` once per gate and merges the verdicts with the
label and condition taints'. A gate's life: carried from registration (under its key or a former
one) until its readiness signal (its init pod, an annotation or the node's conditions) or its
timeout lifts it (`minHold` permitting); the lift is recorded in annotations on the node; a gate
the node does not carry comes back only after a reboot (`regateOnReboot`) or as a backfill onto an
idle node that never had it (`backfill`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from nodegate.core.decisions.init_pods import signal_pod
from nodegate.core.decisions.re_registration import of_this_node
from nodegate.core.decisions.sightings import (
    ConditionKey,
    Sighting,
    condition_key,
    condition_token,
    earliest,
    episode_digest,
)
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome
from nodegate.core.rules.conditions import conditions_hold, matching_condition
from nodegate.core.rules.model import StartupGate
from nodegate.core.rules.node import (
    NodeCondition,
    NodeState,
    format_precise_time,
    format_time,
    parse_time,
)
from nodegate.core.rules.node_marks import (
    GATE_BUSY,
    GATE_COMPLETED,
    GATE_REBOOTED_AFTER,
    GATE_REGATED,
    GATE_SIGNALS,
    gate_annotation_keys,
)


def gate_outcome(
    node: NodeState, labels: Mapping[str, str], gate: StartupGate, facts: PlanFacts
) -> RuleOutcome:
    carried = carried_gate_taints(node, gate)
    if not carried:
        return _absent_gate(node, labels, gate, facts)
    outcome = _carried_gate(node, gate, facts)
    former = tuple(
        replace(outcome.decision, taint=taint)
        for taint in gate.former_taints
        if taint.identity in carried
    )
    return replace(outcome, carried=carried, former=former)


def gate_sightings_kept(node: NodeState, gate: StartupGate) -> frozenset[ConditionKey]:
    """A re-gated gate's conditions, while the node carries it: their first sight, witnessed or
    not, decides whether readiness is of the new boot."""
    regated = GATE_REBOOTED_AFTER + gate.name in node.annotations
    if not (regated and gate.ready_when.conditions and carried_gate_taints(node, gate)):
        return frozenset()
    types = {m.type for m in gate.ready_when.conditions}
    return frozenset(condition_key(c) for c in node.conditions if c.type in types)


def carried_gate_taints(node: NodeState, gate: StartupGate) -> frozenset[tuple[str, str]]:
    """The gate's taints on the node: a node born under a former key (old bootstrap, another
    tool's webhook) is gated by it until the gate is met."""
    identities = [gate.taint.identity, *((key, gate.taint.effect) for key in gate.former_keys)]
    return frozenset(i for i in identities if node.taint(i) is not None)


def _carried_gate(node: NodeState, gate: StartupGate, facts: PlanFacts) -> RuleOutcome:
    # `match` is not consulted here: labels often arrive after registration, so a gate the node
    # carries is lifted only by its readiness or its timeout, never by a label mismatch.
    signal = _gate_signal(node, gate, facts)
    began = life_began(node, gate, facts.now)
    if signal is not None:
        held = None if gate.min_hold is None or began is None else began + gate.min_hold - facts.now
        if held is not None and held > timedelta(0):
            why = f"{signal}; minHold keeps it {int(held.total_seconds())}s more"
            return RuleOutcome(RuleDecision(gate.name, gate.taint, "keep", why), recheck=held)
        return _lifted(node, gate, facts, signal)
    left = None if gate.timeout is None or began is None else began + gate.timeout - facts.now
    if left is not None and left <= timedelta(0):
        if gate.on_timeout == "lift":
            return _lifted(node, gate, facts, "timed out (onTimeout: lift)", timed_out=True)
        warning = f"startup gate '{gate.name}' timed out; keeping its taint (onTimeout: keep)"
        decision = RuleDecision(gate.name, gate.taint, "keep", "timed out (onTimeout: keep)")
        return RuleOutcome(decision, warning=warning, timed_out=True)
    decision = RuleDecision(gate.name, gate.taint, "keep", "waiting for readiness")
    return RuleOutcome(decision, recheck=left)


def _gate_signal(node: NodeState, gate: StartupGate, facts: PlanFacts) -> str | None:
    """Why the gate may be lifted now (its readiness signal), or None."""
    pair = gate.ready_when.annotation_pair
    if pair is not None and node.annotations.get(pair[0]) == pair[1]:
        return f"annotation {gate.ready_when.annotation}"
    met = _conditions_signal(node, gate, facts) or _csi_signal(gate, facts)
    if met is not None:
        return met
    # An init pod's ready signal counts for this life of the gate: written for this Node object
    # (as a node agent's pod), and after a re-gate, of the new boot.
    ready = any(
        of_this_node(node, signal_pod(signal), signal.status_written, facts.departed)
        and _of_this_boot(signal, node, gate)
        for signal in facts.gate_pod_signals.get(gate.name, ())
    )
    return "init pod is Ready" if ready else None


def _csi_signal(gate: StartupGate, facts: PlanFacts) -> str | None:
    """Every listed CSI driver registered on the node (with allocatable, where required)."""
    drivers = gate.ready_when.csi_drivers
    registered = facts.csi_drivers
    if not drivers or not all(
        d.name in registered and (registered[d.name] or not d.require_allocatable) for d in drivers
    ):
        return None
    names = ", ".join(d.name for d in drivers)
    return f"CSI driver{'s' if len(drivers) > 1 else ''} {names} registered"


def _conditions_signal(node: NodeState, gate: StartupGate, facts: PlanFacts) -> str | None:
    """The gate's conditions, as the node reports them (a gate has no defaultStatus), if they
    hold under its conditionPolicy; after a reboot, only conditions that took their status
    after the previous boot's last sight count (a status carried over says nothing of this
    boot). Unlike a pod's readiness, a condition is not set against the Node's creation (it is
    on the Node itself); only a re-gate's reboot is a line it must have crossed."""
    ready_when = gate.ready_when
    if not ready_when.conditions:
        return None
    found = [
        c if c is not None and _of_this_boot(condition_sighting(c, facts), node, gate) else None
        for c in (matching_condition(node.conditions, m) for m in ready_when.conditions)
    ]
    matched = conditions_hold(found, ready_when.condition_policy)
    if matched is None:
        return None
    shown = ", ".join(f"{c.type}={c.status}" for c in matched)
    return f"condition{'s' if len(matched) > 1 else ''} {shown}"


def condition_sighting(condition: NodeCondition, facts: PlanFacts) -> Sighting:
    """The sighting of the condition's current episode; one not sighted yet (read fresher
    than the sightings) is first seen now, unwitnessed."""
    token = condition_token(condition)
    seen = facts.condition_sightings.get(condition_key(condition))
    return seen if seen is not None and seen.token == token else Sighting(token, facts.now, False)


def life_began(node: NodeState, gate: StartupGate, now: datetime) -> datetime | None:
    """When this life of the gate began: the reboot as first seen, for a re-gate; else the
    node's creation. Never before the Node object existed, nor after now (the node may write
    the re-gate record: a forged 9999-12-31 would overflow the timeout arithmetic)."""
    regated = parse_time_or_none(node.annotations.get(GATE_REGATED + gate.name))
    if regated is not None:
        regated = min(regated, now)
    if regated is None or node.created is None:
        return regated or node.created
    return max(regated, node.created)


def _of_this_boot(signal: Sighting, node: NodeState, gate: StartupGate) -> bool:
    """After a re-gate, whether a signal is of the new boot. Seen to begin: after the previous
    boot was last known up. Not seen begin (found at a first look after a start): only if it
    is none of the episodes recorded as shown at the lift or at the re-gate, and, for an init
    pod, its status was written (the API server's stamp) after that moment; with no record at
    all (a re-gate written by an older nodegate), it does not count: a restart never lifts a
    re-gate on what may be the previous boot's readiness."""
    after = parse_time_or_none(node.annotations.get(GATE_REBOOTED_AFTER + gate.name))
    if after is not None:
        if signal.witnessed:
            return earliest(signal) > after
        recorded = node.annotations.get(GATE_SIGNALS + gate.name)
        if recorded is None or episode_digest(signal.token) in recorded.split(","):
            return False
        return signal.status_written is None or signal.status_written > after
    regated = parse_time_or_none(node.annotations.get(GATE_REGATED + gate.name))
    # Re-gated by an older nodegate: as it judged.
    return regated is None or not signal.witnessed or signal.first_seen >= regated


def _shown_signals(node: NodeState, gate: StartupGate, facts: PlanFacts) -> list[Sighting]:
    """The gate's readiness episodes shown now: its init pods' and its matching conditions'."""
    shown = list(facts.gate_pod_signals.get(gate.name, ()))
    for match in gate.ready_when.conditions:
        condition = matching_condition(node.conditions, match)
        if condition is not None:
            shown.append(condition_sighting(condition, facts))
    return shown


def _stale_signals(
    node: NodeState,
    gate: StartupGate,
    facts: PlanFacts,
    records: tuple[tuple[str, str | None], ...],
) -> tuple[str, str]:
    """The `GATE_SIGNALS` record of a re-gate: the lift's, and the episodes shown now that are
    provably the previous boot's (seen, or for a pod written, no later than it was last known
    up), so that a process started later, which does not see them begin, never takes them for
    this boot's. An episode first seen only now is left out: nodegate may have been down
    through the reboot, and it may be this boot's."""
    key = GATE_SIGNALS + gate.name
    after = parse_time_or_none(dict(records).get(GATE_REBOOTED_AFTER + gate.name))
    stale = {d for d in node.annotations.get(key, "").split(",") if d}
    if after is not None:
        for seen in _shown_signals(node, gate, facts):
            written = seen.status_written
            if seen.first_seen <= after or (written is not None and written <= after):
                stale.add(episode_digest(seen.token))
    return (key, ",".join(sorted(stale)))


def _lifted(
    node: NodeState, gate: StartupGate, facts: PlanFacts, why: str, timed_out: bool = False
) -> RuleOutcome:
    completed, boot, regated, after, signals, _ = gate_annotation_keys(gate)
    annotations: list[tuple[str, str | None]] = [(completed, format_time(facts.now))]
    # The digests of the readiness episodes shown now, written even when nothing is shown: a
    # record, empty or not, says this nodegate lifted it.
    shown = {episode_digest(s.token) for s in _shown_signals(node, gate, facts)}
    annotations.append((signals, ",".join(sorted(shown))))
    extra = gate.completion_annotation
    if extra is not None:
        when = str(int(facts.now.timestamp())) if extra.format == "unix" else format_time(facts.now)
        annotations.append((extra.key, when))
    if node.boot_id:
        annotations.append((boot, node.boot_id))
    annotations += [(key, None) for key in (regated, after) if key in node.annotations]
    return RuleOutcome(
        RuleDecision(gate.name, gate.taint, "release", why),
        annotations=tuple(annotations),
        lift=True,
        timed_out=timed_out,
    )


def _absent_gate(
    node: NodeState, labels: Mapping[str, str], gate: StartupGate, facts: PlanFacts
) -> RuleOutcome:
    """A gate the node does not carry: put back only after a reboot (opt-in), or backfilled
    onto an idle node that never had it (opt-in); otherwise a gate never comes back."""
    completed, boot, *_ = gate_annotation_keys(gate)
    lifted_on = node.annotations.get(boot)
    if (
        gate.regate_on_reboot
        and completed in node.annotations
        and node.boot_id
        and lifted_on
        and lifted_on != node.boot_id
    ):
        why = "node rebooted (bootID changed): gate put back (regateOnReboot)"
        records = reboot_records(node, gate, facts)
        annotations = (*records, (completed, None), _stale_signals(node, gate, facts, records))
        if gate.completion_annotation is not None:
            annotations += ((gate.completion_annotation.key, None),)
        ready = gate.ready_when.annotation_pair
        if ready is not None and ready[0] in node.annotations:
            # Set on the previous boot, it says nothing of this one: the node sets it again.
            annotations += ((ready[0], None),)
            why += f"; its ready annotation {ready[0]} (of the previous boot) removed"
        return RuleOutcome(
            RuleDecision(gate.name, gate.taint, "want", why),
            annotations=annotations,
            put_back=True,
        )
    if needs_backfill(node, labels, gate) and facts.workload_pods == 0:
        why = "backfill: the node joined without the gate and runs no workload pods"
        return RuleOutcome(RuleDecision(gate.name, gate.taint, "want", why), put_back=True)
    if needs_backfill(node, labels, gate) and facts.workload_pods:
        why = "not backfilled: the node runs workload pods (recorded: it never will be)"
        record = ((GATE_BUSY + gate.name, format_time(facts.now)),)
        decision = RuleDecision(gate.name, gate.taint, "keep", why)
        return RuleOutcome(decision, annotations=record, recorded=True)
    return RuleOutcome(RuleDecision(gate.name, gate.taint, "keep", "gate not on the node"))


def reboot_records(
    node: NodeState, gate: StartupGate, facts: PlanFacts
) -> tuple[tuple[str, str | None], ...]:
    """What a re-gate records: when the new boot was first seen (this life began; the re-gate
    may be written much later), and the last moment the previous boot was known up."""
    completed, _, regated, after, *_ = gate_annotation_keys(gate)
    seen = facts.boot_first_seen if facts.boot_first_seen is not None else facts.now
    known_up = [
        t
        for t in (parse_time_or_none(node.annotations.get(completed)), facts.previous_boot_seen)
        if t is not None and t <= seen
    ]
    records: tuple[tuple[str, str | None], ...] = (
        (regated, format_precise_time(min(seen, facts.now))),
    )
    if known_up:
        records += ((after, format_precise_time(max(known_up))),)
    return records


def needs_backfill(node: NodeState, labels: Mapping[str, str], gate: StartupGate) -> bool:
    """A backfill candidate: opted in, matching, not gated (under any of its keys), never
    gated before (no completion record, nor the gate's completionAnnotation)."""
    extra = gate.completion_annotation
    return (
        gate.backfill
        and not carried_gate_taints(node, gate)
        and GATE_COMPLETED + gate.name not in node.annotations
        and GATE_BUSY + gate.name not in node.annotations
        and (extra is None or extra.key not in node.annotations)
        and gate.match.matches(dict(labels))
    )


def parse_time_or_none(value: str | None) -> datetime | None:
    try:
        return parse_time(value)
    except ValueError:
        return None  # a node may write anything in its annotations
