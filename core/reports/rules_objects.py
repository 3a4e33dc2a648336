"""What each NodeRules object's status says: its conditions and, per rule of it in force, how
many nodes it matches, taints and keeps waiting. Pure.

Bounded at any cluster size: counts and at most `EXAMPLES` node names per rule, never a list of
every node (the status of an object is read by everyone who lists them). Each rule's counts
come from the one decision (`rule_outcomes.rule_outcome`), so they agree with `nodegate
explain`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nodegate.core.decisions.rule_outcomes import rule_outcome
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.cluster_reads import cluster_reads
from nodegate.core.rules.merge import Verdict, claims
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, format_time

EXAMPLES = 3
"""Node names kept per rule as examples of the nodes it keeps waiting."""


@dataclass
class RuleCount:
    """One rule's nodes: it wants its taint on `matched`, `tainted` carry it, `waiting` are
    wanted but not tainted yet (the eviction budget, a condition's `for`)."""

    kind: str
    matched: int = 0
    tainted: int = 0
    waiting: int = 0
    waiting_examples: list[str] = field(default_factory=list)
    tainted_nodes: set[str] = field(default_factory=set)
    waiting_nodes: set[str] = field(default_factory=set)
    """Which nodes: an object's totals count a node once, whichever of its rules it is in."""


def rule_counts(
    rules: NodeRules, nodes: Iterable[tuple[NodeState, PlanFacts]]
) -> dict[str, RuleCount]:
    """Every rule in force's counts, by rule name (rule names are unique across objects)."""
    taint_rules = rules.taint_rules()
    counts = {rule.name: RuleCount(rule.kind.field) for rule in taint_rules}
    for node, facts in nodes:
        for rule in taint_rules:
            count = counts[rule.name]
            carried = node.taint(rule.taint.identity) is not None
            wanted = rule_outcome(node, node.labels, rule, facts).decision.verdict == "want"
            count.matched += wanted
            if carried:
                count.tainted += 1
                count.tainted_nodes.add(node.name)
            if wanted and not carried:
                count.waiting += 1
                count.waiting_nodes.add(node.name)
                if len(count.waiting_examples) < EXAMPLES:
                    count.waiting_examples.append(node.name)
    return counts


@dataclass(frozen=True)
class ObjectFacts:
    """What the reconciler knows of one object."""

    generation: int
    verdict: Verdict | None
    """The merge's verdict on its current generation (None: not merged yet)."""
    in_force: Mapping[str, Any] | None
    """Its spec in force (None: none of it is)."""
    in_force_generation: int | None
    held: str | None = None
    """Why the blast-radius guard holds the update its current generation is in, and how to
    confirm it (None: nothing of it is held)."""
    cannot_read: Mapping[str, str] = field(default_factory=dict)
    """Rules in force (of any object) whose reads the API server refuses, and why
    (`unreadable_rules`)."""


def unreadable_rules(rules: NodeRules, refused: Mapping[str, str]) -> dict[str, str]:
    """Each rule that reads a kind the API server refuses the reconciler (by kind: `Pod`,
    `DaemonSet`, `CSINode`), with what to grant: such a rule waits, its nodes kept as they are."""
    found: dict[str, str] = {}
    for read in cluster_reads(rules).reads:
        for resource in read.source.resources:
            if resource.kind in refused:
                why = (
                    f"the reconciler may not list {resource.plural} ({refused[resource.kind]}); "
                    f"grant it: the installation's access.{_ACCESS[resource.plural]}"
                )
                found.update(dict.fromkeys(read.rules, why))
    return found


_ACCESS = {"pods": "pods", "daemonsets": "daemonSets", "csinodes": "csiNodes"}


def object_status(
    facts: ObjectFacts,
    counts: Mapping[str, RuleCount],
    existing: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """The object's status (Kubernetes conventions: observedGeneration, conditions whose
    lastTransitionTime moves only when their status does)."""
    verdict = facts.verdict
    if verdict is None or verdict.accepted:
        valid = _condition("Accepted", True, "Valid", f"generation {facts.generation} is valid")
    else:
        valid = _condition("Accepted", False, "Invalid", " | ".join(verdict.problems))
    if verdict is not None and verdict.conflicting:
        conflict = _condition("Conflicting", True, "Conflict", verdict.conflict)
    else:
        conflict = _condition(
            "Conflicting", False, "NoConflict", "it claims nothing another object holds"
        )
    conditions = [valid, conflict]
    names = [claim[1] for claim in claims(facts.in_force) if claim[0] == "rule"]
    blocked = {n: facts.cannot_read[n] for n in names if n in facts.cannot_read}
    conditions.append(_cannot_read(blocked) if blocked else _degraded(facts))
    mine = [(name, counts[name]) for name in names if name in counts]
    rows = [
        {
            "name": name,
            "kind": count.kind,
            "matched": count.matched,
            "tainted": count.tainted,
            "waiting": count.waiting,
            "waitingExamples": list(count.waiting_examples),
        }
        for name, count in mine
    ]
    tainted = set().union(*(count.tainted_nodes for _, count in mine))
    waiting = set().union(*(count.waiting_nodes for _, count in mine))
    status: dict[str, Any] = {
        "observedGeneration": facts.generation,
        "conditions": _keep_transitions(conditions, existing, facts.generation, now),
        "ruleCount": len(names),
        "nodesTainted": len(tainted),
        "nodesWaiting": len(waiting),
        "rules": rows,
    }
    if facts.in_force_generation is not None:
        status["inForceGeneration"] = facts.in_force_generation
    return status


def _degraded(facts: ObjectFacts) -> dict[str, Any]:
    if facts.in_force_generation == facts.generation:
        return _condition("Degraded", False, "InForce", "its current generation is in force")
    if facts.held is not None:
        return _condition("Degraded", True, "Held", facts.held)
    verdict = facts.verdict
    if verdict is not None and (not verdict.accepted or verdict.conflicting):
        keeping = (
            f"generation {facts.in_force_generation} is in force"
            if facts.in_force_generation is not None
            else "none of it is in force"
        )
        return _condition("Degraded", True, "NotInForce", keeping)
    return _condition("Degraded", True, "Pending", "its current generation is not in force yet")


def _cannot_read(blocked: Mapping[str, str]) -> dict[str, Any]:
    listed = "; ".join(f"{name}: {why}" for name, why in sorted(blocked.items()))
    return _condition("Degraded", True, "CannotRead", f"rules wait: {listed}")


def _condition(kind: str, true: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if true else "False",
        "reason": reason,
        "message": message[:32768],
    }


def _keep_transitions(
    conditions: Sequence[dict[str, Any]],
    existing: Mapping[str, Any] | None,
    generation: int,
    now: datetime,
) -> list[dict[str, Any]]:
    before = {
        c.get("type"): c for c in (existing or {}).get("conditions") or () if isinstance(c, dict)
    }
    kept = []
    for condition in conditions:
        old = before.get(condition["type"]) or {}
        moved = old.get("status") != condition["status"] or not old.get("lastTransitionTime")
        at = format_time(now) if moved else old["lastTransitionTime"]
        kept.append({**condition, "lastTransitionTime": at, "observedGeneration": generation})
    return kept
