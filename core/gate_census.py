"""How many nodes wait behind each startup gate, and for how long: what an autoscaler sees.

cluster-autoscaler counts a node that still carries a startup taint as not ready once
`--max-node-startup-time` (15 minutes) has passed, and stops scaling the whole cluster when
more than `--ok-total-unready-count` (3) unready nodes are also more than
`--max-total-unready-percentage` (45 %) of all nodes (docs/gates.md). The census gives the
figures to alert on before either threshold is reached: per gate and pool, the gated nodes and
the oldest one's age, and the share of all nodes that are gated. Pure: the reconciler feeds it
its node cache when Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from nodegate.core.model import POOL_LABEL, NodeRules
from nodegate.core.node import NodeState
from nodegate.core.plan import carried_gate_taints


@dataclass(frozen=True)
class GatedGroup:
    """The nodes one gate holds in one pool (`pool` is the node's nodegate.dev/pool label)."""

    gate: str
    pool: str
    nodes: int
    oldest_seconds: float
    """Age of the oldest gated node, from its creation (0 if unknown)."""


@dataclass(frozen=True)
class GateCensus:
    groups: tuple[GatedGroup, ...]
    gated_nodes: int
    """Nodes carrying at least one gate (a node held by two gates counts once)."""
    all_nodes: int

    @property
    def gated_share(self) -> float:
        return self.gated_nodes / self.all_nodes if self.all_nodes else 0.0


def gate_census(nodes: Iterable[NodeState], rules: NodeRules, now: datetime) -> GateCensus:
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[tuple[str, str], float] = {}
    gated = total = 0
    for node in nodes:
        total += 1
        held = False
        for gate in rules.startup_gates:
            if not carried_gate_taints(node, gate):
                continue
            held = True
            group = (gate.name, node.labels.get(POOL_LABEL, ""))
            age = (now - node.created).total_seconds() if node.created is not None else 0.0
            counts[group] = counts.get(group, 0) + 1
            oldest[group] = max(oldest.get(group, 0.0), age, 0.0)
        gated += held
    groups = tuple(
        GatedGroup(gate, pool, counts[(gate, pool)], oldest[(gate, pool)])
        for gate, pool in sorted(counts)
    )
    return GateCensus(groups, gated, total)
