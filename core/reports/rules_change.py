"""What a rules change would do to the live cluster, before it is merged: `nodegate plan`. Pure.

Every node is decided twice (`node_decision.decide`, no eviction budget), under the rules in force
and under the new rules, with the same facts; what the new rules would write that the rules in
force would not is the change (so drift the reconciler is fixing anyway is not blamed on the edit).
The blast-radius guard is the reconciler's own (`blast_radius.blast_radius` and `hold_reason`),
so "would be held" here means the reconciler would hold it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from nodegate.core.decisions.blast_radius import BlastRadius, blast_radius, hold_reason
from nodegate.core.decisions.node_decision import decide
from nodegate.core.decisions.plan import NodePlan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import POOL_LABEL, NodeRules
from nodegate.core.rules.node import NodeState

NO_CHANGE = 0
CHANGES = 2
HELD = 3
"""`nodegate plan`'s exit codes (1: an error; docs/infra.md): a CI job can tell them apart."""

Verdict = Literal["no change", "changes", "held"]
NO_POOL = "-"
NO_RULE = "(no rule)"


@dataclass(frozen=True, order=True)
class Change:
    """One change to one node: a taint or label added (+) or removed (-)."""

    kind: Literal["taint", "label"]
    op: Literal["+", "-"]
    item: str
    """`key=value:Effect` for a taint, `key=value` for a label."""
    rule: str
    """The rule (or pool's reconcilerLabels) that wants it; NO_RULE for a taint no rule owns
    any more (cleaned up through the ownership annotation)."""

    def __str__(self) -> str:
        return f"{self.op} {self.kind} {self.item}"


@dataclass(frozen=True)
class NodeChange:
    node: str
    pool: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class SummaryRow:
    """How many nodes of one pool one change of one rule touches."""

    rule: str
    pool: str
    change: str
    nodes: int


@dataclass(frozen=True)
class RulesChange:
    nodes: int
    changed: tuple[NodeChange, ...]
    summary: tuple[SummaryRow, ...]
    radius: BlastRadius
    hold: str | None
    """Why the reconciler's blast-radius guard would hold the new rules (None: it would not)."""
    max_share: float = 0.5
    """The guard's limit it was judged with (the reconciler's `--max-untaint-share`)."""

    @property
    def verdict(self) -> Verdict:
        if self.hold is not None:
            return "held"
        return "changes" if self.changed else "no change"

    @property
    def exit_code(self) -> int:
        return {"no change": NO_CHANGE, "changes": CHANGES, "held": HELD}[self.verdict]

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-able data (`nodegate plan -o json|yaml`)."""
        radius = self.radius
        return {
            "verdict": self.verdict,
            "exitCode": self.exit_code,
            "nodes": self.nodes,
            "changedNodes": len(self.changed),
            "hold": self.hold,
            "maxUntaintShare": self.max_share,
            "blastRadius": {
                "untaintedNodes": radius.untainted_nodes,
                "removedTaints": radius.removed_taints,
                "evictedNodes": radius.evicted_nodes,
            },
            "summary": [asdict(row) for row in self.summary],
            "changes": [
                {"node": c.node, "pool": c.pool, "changes": [str(x) for x in c.changes]}
                for c in self.changed
            ],
        }


def changes_of(
    result: NodePlan, former_owners: Mapping[tuple[str, str], str] | None = None
) -> frozenset[Change]:
    """The taint and label changes of a plan (its bookkeeping annotations left out). A taint
    removed because no rule owns it any more is attributed to the rule of `former_owners` (the
    rules in force) that owned it, as `<rule> (removed)`."""
    found: set[Change] = set()
    for added in result.add_taints:
        found.add(Change("taint", "+", str(added.taint), _rule(added.rules)))
    for removed in result.remove_taints:
        rule = _rule(removed.rules)
        owner = (former_owners or {}).get(removed.taint.identity)
        if not removed.rules and owner is not None:
            rule = f"{owner} (removed)"
        found.add(Change("taint", "-", str(removed.taint), rule))
    for label in result.set_labels:
        found.add(Change("label", "+", f"{label.key}={label.value}", label.why))
    return frozenset(found)


def _rule(rules: tuple[str, ...]) -> str:
    return ", ".join(rules) if rules else NO_RULE


def pool_of(node: NodeState) -> str:
    return node.labels.get(POOL_LABEL) or NO_POOL


def rules_change(
    nodes: Sequence[tuple[NodeState, PlanFacts]],
    new: NodeRules,
    in_force: NodeRules | None,
    max_share: float,
) -> RulesChange:
    """The change `new` would make on `nodes` beyond what `in_force` would, and the guard's say.

    `max_share` is the reconciler's `--max-untaint-share` (0.5 by default)."""
    changed: list[NodeChange] = []
    owners = _owners(in_force) if in_force is not None else {}
    for node, facts in nodes:
        wanted = changes_of(decide(node, new, facts), owners)
        if in_force is not None:
            wanted -= changes_of(decide(node, in_force, facts))
        if wanted:
            changed.append(NodeChange(node.name, pool_of(node), tuple(sorted(wanted))))
    radius = blast_radius(nodes, new, in_force)
    return RulesChange(
        len(nodes),
        tuple(sorted(changed, key=lambda c: c.node)),
        summarize(changed),
        radius,
        hold_reason(radius, new, max_share, in_force),
        max_share,
    )


def _owners(rules: NodeRules) -> dict[tuple[str, str], str]:
    """Which rule owns each taint (key, effect) under `rules`."""
    owned: dict[tuple[str, str], str] = {}
    for rule in rules.taint_rules():
        owned.setdefault(rule.taint.identity, rule.name)
    return owned


def summarize(changed: Iterable[NodeChange]) -> tuple[SummaryRow, ...]:
    counts = Counter((c.rule, node.pool, str(c)) for node in changed for c in node.changes)
    return tuple(
        SummaryRow(rule, pool, text, n) for (rule, pool, text), n in sorted(counts.items())
    )
