"""The reconciler's side of the source seam (`core.rules.cluster_reads`): one `Source` per kind
of thing the rules read from the cluster, each following the rules in force, and the one list
of them the controller drives without naming them (`Sources`).

A source kind in `core.rules.cluster_reads.SOURCES` without a source here is refused by name
when the controller is made, as a rule kind without a decision is by the planner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.cluster_reads import SOURCES
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.nodes.node_view import CachedNode


class UnknownSourceError(Exception):
    """A source kind the rules may read that nothing in the reconciler follows."""


class Source(Protocol):
    """What the rules read of one source kind, followed for the rules in force."""

    kind: str
    """Its kind's name in `cluster_reads.SOURCES`."""

    def follow(self, rules: NodeRules) -> None:
        """Read what the rules read (start and stop its informers to match)."""

    def stop(self) -> None:
        """Stop reading (the controller stops)."""

    def synced(self) -> bool:
        """Whether everything it reads has been listed (nothing read: True)."""

    def facts(self, key: str, node: CachedNode, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        """A node's facts for its reconcile, with its part in them."""


class Sources(list[Source]):
    """Every source, one per kind (a kind none follows is refused by name)."""

    def __init__(self, sources: Iterable[Source]) -> None:
        super().__init__(sources)
        kinds = {s.kind for s in self}
        if missing := [k.name for k in SOURCES if k.name not in kinds]:
            raise UnknownSourceError(
                f"no reconciler source follows {', '.join(missing)}: make one "
                "(reconciler/nodes/sources/source.py) and hand it to the controller"
            )

    def follow(self, rules: NodeRules) -> None:
        for source in self:
            source.follow(rules)

    def stop(self) -> None:
        for source in self:
            source.stop()

    def synced(self) -> bool:
        return all(source.synced() for source in self)

    def facts(self, key: str, node: CachedNode, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        for source in self:
            facts = source.facts(key, node, rules, facts)
        return facts
