"""How much of the cluster a rules update would untaint, and whether to hold it back. Pure.

A truncated or emptied rules ConfigMap is valid YAML and may be valid rules; applied blindly it
would strip nodegate's taints from every node at once. So before new rules take effect, the
reconciler plans them against every cached node; an update that would remove taints from more
than a configured share of the nodes (or that has no rules at all while something would be
removed) is held until someone confirms it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from nodegate.core.model import NodeRules
from nodegate.core.node import NodeState
from nodegate.core.plan import PlanFacts, plan

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

    @property
    def share(self) -> float:
        return self.untainted_nodes / self.nodes if self.nodes else 0.0


def blast_radius(nodes: Iterable[tuple[NodeState, PlanFacts]], rules: NodeRules) -> BlastRadius:
    total = untainted = removed = 0
    examples: list[str] = []
    for node, facts in nodes:
        total += 1
        result = plan(node, rules, facts)
        added = {c.taint.identity for c in result.add_taints}
        lost = [c for c in result.remove_taints if c.taint.identity not in added]
        if lost:
            untainted += 1
            removed += len(lost)
            if len(examples) < EXAMPLES:
                examples.append(node.name)
    return BlastRadius(total, untainted, removed, tuple(examples))


def rules_digest(data: str | bytes) -> str:
    """Short fingerprint of a rules text: what a confirmation names, so it confirms only that."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def has_no_rules(rules: NodeRules) -> bool:
    return not (
        rules.label_taints
        or rules.condition_taints
        or rules.startup_gates
        or rules.persistent_labels
        or rules.node_pools
    )


def hold_reason(radius: BlastRadius, rules: NodeRules, max_share: float) -> str | None:
    """Why this update must wait for confirmation, or None to apply it now."""
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
