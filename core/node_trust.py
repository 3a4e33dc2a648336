"""What a node may write about itself, and what nodegate lets that steer.

A kubelet's credentials live on its node, so every field the kubelet may write is an input a
compromised node controls. Kubernetes' NodeRestriction admission plugin draws that line (labels
outside kubernetes.io/k8s.io, annotations, status, and at registration its taints and
providerID); nodegate must never become a way across it. Pure: the planner and the webhook ask
here which pool a node is trusted to be in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodegate.core.model import POOL_LABEL, TRUSTED_POOL_LABEL, NodePool, NodeRules


@dataclass(frozen=True)
class PoolMembership:
    """The pool whose `reconcilerLabels` apply to a node, and why another claim does not."""

    pool: NodePool | None
    untrusted_claim: str | None = None
    """A pool named only by a label the node may write itself (a warning, never acted on)."""


def pool_membership(labels: Mapping[str, str], rules: NodeRules) -> PoolMembership:
    """The node's pool, from the label its kubelet may not set (`TRUSTED_POOL_LABEL`) only.

    `POOL_LABEL` is a claim: a node setting it to another pool must not gain that pool's
    `reconcilerLabels` (node-role.kubernetes.io/*, node-restriction.kubernetes.io/* ...), the
    very labels NodeRestriction keeps kubelets from setting.
    """
    registered = labels.get(TRUSTED_POOL_LABEL)
    if registered is not None:
        return PoolMembership(rules.pool(registered))
    claimed = labels.get(POOL_LABEL)
    pool = rules.pool(claimed) if claimed is not None else None
    if pool is not None and pool.reconciler_labels:
        return PoolMembership(None, claimed)
    return PoolMembership(None)


def registration_pool_label(labels: Mapping[str, str]) -> dict[str, str]:
    """The trusted pool label to add to a Node being created: its claimed pool, frozen.

    At registration the claim is the pool's bootstrap speaking (kubelet `--node-labels`); after
    it, the node may change `POOL_LABEL` but never this copy. Nothing when the node already
    carries one (set by Karpenter or an admin) or claims no pool.
    """
    claimed = labels.get(POOL_LABEL)
    if claimed is None or TRUSTED_POOL_LABEL in labels:
        return {}
    return {TRUSTED_POOL_LABEL: claimed}
