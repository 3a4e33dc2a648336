"""Karpenter: a pool run by Karpenter (AKS node auto-provisioning, or any Karpenter) as a NodePool.

Karpenter writes a NodePool's `taints` and `startupTaints` onto each node it launches when the
node registers (the NodeClaim's lists merged into the Node, `registration.go`), never adds them
again, and counts a node as initialized, and so as real capacity and a candidate for
consolidation, only once every startup taint is gone (`initialization.go`, matched by key and
effect). So a startup gate belongs in `startupTaints` and nowhere else: there Karpenter lets
pending pods wait for the gated node instead of launching another, and the reconciler lifts it.
Permanent, label-derived taints go in `taints`.
"""

from __future__ import annotations

from typing import Any, Final

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.registration import (
    permanent_taints,
    registration_labels,
    startup_gate_taints,
)
from nodegate.core.model import (
    POOL_LABEL,
    TRUSTED_POOL_LABEL,
    NodeClassRef,
    NodePool,
    NodeRules,
    Taint,
)

API_VERSION: Final = "karpenter.sh/v1"
AKS_NODE_CLASS: Final = NodeClassRef(
    group="karpenter.azure.com", kind="AKSNodeClass", name="default"
)
"""AKS node auto-provisioning's own node class, the default for aks pools."""

_RESTRICTED_LABELS: Final = ("kubernetes.io/hostname", "karpenter.sh/nodepool")
"""Template labels the NodePool CRD refuses outright (its CEL rules on template labels)."""


def _taint(taint: Taint) -> dict[str, str]:
    return {
        "key": taint.key,
        "effect": taint.effect,
        **({"value": taint.value} if taint.value else {}),
    }


def render_karpenter_nodepool(rules: NodeRules, pool: NodePool) -> dict[str, Any]:
    """The pool's Karpenter NodePool, as plain data (stable key order for golden files)."""
    autoscaler = pool.autoscaler
    if autoscaler is None or autoscaler.type != "karpenter":
        raise BootstrapError(
            f"pool '{pool.name}' is not run by Karpenter (autoscaler: {pool.autoscaler_type}); "
            "a Karpenter NodePool applies to pools with autoscaler type karpenter only"
        )
    if autoscaler.external_startup_taints is not None:
        raise BootstrapError(
            f"pool '{pool.name}' uses Karpenter NodePool '{pool.karpenter_node_pool}' that "
            "nodegate does not render (autoscaler.externalStartupTaints); edit that NodePool"
        )
    node_class = autoscaler.node_class_ref or (AKS_NODE_CLASS if pool.provider == "aks" else None)
    if node_class is None:
        raise BootstrapError(
            f"pool '{pool.name}' ({pool.provider}) needs autoscaler.nodeClassRef: only aks pools "
            "have a default node class"
        )
    labels = registration_labels(pool)
    refused = [key for key in labels if key in _RESTRICTED_LABELS]
    if refused:
        raise BootstrapError(
            f"pool '{pool.name}': Karpenter refuses NodePool template labels {', '.join(refused)}"
        )
    # Karpenter applies node-restriction.kubernetes.io labels to the Node itself (its label
    # domain exceptions), never through the kubelet: the pool the node was provisioned in,
    # as evidence for its reconcilerLabels that the node cannot forge (docs/reconciler.md).
    labels = {**labels, TRUSTED_POOL_LABEL: pool.name}
    spec: dict[str, Any] = {
        "nodeClassRef": node_class.model_dump(),
        "requirements": [
            {
                "key": e.key,
                "operator": e.operator,
                **({"values": list(e.values)} if e.values else {}),
            }
            for e in autoscaler.requirements or ()
        ],
    }
    taints = permanent_taints(rules, pool)
    gates = startup_gate_taints(rules, pool)
    if taints:
        spec["taints"] = [_taint(t) for t in taints]
    if gates:
        spec["startupTaints"] = [_taint(t) for t in gates]
    return {
        "apiVersion": API_VERSION,
        "kind": "NodePool",
        "metadata": {
            "name": pool.karpenter_node_pool,
            "labels": {"app.kubernetes.io/managed-by": "nodegate", POOL_LABEL: pool.name},
        },
        "spec": {"template": {"metadata": {"labels": labels}, "spec": spec}},
    }
