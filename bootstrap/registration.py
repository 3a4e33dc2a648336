"""What a pool's nodes are born with: the taints and labels they carry when they first register.

A taint added after registration leaves a window in which the scheduler may place pods the rules
forbid (kubernetes#63897 measured about 0.8 s). So every taint the reconciler would add to a
pool's nodes anyway is derived here, never typed twice, and rendered into the pool's bootstrap.

Matching uses the labels a node *ends up* with (`NodePool.eventual_labels`: pool labels,
reconcilerLabels and nodegate.dev/pool), so a rule keyed on a label only the reconciler can set
still taints the node from birth. Order is sorted and stable so renderings are byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodegate.bootstrap.errors import BootstrapError
from nodegate.core.model import POOL_LABEL, NodePool, NodeRules, Taint


def _sorted_unique(pool: NodePool, taints: Iterable[Taint]) -> tuple[Taint, ...]:
    """Sorted, each taint once; two values for one (key, effect) is refused as kubelet would."""
    unique = sorted(set(taints), key=lambda t: (t.key, t.effect, t.value))
    seen: dict[tuple[str, str], Taint] = {}
    for taint in unique:
        other = seen.setdefault(taint.identity, taint)
        if other is not taint:
            raise BootstrapError(
                f"pool '{pool.name}': taints {other.flag()} and {taint.flag()} share key and "
                "effect; a node can carry only one of them (kubelet refuses duplicated taints)"
            )
    return tuple(unique)


def permanent_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Label-derived taints: they stay as long as the pool's labels do."""
    labels = pool.eventual_labels()
    return _sorted_unique(pool, (r.taint for r in rules.label_taints if r.match.matches(labels)))


def startup_gate_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Startup gates: on the node at birth, lifted once it is ready, never added again."""
    labels = pool.eventual_labels()
    return _sorted_unique(pool, (g.taint for g in rules.startup_gates if g.match.matches(labels)))


def registration_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Every taint a node of this pool must carry from its first registration."""
    return _sorted_unique(pool, (*permanent_taints(rules, pool), *startup_gate_taints(rules, pool)))


def registration_labels(pool: NodePool) -> dict[str, str]:
    """Labels the kubelet sets on its own Node at registration, sorted by key.

    Only the pool's `labels` (validation guarantees a kubelet may set them) plus the pool label;
    `reconcilerLabels` are NodeRestriction-protected and applied by the reconciler instead.
    """
    labels = {**pool.labels, POOL_LABEL: pool.name}
    return dict(sorted(labels.items()))
