"""`nodegate plan`'s live source (`cli.plan_sources.PlanSource`): what the plan reads, from the
cluster, through `cli.live.cluster` (the reconciler's own readers and parsers)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from nodegate.cli.live.cluster import Cluster
from nodegate.cli.plan_sources import (
    AgentObjects,
    InForce,
    Owned,
    agent_objects,
    agents_read,
)
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState


class LiveSource:
    """The live cluster as `nodegate plan` reads it; nothing is assumed."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def in_force(self) -> InForce:
        """The reconciler's rules in force (its status record; none at generation 0), else,
        with no record at all, the rules ConfigMap's, else none (every change is new). A record
        that cannot say raises RulesInForceUnknownError: never guessed."""
        published = self._cluster.rules_in_force()
        if published is not None:
            which = published.which
            if published.rules is not None:
                which = f"the rules in force (generation {published.status.generation})"
            return InForce(published.rules, which, published.status.max_untaint_share)
        configmap = self._cluster.rules_source()
        if configmap.rules is not None:
            return InForce(configmap.rules, f"the rules ConfigMap {configmap.view.reference}")
        return InForce(None, "no rules (none are in force)")

    def now(self) -> datetime:
        return self._cluster.now()

    def previously_owned(self, in_force: NodeRules | None) -> Owned:
        return self._cluster.previously_owned()

    def nodes(self, on_page: Callable[[int], None]) -> list[NodeState]:
        return self._cluster.nodes(on_page)

    def agent_objects(self, rules: NodeRules) -> AgentObjects:
        daemon_sets, pods, csi_nodes = self._cluster.agent_objects(
            rules, agents_read(rules, "node-agents"), agents_read(rules, "csi-nodes")
        )
        return agent_objects(rules, daemon_sets, pods, csi_nodes, self._cluster.departures())

    def assumed(self, new: NodeRules) -> tuple[str, ...]:
        return ()
