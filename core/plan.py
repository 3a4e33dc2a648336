"""What one node should look like under the rules, and the smallest change that gets it there.

Pure: no API calls, no clock. The caller passes the facts the planner cannot see on the Node
itself (the time, which init pods are Ready, which persisted labels to restore). The reconciler,
`nodegate explain`, the demo and the benchmarks all call this one function.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal

from nodegate.core.k8s_names import taint_key_owner
from nodegate.core.model import (
    POOL_LABEL,
    ConditionMatch,
    ConditionTaintRule,
    NodeRules,
    StartupGate,
    Taint,
)
from nodegate.core.node import NodeCondition, NodeState, NodeTaint, format_time, parse_time

OWNED_TAINTS_ANNOTATION = "nodegate.dev/owned-taints"
"""key:Effect of every taint nodegate manages on this node, so deleted rules still clean up."""

Verdict = Literal["want", "keep", "release"]
"""want: the taint must be there; keep: leave it as it is; release: it must go (if present)."""


@dataclass(frozen=True)
class PlanFacts:
    """What the planner needs beyond the Node object itself."""

    now: datetime
    restored_labels: Mapping[str, str] = field(default_factory=dict)
    """Persisted labels to put back on a re-created node (absent keys only)."""
    previously_owned: frozenset[tuple[str, str]] = frozenset()
    """(key, effect) of taints that rules of earlier accepted generations owned, as recorded
    where nodes cannot write. Only these (and the current rules' taints) may be cleaned up."""
    conditions_first_seen: Mapping[tuple[str, str, str], datetime] = field(default_factory=dict)
    """When the reconciler first saw each (type, status, reason) that has no lastTransitionTime."""
    gate_pods_ready_since: Mapping[str, datetime] = field(default_factory=dict)
    """Gate name -> since when its init pod on this node has signalled ready (Ready, or the
    pod's ready annotation), for gates whose pod signal is met now."""
    workload_pods: int | None = None
    """Pods on the node other than DaemonSet and static pods; None: not looked up (no backfill)."""


@dataclass(frozen=True)
class RuleDecision:
    """One rule's verdict on one node, with the reason in words (for events and explain)."""

    rule: str
    taint: Taint
    verdict: Verdict
    why: str


@dataclass(frozen=True)
class TaintChange:
    taint: NodeTaint
    rules: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class LabelChange:
    key: str
    value: str
    why: str


@dataclass(frozen=True)
class NodePlan:
    """The changes one node needs. Empty means: zero writes."""

    node: str
    decisions: tuple[RuleDecision, ...] = ()
    add_taints: tuple[TaintChange, ...] = ()
    remove_taints: tuple[TaintChange, ...] = ()
    set_labels: tuple[LabelChange, ...] = ()
    owned_annotation: str | None = None
    """New value of the ownership annotation; None: unchanged; '': remove it."""
    recheck_after: timedelta | None = None
    """When the verdict may change with time alone (a `for` hold or gate timeout running)."""
    warnings: tuple[str, ...] = ()
    set_annotations: tuple[tuple[str, str | None], ...] = ()
    """Annotations to set (None: remove): startup gates' completion and re-gate records."""
    lifted_gates: tuple[str, ...] = ()
    timed_out_gates: tuple[str, ...] = ()
    gates_put_back: tuple[str, ...] = ()
    """Gates this plan adds back: re-gated after a reboot, or backfilled."""

    @property
    def is_empty(self) -> bool:
        return (
            not (self.add_taints or self.remove_taints or self.set_labels or self.set_annotations)
            and self.owned_annotation is None
        )

    def taints_after(self, node: NodeState) -> tuple[NodeTaint, ...]:
        """The node's taint list after the plan: order of survivors kept, additions appended."""
        removed = {c.taint.identity for c in self.remove_taints}
        kept = tuple(t for t in node.taints if t.identity not in removed)
        return kept + tuple(c.taint for c in self.add_taints)

    def apply(self, node: NodeState) -> NodeState:
        """The node as it will be once the plan is written (used by tests and dry runs)."""
        labels = {**node.labels, **{c.key: c.value for c in self.set_labels}}
        annotations = dict(node.annotations)
        for key, value in self.set_annotations:
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if self.owned_annotation == "":
            annotations.pop(OWNED_TAINTS_ANNOTATION, None)
        elif self.owned_annotation is not None:
            annotations[OWNED_TAINTS_ANNOTATION] = self.owned_annotation
        return replace(node, labels=labels, annotations=annotations, taints=self.taints_after(node))


def plan(node: NodeState, rules: NodeRules, facts: PlanFacts) -> NodePlan:
    """The changes that make `node` what `rules` want. Only rule-owned taints are ever removed."""
    label_changes = _label_changes(node, rules, facts)
    labels = {**node.labels, **{c.key: c.value for c in label_changes}}
    decisions, rechecks, warnings = _decide(node, labels, rules, facts)
    gates = [_gate_outcome(node, labels, gate, facts) for gate in rules.startup_gates]
    decisions += [g.decision for g in gates]
    rechecks += [g.recheck for g in gates if g.recheck is not None]
    warnings += [g.warning for g in gates if g.warning]

    decisions += [d for g in gates for d in g.former]

    wanted: dict[tuple[str, str], list[RuleDecision]] = {}
    kept: set[tuple[str, str]] = set()
    for d in decisions:
        if d.verdict == "want":
            wanted.setdefault(d.taint.identity, []).append(d)
        elif d.verdict == "keep":
            kept.add(d.taint.identity)

    add: list[TaintChange] = []
    remove: list[TaintChange] = []
    for identity, wanting in sorted(wanted.items()):
        desired = wanting[0].taint
        current = node.taint(identity)
        names = tuple(sorted({d.rule for d in wanting}))
        if current is not None and current.value == desired.value:
            continue
        if current is not None:
            remove.append(TaintChange(current, names, f"value changes to '{desired.value}'"))
        time_added = format_time(facts.now) if desired.effect == "NoExecute" else None
        why = "; ".join(sorted({d.why for d in wanting}))
        add.append(
            TaintChange(
                NodeTaint(desired.key, desired.effect, desired.value, time_added), names, why
            )
        )

    owned = removable_taints(node, rules, facts.previously_owned)
    releasing = {d.taint.identity: d for d in decisions if d.verdict == "release"}
    for taint in node.taints:
        identity = taint.identity
        if identity in wanted or identity in kept or identity not in owned:
            continue
        if identity in releasing:
            reason = releasing[identity]
            remove.append(TaintChange(taint, (reason.rule,), reason.why))
        else:
            remove.append(TaintChange(taint, (), "no rule in the rules file owns it any more"))

    after = NodePlan(node.name, add_taints=tuple(add), remove_taints=tuple(remove)).taints_after(
        node
    )
    # Former gate keys are lifted, never claimed: once dropped from formerKeys, they are left.
    former = rules.former_gate_taints()
    managed = sorted(
        {t.identity for t in after if t.identity in wanted or (t.identity in kept - former)}
    )
    annotation = ",".join(f"{key}:{effect}" for key, effect in managed)
    current_annotation = node.annotations.get(OWNED_TAINTS_ANNOTATION)
    new_annotation = None if annotation == (current_annotation or "") else annotation

    removed = {c.taint.identity for c in remove}
    added = {c.taint.identity for c in add}
    lifted = [g for g in gates if g.lift and g.carried & removed]
    put_back = [g for g in gates if g.put_back and g.decision.taint.identity in added]
    annotations = [a for g in (*lifted, *put_back) for a in g.annotations]
    return NodePlan(
        node=node.name,
        decisions=tuple(decisions),
        add_taints=tuple(add),
        remove_taints=tuple(sorted(remove, key=lambda c: c.taint.identity)),
        set_labels=tuple(label_changes),
        owned_annotation=new_annotation,
        recheck_after=min(rechecks) if rechecks else None,
        warnings=tuple(warnings),
        set_annotations=tuple(annotations),
        lifted_gates=tuple(g.decision.rule for g in lifted),
        timed_out_gates=tuple(g.decision.rule for g in gates if g.timed_out),
        gates_put_back=tuple(g.decision.rule for g in put_back),
    )


OWNERSHIP_ANNOTATION_LIMIT = 64 * 1024
"""Longer annotations are not read at all: a real one lists a handful of taints."""


def parse_ownership(text: str) -> frozenset[tuple[str, str]]:
    """Read the ownership annotation ('key:Effect,key:Effect'); unreadable parts are skipped.

    The node itself can write this annotation (a kubelet may edit its own Node's annotations),
    so what it says is only ever a claim, intersected with what rules owned (`removable_taints`).
    """
    if len(text) > OWNERSHIP_ANNOTATION_LIMIT:
        return frozenset()
    owned = set()
    for item in text.split(","):
        key, sep, effect = item.strip().rpartition(":")
        if sep and key and effect:
            owned.add((key, effect))
    return frozenset(owned)


def removable_taints(
    node: NodeState, rules: NodeRules, previously_owned: frozenset[tuple[str, str]]
) -> frozenset[tuple[str, str]]:
    """The taints nodegate may remove from this node, and no others.

    A current rule's taint, or a taint that the node's ownership annotation claims *and* that
    some earlier accepted rules owned (so a deleted rule still cleans up after itself). A claim
    alone is never enough, and a key another controller owns (`node.kubernetes.io/*`,
    Karpenter, the autoscaler...) is never removable unless a current rule names it. A gate's
    former keys are named by a current rule too (the planner only ever releases them with
    their gate).
    """
    current = rules.owned_taints() | rules.former_gate_taints()
    claimed = parse_ownership(node.annotations.get(OWNED_TAINTS_ANNOTATION, ""))
    earlier = {
        identity for identity in claimed & previously_owned if taint_key_owner(identity[0]) is None
    }
    return current | earlier


def _label_changes(node: NodeState, rules: NodeRules, facts: PlanFacts) -> list[LabelChange]:
    changes: dict[str, LabelChange] = {}
    for key, value in sorted(facts.restored_labels.items()):
        if key not in node.labels:
            changes[key] = LabelChange(key, value, "restored persisted label")
    pool = rules.pool(node.labels.get(POOL_LABEL, ""))
    if pool is not None:
        for key, value in sorted(pool.reconciler_labels.items()):
            if node.labels.get(key) != value:
                changes[key] = LabelChange(key, value, f"reconcilerLabels of pool '{pool.name}'")
    return [changes[k] for k in sorted(changes)]


def _decide(
    node: NodeState, labels: Mapping[str, str], rules: NodeRules, facts: PlanFacts
) -> tuple[list[RuleDecision], list[timedelta], list[str]]:
    decisions: list[RuleDecision] = []
    rechecks: list[timedelta] = []
    warnings: list[str] = []
    for rule in rules.label_taints:
        if rule.match.matches(dict(labels)):
            decisions.append(RuleDecision(rule.name, rule.taint, "want", "node labels match"))
        else:
            decisions.append(
                RuleDecision(rule.name, rule.taint, "release", "node labels do not match")
            )
    for condition_rule in rules.condition_taints:
        decision, recheck = _condition_decision(node, labels, condition_rule, facts)
        decisions.append(decision)
        if recheck is not None:
            rechecks.append(recheck)
    return decisions, rechecks, warnings


def _matching_condition(
    conditions: Iterable[NodeCondition], match: ConditionMatch
) -> NodeCondition | None:
    for condition in conditions:
        if not match.matches_type(condition.type):
            continue
        if re.fullmatch(match.status, condition.status) is None:
            continue
        if match.reason is not None and re.fullmatch(match.reason, condition.reason) is None:
            continue
        return condition
    return None


def _condition_decision(
    node: NodeState, labels: Mapping[str, str], rule: ConditionTaintRule, facts: PlanFacts
) -> tuple[RuleDecision, timedelta | None]:
    now = facts.now
    not_matching: Verdict = "release" if rule.on_recovery == "remove" else "keep"
    if rule.match is not None and not rule.match.matches(dict(labels)):
        return RuleDecision(rule.name, rule.taint, "release", "node labels do not match"), None
    found = [_matching_condition(node.conditions, m) for m in rule.conditions]
    if any(c is None for c in found):
        why = "conditions do not match" + (" (onRecovery: keep)" if not_matching == "keep" else "")
        return RuleDecision(rule.name, rule.taint, not_matching, why), None
    if rule.hold:
        since = max(_condition_since(c, facts) for c in found if c is not None)
        remaining = since + rule.hold - now
        if remaining > timedelta(0):
            why = f"conditions match, waiting {int(remaining.total_seconds())}s more of `for`"
            return RuleDecision(rule.name, rule.taint, "keep", why), remaining
    return RuleDecision(rule.name, rule.taint, "want", "conditions match"), None


def _condition_since(condition: NodeCondition, facts: PlanFacts) -> datetime:
    """When a condition took its current status; without lastTransitionTime (some node-problem
    detectors omit it), when the reconciler first saw it so, else now."""
    if condition.last_transition_time is not None:
        return condition.last_transition_time
    return facts.conditions_first_seen.get(condition_identity(condition), facts.now)


def condition_identity(condition: NodeCondition) -> tuple[str, str, str]:
    return (condition.type, condition.status, condition.reason)


def track_first_seen(
    previous: Mapping[tuple[str, str, str], datetime],
    conditions: Iterable[NodeCondition],
    now: datetime,
) -> dict[tuple[str, str, str], datetime]:
    """First-seen times of the node's conditions that carry no lastTransitionTime.

    Kept by the reconciler in memory only (nothing is written to the node); an entry goes as
    soon as its (type, status, reason) is no longer on the node, so a flip restarts the clock.
    """
    return {
        identity: previous.get(identity, now)
        for condition in conditions
        if condition.last_transition_time is None
        for identity in (condition_identity(condition),)
    }


GATE_COMPLETED = "completed.gate.nodegate.dev/"
"""+ gate name: when the gate was lifted (RFC 3339), as nodetaintshandler's completedAt."""
GATE_BOOT = "boot.gate.nodegate.dev/"
"""+ gate name: the node's bootID when the gate was lifted (a new one means a reboot)."""
GATE_REGATED = "regated.gate.nodegate.dev/"
"""+ gate name: when the gate was put back after a reboot (older readiness does not count)."""


def gate_annotation_keys(gate: StartupGate) -> tuple[str, str, str]:
    return (GATE_COMPLETED + gate.name, GATE_BOOT + gate.name, GATE_REGATED + gate.name)


def annotations_read(rules: NodeRules) -> frozenset[str]:
    """Node annotations outside nodegate's own domain that the rules' gates read: ready
    annotations, and completion annotations (a node carrying one is not backfilled)."""
    ready = {
        pair[0] for g in rules.startup_gates if (pair := g.ready_when.annotation_pair) is not None
    }
    completion = {
        g.completion_annotation.key for g in rules.startup_gates if g.completion_annotation
    }
    return frozenset(ready | completion)


@dataclass(frozen=True)
class _GateOutcome:
    decision: RuleDecision
    recheck: timedelta | None = None
    warning: str | None = None
    annotations: tuple[tuple[str, str | None], ...] = ()
    lift: bool = False
    put_back: bool = False
    timed_out: bool = False
    carried: frozenset[tuple[str, str]] = frozenset()
    """(key, effect) of the gate's taints on the node: its own and any former key."""
    former: tuple[RuleDecision, ...] = ()
    """The same verdict for each former key the node carries (keep, or release on lift)."""


def _gate_outcome(
    node: NodeState, labels: Mapping[str, str], gate: StartupGate, facts: PlanFacts
) -> _GateOutcome:
    carried = carried_gate_taints(node, gate)
    if not carried:
        return _absent_gate(node, labels, gate, facts)
    outcome = _carried_gate(node, gate, facts)
    if carried == {gate.taint.identity}:
        return replace(outcome, carried=carried)
    former = tuple(
        replace(outcome.decision, taint=taint)
        for taint in gate.former_taints
        if taint.identity in carried
    )
    return replace(outcome, carried=carried, former=former)


def carried_gate_taints(node: NodeState, gate: StartupGate) -> frozenset[tuple[str, str]]:
    """The gate's taints on the node: a node born under a former key (old bootstrap, another
    tool's webhook) is gated by it until the gate is met."""
    identities = [gate.taint.identity, *((key, gate.taint.effect) for key in gate.former_keys)]
    return frozenset(i for i in identities if node.taint(i) is not None)


def _carried_gate(node: NodeState, gate: StartupGate, facts: PlanFacts) -> _GateOutcome:
    # `match` is not consulted here: labels often arrive after registration, so a gate the node
    # carries is lifted only by its readiness or its timeout, never by a label mismatch.
    signal = _gate_signal(node, gate, facts)
    if signal is not None:
        held = _min_hold_left(node, gate, facts.now)
        if held is not None:
            why = f"{signal}; minHold keeps it {int(held.total_seconds())}s more"
            return _GateOutcome(RuleDecision(gate.name, gate.taint, "keep", why), recheck=held)
        return _lifted(node, gate, facts, signal)
    if gate.timeout is not None and node.created is not None:
        remaining = node.created + gate.timeout - facts.now
        if remaining <= timedelta(0):
            if gate.on_timeout == "lift":
                return _lifted(node, gate, facts, "timed out (onTimeout: lift)", timed_out=True)
            warning = f"startup gate '{gate.name}' timed out; keeping its taint (onTimeout: keep)"
            decision = RuleDecision(gate.name, gate.taint, "keep", "timed out (onTimeout: keep)")
            return _GateOutcome(decision, warning=warning, timed_out=True)
        decision = RuleDecision(gate.name, gate.taint, "keep", "waiting for readiness")
        return _GateOutcome(decision, recheck=remaining)
    return _GateOutcome(RuleDecision(gate.name, gate.taint, "keep", "waiting for readiness"))


def _gate_signal(node: NodeState, gate: StartupGate, facts: PlanFacts) -> str | None:
    """Why the gate may be lifted now (its readiness signal), or None."""
    pair = gate.ready_when.annotation_pair
    if pair is not None and node.annotations.get(pair[0]) == pair[1]:
        return f"annotation {gate.ready_when.annotation}"
    since = facts.gate_pods_ready_since.get(gate.name)
    if since is None:
        return None
    regated = parse_time_or_none(node.annotations.get(GATE_REGATED + gate.name))
    if regated is not None and since < regated:
        return None  # readiness from before the reboot does not count
    return "init pod is Ready"


def _min_hold_left(node: NodeState, gate: StartupGate, now: datetime) -> timedelta | None:
    if gate.min_hold is None or node.created is None:
        return None
    left = node.created + gate.min_hold - now
    return left if left > timedelta(0) else None


def _lifted(
    node: NodeState, gate: StartupGate, facts: PlanFacts, why: str, timed_out: bool = False
) -> _GateOutcome:
    completed, boot, regated = gate_annotation_keys(gate)
    annotations: list[tuple[str, str | None]] = [(completed, format_time(facts.now))]
    extra = gate.completion_annotation
    if extra is not None:
        when = str(int(facts.now.timestamp())) if extra.format == "unix" else format_time(facts.now)
        annotations.append((extra.key, when))
    if node.boot_id:
        annotations.append((boot, node.boot_id))
    if regated in node.annotations:
        annotations.append((regated, None))
    return _GateOutcome(
        RuleDecision(gate.name, gate.taint, "release", why),
        annotations=tuple(annotations),
        lift=True,
        timed_out=timed_out,
    )


def _absent_gate(
    node: NodeState, labels: Mapping[str, str], gate: StartupGate, facts: PlanFacts
) -> _GateOutcome:
    """A gate the node does not carry: put back only after a reboot (opt-in), or backfilled
    onto an idle node that never had it (opt-in); otherwise a gate never comes back."""
    completed, boot, regated = gate_annotation_keys(gate)
    lifted_on = node.annotations.get(boot)
    if (
        gate.regate_on_reboot
        and completed in node.annotations
        and node.boot_id
        and lifted_on
        and lifted_on != node.boot_id
    ):
        why = "node rebooted (bootID changed): gate put back (regateOnReboot)"
        annotations: tuple[tuple[str, str | None], ...] = (
            (completed, None),
            (regated, format_time(facts.now)),
        )
        if gate.completion_annotation is not None:
            annotations += ((gate.completion_annotation.key, None),)
        return _GateOutcome(
            RuleDecision(gate.name, gate.taint, "want", why),
            annotations=annotations,
            put_back=True,
        )
    if needs_backfill(node, labels, gate) and facts.workload_pods == 0:
        why = "backfill: the node joined without the gate and runs no workload pods"
        return _GateOutcome(RuleDecision(gate.name, gate.taint, "want", why), put_back=True)
    return _GateOutcome(RuleDecision(gate.name, gate.taint, "keep", "gate not on the node"))


def needs_backfill(node: NodeState, labels: Mapping[str, str], gate: StartupGate) -> bool:
    """A backfill candidate: opted in, matching, not gated (under any of its keys), never
    gated before (no completion record, nor the gate's completionAnnotation)."""
    extra = gate.completion_annotation
    return (
        gate.backfill
        and not carried_gate_taints(node, gate)
        and GATE_COMPLETED + gate.name not in node.annotations
        and (extra is None or extra.key not in node.annotations)
        and gate.match.matches(dict(labels))
    )


def parse_time_or_none(value: str | None) -> datetime | None:
    try:
        return parse_time(value)
    except ValueError:
        return None  # a node may write anything in its annotations


def relevant_view(node: NodeState, rules: NodeRules) -> tuple[object, ...]:
    """Everything the planner reads from a node; equal views mean equal plans.

    The reconciler compares views of the old and new object on every watch event, so a heartbeat
    or status update that changes nothing here costs no work.
    """
    gate_records = {key for g in rules.startup_gates for key in gate_annotation_keys(g)}
    read_annotations = annotations_read(rules) | gate_records | {OWNED_TAINTS_ANNOTATION}
    return (
        tuple(sorted(node.labels.items())),
        tuple(sorted((k, v) for k, v in node.annotations.items() if k in read_annotations)),
        tuple(sorted((t.key, t.effect, t.value) for t in node.taints)),
        tuple(
            sorted(
                (c.type, c.status, c.reason, c.last_transition_time or 0) for c in node.conditions
            )
        ),
        node.created,
        node.boot_id if any(g.regate_on_reboot for g in rules.startup_gates) else "",
    )
