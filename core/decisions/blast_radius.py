"""How much of the cluster a rules update would untaint or evict, and whether to hold it. Pure.

A truncated or emptied rules ConfigMap is valid YAML and may be valid rules; applied blindly it
would strip nodegate's taints from every node at once. So before new rules take effect, the
reconciler plans them against every cached node; an update that would remove taints from more
than a configured share of the nodes (or that has no rules at all while something would be
removed) is held until someone confirms it. So is an update that would put evicting taints
(those the eviction budget counts, `core/decisions/eviction_budget.py`) on more than that share of
the nodes at once: a condition rule on `Ready=True` is valid and would NoExecute every node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from nodegate.core.decisions.eviction_budget import charges
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState

EXAMPLES = 5


@dataclass(frozen=True)
class BlastRadius:
    """What applying a rules update would take away."""

    nodes: int
    untainted_nodes: int
    """Nodes that would lose at least one taint (a value change is not a loss)."""
    removed_taints: int
    examples: tuple[str, ...] = ()
    """A few of the affected nodes, for the Event."""
    evicted_nodes: int = 0
    """Nodes that would get an evicting taint they would not get under the rules in force."""
    evicted_examples: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.untainted_nodes / self.nodes if self.nodes else 0.0

    @property
    def evicted_share(self) -> float:
        return self.evicted_nodes / self.nodes if self.nodes else 0.0


def blast_radius(
    nodes: Iterable[tuple[NodeState, PlanFacts]],
    rules: NodeRules,
    in_force: NodeRules | None = None,
) -> BlastRadius:
    total = untainted = removed = evicted = 0
    examples: list[str] = []
    evicted_examples: list[str] = []
    for node, facts in nodes:
        total += 1
        result = plan(node, rules, facts)
        # An evicting taint the rules in force would add anyway (a storm already under way) is
        # the budget's, not the update's. Unlimited rules count too: the budget is for storms,
        # this guard for edits.
        new = {c.taint for c in charges(node, result, rules)}
        if new and in_force is not None:
            new -= {c.taint for c in charges(node, plan(node, in_force, facts), in_force)}
        if new:
            evicted += 1
            if len(evicted_examples) < EXAMPLES:
                evicted_examples.append(node.name)
        added = {c.taint.identity for c in result.add_taints}
        lost = [c for c in result.remove_taints if c.taint.identity not in added]
        if lost:
            untainted += 1
            removed += len(lost)
            if len(examples) < EXAMPLES:
                examples.append(node.name)
    return BlastRadius(total, untainted, removed, tuple(examples), evicted, tuple(evicted_examples))


def rules_digest(data: str | bytes) -> str:
    """Short fingerprint of a rules text: what a confirmation names, so it confirms only that."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def has_no_rules(rules: NodeRules) -> bool:
    return not (rules.taint_rules() or rules.persistent_labels or rules.node_pools)


def hold_reason(
    radius: BlastRadius, rules: NodeRules, max_share: float, in_force: NodeRules | None = None
) -> str | None:
    """Why this update must wait for confirmation, or None to apply it now. Rules with no
    rules at all in place of some are held even when no node carries a taint of theirs now:
    the next node born with a gate would carry it for ever, and persisted labels would no
    longer come back (a truncated ConfigMap, every NodeRules object deleted)."""
    if has_no_rules(rules) and in_force is not None and not has_no_rules(in_force):
        removed = (
            f"; it would also remove {radius.removed_taints} taint(s) from "
            f"{radius.untainted_nodes} node(s)"
            if radius.untainted_nodes
            else ""
        )
        return (
            f"it has no rules at all in place of {len(in_force.taint_rules())} rule(s) in "
            f"force (no gate a node is born with would be lifted any more, no persisted label "
            f"restored){removed}; a truncated rules ConfigMap, or every NodeRules object deleted?"
        )
    if radius.evicted_share > max_share:
        where = ", ".join(radius.evicted_examples)
        return (
            f"it would add evicting taints to {radius.evicted_nodes} of {radius.nodes} nodes "
            f"({radius.evicted_share:.0%} > the {max_share:.0%} limit; e.g. {where})"
        )
    if radius.untainted_nodes == 0:
        return None
    where = f"e.g. {', '.join(radius.examples)}" if radius.examples else ""
    if has_no_rules(rules):
        return (
            f"the rules file has no rules at all and would remove {radius.removed_taints} "
            f"taint(s) from {radius.untainted_nodes} node(s) ({where}); a truncated ConfigMap?"
        )
    if radius.share > max_share:
        return (
            f"it would remove taints from {radius.untainted_nodes} of {radius.nodes} nodes "
            f"({radius.share:.0%} > the {max_share:.0%} limit; {where})"
        )
    return None
