"""What a node is born with: the taints and labels it carries when it first registers.

A taint added after registration leaves a window in which the scheduler may place pods the rules
forbid (kubernetes#63897 measured about 0.8 s). So every taint the reconciler would add to a
node anyway is derived here, never typed twice, and given to the node at birth: rendered into a
pool's bootstrap (`nodegate.bootstrap`), or added by the Node admission webhook to a node that
registers without it (`core/decisions/node_admission.py`).

Two keys to the same rule: a pool (bootstrap; its nodes' *eventual* labels, see
`NodePool.eventual_labels`, so a rule keyed on a label only the reconciler can set still taints
the node from birth) or a node's labels (the webhook: the Node being created). Order is sorted
and stable so renderings are byte-identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nodegate.core.rules.model import POOL_LABEL, NodePool, NodeRules, Taint
from nodegate.core.rules.rule_kinds import TaintRule


class TaintConflictError(ValueError):
    """Two wanted taints share key and effect with different values: a node can carry only one
    (kubelet refuses such a `--register-with-taints`). Validation refuses it in a rules file;
    rules built in code can still hold it."""


def sorted_unique(taints: Iterable[Taint], where: str) -> tuple[Taint, ...]:
    """Sorted, each taint once; two values for one (key, effect) raise TaintConflictError
    naming `where` (e.g. "pool 'ci'")."""
    unique = sorted(set(taints), key=lambda t: (t.key, t.effect, t.value))
    seen: dict[tuple[str, str], Taint] = {}
    for taint in unique:
        other = seen.setdefault(taint.identity, taint)
        if other is not taint:
            raise TaintConflictError(
                f"{where}: taints {other.flag()} and {taint.flag()} share key and "
                "effect; a node can carry only one of them (kubelet refuses duplicated taints)"
            )
    return tuple(unique)


def label_taints_for(rules: NodeRules, labels: Mapping[str, str]) -> tuple[Taint, ...]:
    """Taints nodes with these labels keep from registration on (rules order, repeats kept):
    every rule of a kind registered as permanent that `born_with` these labels (a label rule
    whose `match` they satisfy); a dry-run rule's never (it writes nothing, at birth neither)."""
    return tuple(
        r.taint
        for r in rules.taint_rules()
        if r.kind.at_registration == "permanent" and r.born_with(labels)
    )


def gates_for(rules: NodeRules, labels: Mapping[str, str]) -> tuple[TaintRule, ...]:
    """The rules a node with these labels is born gated by (every kind registered as
    `startup`, e.g. the startup gates whose `match` these labels satisfy), in rules order; a
    dry-run rule's never (it is not rendered into bootstrap, nor added by the webhook)."""
    return tuple(
        r
        for r in rules.taint_rules()
        if r.kind.at_registration == "startup" and r.born_with(labels)
    )


def _pool(pool: NodePool) -> str:
    return f"pool '{pool.name}'"


def permanent_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Label-derived taints: they stay as long as the pool's labels do."""
    return sorted_unique(label_taints_for(rules, pool.eventual_labels()), _pool(pool))


def startup_gate_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Startup gates: on the node at birth, lifted once it is ready, never added again."""
    return sorted_unique((g.taint for g in gates_for(rules, pool.eventual_labels())), _pool(pool))


def registration_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    """Every taint a node of this pool must carry from its first registration."""
    return sorted_unique(
        (*permanent_taints(rules, pool), *startup_gate_taints(rules, pool)), _pool(pool)
    )


def registration_labels(pool: NodePool) -> dict[str, str]:
    """Labels the kubelet sets on its own Node at registration, sorted by key.

    Only the pool's `labels` (validation guarantees a kubelet may set them) plus the pool label;
    `reconcilerLabels` are NodeRestriction-protected and applied by the reconciler instead.
    """
    labels = {**pool.labels, POOL_LABEL: pool.name}
    return dict(sorted(labels.items()))
