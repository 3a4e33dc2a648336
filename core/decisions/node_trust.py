"""What a node may write about itself, and what nodegate lets that steer.

A kubelet's credentials live on its node, so every field the kubelet may write is an input a
compromised node controls. Kubernetes' NodeRestriction admission plugin draws that line (labels
outside kubernetes.io/k8s.io, annotations, status, and at registration its taints and
providerID); nodegate must never become a way across it. Pure: the planner and the webhook ask
here which pool a node is trusted to be in.

The pool a node *registered* in is as trustworthy as its providerID: both are what its bootstrap
said when the Node was created. The claim label (`nodegate.dev/pool`) can be changed later, so
the webhook seals it at creation into a taint (a kubelet may not change its taints once
registered; NodeRestriction re-checks labels on every admission pass, so a label could not be
added for it), and the reconciler turns the seal into `node-restriction.kubernetes.io/
nodegate-pool`, which no kubelet may set or change, and removes the seal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL, NodePool, NodeRules
from nodegate.core.rules.node import NodeTaint
from nodegate.core.rules.node_marks import REGISTRATION_SEAL_EFFECT, REGISTRATION_SEAL_KEY
from nodegate.core.rules.providers import provider_profile


@dataclass(frozen=True)
class PoolMembership:
    """The pool whose `reconcilerLabels` apply to a node, and why another claim does not."""

    pool: NodePool | None
    untrusted_claim: str | None = None
    """A pool named only by a label the node may write itself (a warning, never acted on)."""


def registration_seal(taints: Iterable[NodeTaint]) -> str | None:
    """The pool sealed at the node's creation, if its seal is still on it."""
    sealed = (REGISTRATION_SEAL_KEY, REGISTRATION_SEAL_EFFECT)
    return next((taint.value for taint in taints if taint.identity == sealed), None)


def registered_pool(labels: Mapping[str, str], taints: Iterable[NodeTaint]) -> str | None:
    """The pool the node registered in: the trusted label, else the seal still on it."""
    return labels.get(TRUSTED_POOL_LABEL) or registration_seal(taints)


def pool_membership(
    labels: Mapping[str, str], taints: Iterable[NodeTaint], rules: NodeRules
) -> PoolMembership:
    """The node's pool, from what its kubelet could not change since registration only.

    `POOL_LABEL` is a claim: a node setting it to another pool must not gain that pool's
    `reconcilerLabels` (node-role.kubernetes.io/*, node-restriction.kubernetes.io/* ...), the
    very labels NodeRestriction keeps kubelets from setting.
    """
    registered = registered_pool(labels, taints)
    if registered is not None:
        return PoolMembership(rules.pool(registered))
    claimed = labels.get(POOL_LABEL)
    pool = rules.pool(claimed) if claimed is not None else None
    if pool is not None and pool.reconciler_labels:
        return PoolMembership(None, claimed)
    return PoolMembership(None)


def seal_taint(pool: str) -> NodeTaint:
    return NodeTaint(REGISTRATION_SEAL_KEY, REGISTRATION_SEAL_EFFECT, pool)


def seal_for_registration(
    labels: Mapping[str, str], taints: Iterable[NodeTaint], rules: NodeRules
) -> NodeTaint | None:
    """The seal to add to a Node being created: its claimed pool, frozen. None when it claims no
    pool of the rules, already names its pool in the trusted label (Karpenter, an admin), or is
    sealed."""
    claimed = labels.get(POOL_LABEL)
    if not claimed or rules.pool(claimed) is None or TRUSTED_POOL_LABEL in labels:
        return None
    if registration_seal(taints) is not None:
        return None
    return seal_taint(claimed)


def pool_evidence_advice(rules: NodeRules) -> list[str]:
    """What `nodegate validate` says each pool with `reconcilerLabels` needs, by provider: the
    evidence of membership a node cannot forge (docs/reconciler.md, "Security")."""
    advice = []
    for pool in rules.node_pools:
        if not pool.reconciler_labels:
            continue
        head = f"pool '{pool.name}' ({pool.provider}): its reconcilerLabels go only to nodes "
        head += f"registered in it ({TRUSTED_POOL_LABEL}={pool.name}); "
        if pool.autoscaler is not None and pool.autoscaler.type == "karpenter":
            advice.append(
                head + "the Karpenter NodePool nodegate renders carries that label (Karpenter "
                "applies it, never the kubelet)"
            )
            continue
        kubelet_label = provider_profile(pool.provider).kubelet_pool_label
        cloud = (
            f"; {kubelet_label} is written by the kubelet and is no evidence either"
            if kubelet_label is not None
            else ""
        )
        advice.append(
            head + f"{POOL_LABEL}, which the kubelet sets, is no evidence. Deploy the Node "
            "admission webhook (it seals the pool at registration for the reconciler to "
            f"record), or label the nodes {TRUSTED_POOL_LABEL}={pool.name} yourself{cloud}"
        )
    return advice
