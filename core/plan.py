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
from nodegate.core.node import NodeCondition, NodeState, NodeTaint, format_time

OWNED_TAINTS_ANNOTATION = "nodegate.dev/owned-taints"
"""key:Effect of every taint nodegate manages on this node, so deleted rules still clean up."""

Verdict = Literal["want", "keep", "release"]
"""want: the taint must be there; keep: leave it as it is; release: it must go (if present)."""


@dataclass(frozen=True)
class PlanFacts:
    """What the planner needs beyond the Node object itself."""

    now: datetime
    ready_pods_for_gates: frozenset[str] = frozenset()
    """Names of startup gates whose init pod on this node is Ready."""
    restored_labels: Mapping[str, str] = field(default_factory=dict)
    """Persisted labels to put back on a re-created node (absent keys only)."""
    previously_owned: frozenset[tuple[str, str]] = frozenset()
    """(key, effect) of taints that rules of earlier accepted generations owned, as recorded
    where nodes cannot write. Only these (and the current rules' taints) may be cleaned up."""
    conditions_first_seen: Mapping[tuple[str, str, str], datetime] = field(default_factory=dict)
    """When the reconciler first saw each (type, status, reason) that has no lastTransitionTime."""


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

    @property
    def is_empty(self) -> bool:
        return (
            not (self.add_taints or self.remove_taints or self.set_labels)
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
    managed = sorted({t.identity for t in after if t.identity in wanted or t.identity in kept})
    annotation = ",".join(f"{key}:{effect}" for key, effect in managed)
    current_annotation = node.annotations.get(OWNED_TAINTS_ANNOTATION)
    new_annotation = None if annotation == (current_annotation or "") else annotation

    return NodePlan(
        node=node.name,
        decisions=tuple(decisions),
        add_taints=tuple(add),
        remove_taints=tuple(sorted(remove, key=lambda c: c.taint.identity)),
        set_labels=tuple(label_changes),
        owned_annotation=new_annotation,
        recheck_after=min(rechecks) if rechecks else None,
        warnings=tuple(warnings),
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
    Karpenter, the autoscaler...) is never removable unless a current rule names it.
    """
    current = rules.owned_taints()
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
    for gate in rules.startup_gates:
        decision, recheck, warning = _gate_decision(node, gate, facts)
        decisions.append(decision)
        if recheck is not None:
            rechecks.append(recheck)
        if warning:
            warnings.append(warning)
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


def _gate_decision(
    node: NodeState, gate: StartupGate, facts: PlanFacts
) -> tuple[RuleDecision, timedelta | None, str | None]:
    # `match` is not consulted here: labels often arrive after registration, so a gate the node
    # was born with is lifted only by its readiness or its timeout, never by a label mismatch.
    pair = gate.ready_when.annotation_pair
    if pair is not None and node.annotations.get(pair[0]) == pair[1]:
        return (
            RuleDecision(
                gate.name, gate.taint, "release", f"annotation {gate.ready_when.annotation}"
            ),
            None,
            None,
        )
    if gate.name in facts.ready_pods_for_gates:
        return RuleDecision(gate.name, gate.taint, "release", "init pod is Ready"), None, None
    if gate.timeout is not None and node.created is not None:
        remaining = node.created + gate.timeout - facts.now
        if remaining <= timedelta(0):
            if gate.on_timeout == "lift":
                return (
                    RuleDecision(gate.name, gate.taint, "release", "timed out (onTimeout: lift)"),
                    None,
                    None,
                )
            warning = f"startup gate '{gate.name}' timed out; keeping its taint (onTimeout: keep)"
            return (
                RuleDecision(gate.name, gate.taint, "keep", "timed out (onTimeout: keep)"),
                None,
                warning,
            )
        return RuleDecision(gate.name, gate.taint, "keep", "waiting for readiness"), remaining, None
    return RuleDecision(gate.name, gate.taint, "keep", "waiting for readiness"), None, None


def relevant_view(node: NodeState, rules: NodeRules) -> tuple[object, ...]:
    """Everything the planner reads from a node; equal views mean equal plans.

    The reconciler compares views of the old and new object on every watch event, so a heartbeat
    or status update that changes nothing here costs no work.
    """
    gate_annotations = {
        pair[0] for g in rules.startup_gates if (pair := g.ready_when.annotation_pair) is not None
    }
    read_annotations = gate_annotations | {OWNED_TAINTS_ANNOTATION}
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
    )
