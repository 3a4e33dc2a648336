"""How many nodes wait behind each startup gate, and for how long: what an autoscaler sees.

cluster-autoscaler reads a node that still carries a startup taint as not ready. For the first
`--max-node-startup-time` (15 minutes from the node's creation) such a node is "not started";
after that it is "unready", and when more than `--ok-total-unready-count` (3) unready nodes are
also more than `--max-total-unready-percentage` (45 %) of all nodes, it stops scaling the whole
cluster. Not-started nodes do not count towards that halt, so the figure to alert on is the
nodes gated for almost 15 minutes, not all gated nodes (a large scale-up with a slow init is
normal). A gated node also keeps its scale-up "upcoming", which times out after
`--max-node-provision-time` (15 minutes) and backs the node group off (docs/gates.md).

The census gives: per gate and pool, the gated nodes and the oldest one's age; over the whole
cluster, the gated nodes by age (cumulative buckets around the 15-minute window, each node
counted once) and all nodes, for the share. Pure: the reconciler feeds it its node cache when
Prometheus scrapes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from nodegate.core.decisions.gate_plan import carried_gate_taints
from nodegate.core.rules.autoscalers import CA_OK_TOTAL_UNREADY_COUNT, CA_STARTUP_WINDOW
from nodegate.core.rules.model import POOL_LABEL, NodeRules
from nodegate.core.rules.node import NodeState

GATE_AGE_WARNING: Final = CA_STARTUP_WINDOW - timedelta(minutes=5)
"""A node gated this long is late: 5 minutes before cluster-autoscaler counts it as unready."""
GATED_SHARE_WARNING: Final = 0.30
"""Late gated nodes as a share of all nodes worth an alert: margin below cluster-autoscaler's
45 % (other unready nodes count there too, and more gated nodes turn late meanwhile)."""
GATED_COUNT_WARNING: Final = CA_OK_TOTAL_UNREADY_COUNT
"""Below this many late nodes cluster-autoscaler never halts, whatever the share."""
AGE_BUCKETS: Final = (
    60.0,
    300.0,
    GATE_AGE_WARNING.total_seconds(),
    CA_STARTUP_WINDOW.total_seconds(),
    1800.0,
    3600.0,
)
"""Upper bounds (seconds) of the gated-age buckets; the +Inf bucket is `gated_nodes`."""


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
    gated_by_age: tuple[int, ...] = (0,) * len(AGE_BUCKETS)
    """Gated nodes (each once) at most AGE_BUCKETS[i] seconds old, cumulative like a
    Prometheus histogram's buckets."""
    gated_age_sum: float = 0.0
    """The gated nodes' ages added up (the histogram's sum)."""

    @property
    def gated_share(self) -> float:
        return self.gated_nodes / self.all_nodes if self.all_nodes else 0.0


def gate_census(nodes: Iterable[NodeState], rules: NodeRules, now: datetime) -> GateCensus:
    by_group: dict[tuple[str, str], list[float]] = {}
    ages: list[float] = []
    total = 0
    for node in nodes:
        total += 1
        age = max((now - node.created).total_seconds(), 0.0) if node.created is not None else 0.0
        held = [g for g in rules.startup_gates if not g.dry_run and carried_gate_taints(node, g)]
        for gate in held:
            by_group.setdefault((gate.name, node.labels.get(POOL_LABEL, "")), []).append(age)
        if held:
            ages.append(age)
    groups = tuple(
        GatedGroup(gate, pool, len(group), max(group))
        for (gate, pool), group in sorted(by_group.items())
    )
    return GateCensus(groups, len(ages), total, _cumulative(ages), sum(ages))


def _cumulative(ages: list[float]) -> tuple[int, ...]:
    """How many ages are <= each bound (a bucket's `le` is inclusive, as in Prometheus)."""
    ordered = sorted(ages)
    return tuple(bisect_right(ordered, bound) for bound in AGE_BUCKETS)
