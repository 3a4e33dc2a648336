"""The source seam's protocol (`core.rules.cluster_reads`): one `Source` per kind of thing the
rules read from the cluster, and the one list of them a reader drives without naming them
(`Sources`). The reconciler's sources follow the rules with informers
(reconciler/nodes/sources/); the day-2 commands' list what they read once (cli/live/sources.py).

A source kind in `cluster_reads.SOURCES` without a source in the list is refused by name when
the list is made, as a rule kind without a decision is by the planner.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.cluster_reads import SOURCES
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState


class UnknownSourceError(Exception):
    """A source kind the rules may read that nothing in the list reads."""


class Source(Protocol):
    """What the rules read of one source kind, read for the rules given."""

    kind: str
    """Its kind's name in `cluster_reads.SOURCES`."""

    def follow(self, rules: NodeRules) -> None:
        """Read what the rules read (a reconciler's source starts and stops its informers)."""

    def stop(self) -> None: ...

    def synced(self) -> bool:
        """Whether everything it reads has been listed (nothing read: True)."""

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        """A node's facts, with its part in them."""


class ReadWhenAsked:
    """A source that reads when a node's facts are asked: nothing to follow, stop or wait for."""

    def follow(self, rules: NodeRules) -> None:
        pass

    def stop(self) -> None:
        pass

    def synced(self) -> bool:
        return True


class Sources(list[Source]):
    """Every source, one per kind (a kind none reads is refused by name)."""

    def __init__(self, sources: Iterable[Source]) -> None:
        super().__init__(sources)
        kinds = {s.kind for s in self}
        if missing := [k.name for k in SOURCES if k.name not in kinds]:
            raise UnknownSourceError(
                f"no source reads {', '.join(missing)}: make one beside the others "
                "(the reconciler's in reconciler/nodes/sources/, the CLI's in cli/live/sources.py)"
            )

    def follow(self, rules: NodeRules) -> None:
        for source in self:
            source.follow(rules)

    def stop(self) -> None:
        for source in self:
            source.stop()

    def synced(self) -> bool:
        return all(source.synced() for source in self)

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        for source in self:
            facts = source.facts(node, rules, facts)
        return facts
