"""Karpenter: a pool run by Karpenter (AKS node auto-provisioning, or any Karpenter) as a NodePool.

Karpenter writes a NodePool's `taints` and `startupTaints` onto each node it launches when the
node registers (the NodeClaim's lists merged into the Node, `registration.go`), never adds them
again, and counts a node as initialized, and so as real capacity and a candidate for
consolidation, only once every startup taint is gone (`initialization.go`, matched by key and
effect). So a startup gate belongs in `startupTaints` and nowhere else: there Karpenter lets
pending pods wait for the gated node instead of launching another, and the reconciler lifts it.
Permanent, label-derived taints go in `taints`.

Gates stay in `startupTaints` whatever the Karpenter version: from v1.13.0 Karpenter also treats
an unlisted `readiness.k8s.io/` key as a startup taint (kubernetes-sigs/karpenter#3025), but
listing it is what makes Karpenter put it on the node at registration, and older ones (Oracle's
karpenter-provider-oci v1.0.0 is built on v1.6.2) know a gate only from that list.

Oracle (a nodeClassRef in `oci.oraclecloud.com`, karpenter-provider-oci): a NodePool that may
launch `spot` capacity also gets OKE's preemptible taint in `taints`, without which the provider
offers no preemptible shape (nodegate.core.rules.autoscalers); `nodepool_notes` says who must then
tolerate it.
"""

from __future__ import annotations

from typing import Any, Final

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.registration import (
    permanent_taints,
    registration_labels,
    startup_gate_taints,
)
from nodegate.core.rules.autoscalers import (
    CAPACITY_TYPE_LABEL,
    CAPACITY_TYPES,
    OCI_NODE_CLASS_GROUP,
    OKE_PREEMPTIBLE_TAINT_EFFECT,
    OKE_PREEMPTIBLE_TAINT_KEY,
    OKE_PREEMPTIBLE_TAINT_VALUE,
)
from nodegate.core.rules.model import (
    POOL_LABEL,
    TRUSTED_POOL_LABEL,
    Autoscaler,
    MatchExpression,
    NodePool,
    NodeRules,
    Taint,
)
from nodegate.core.rules.providers import default_node_classes, provider_profile

API_VERSION: Final = "karpenter.sh/v1"

_RESTRICTED_LABELS: Final = ("kubernetes.io/hostname", "karpenter.sh/nodepool")
"""Template labels the NodePool CRD refuses outright (its CEL rules on template labels)."""


def _taint(taint: Taint) -> dict[str, str]:
    return {
        "key": taint.key,
        "effect": taint.effect,
        **({"value": taint.value} if taint.value else {}),
    }


SPOT: Final = "spot"


def capacity_types(requirements: tuple[MatchExpression, ...]) -> frozenset[str]:
    """The capacity types the NodePool's requirements name as allowed; none when they name none
    (then they do not ask for spot, and karpenter-provider-oci offers no preemptible shape
    without the taint, so such a pool stays on-demand)."""
    named = [e for e in requirements if e.key == CAPACITY_TYPE_LABEL]
    allowed = frozenset(CAPACITY_TYPES) if named else frozenset()
    for e in named:
        if e.operator == "In":
            allowed &= frozenset(e.values)
        elif e.operator == "NotIn":
            allowed -= frozenset(e.values)
        elif e.operator == "DoesNotExist":
            allowed = frozenset()
    return allowed


def oracle_spot(autoscaler: Autoscaler) -> bool:
    """A karpenter-provider-oci NodePool that may launch OCI preemptible (spot) instances."""
    ref = autoscaler.node_class_ref
    allowed = capacity_types(autoscaler.requirements or ())
    return ref is not None and ref.group == OCI_NODE_CLASS_GROUP and SPOT in allowed


PREEMPTIBLE_TAINT: Final = {
    "key": OKE_PREEMPTIBLE_TAINT_KEY,
    "effect": OKE_PREEMPTIBLE_TAINT_EFFECT,
    "value": OKE_PREEMPTIBLE_TAINT_VALUE,
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
    default = provider_profile(pool.provider).karpenter_node_class  # AKS's AKSNodeClass
    ref = autoscaler.node_class_ref or default
    if ref is None:
        raise BootstrapError(
            f"pool '{pool.name}' ({pool.provider}) needs autoscaler.nodeClassRef: only "
            f"{', '.join(default_node_classes())} pools have a default node class"
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
        "nodeClassRef": {"group": ref.group, "kind": ref.kind, "name": ref.name},
        "requirements": [
            {
                "key": e.key,
                "operator": e.operator,
                **({"values": list(e.values)} if e.values else {}),
            }
            for e in autoscaler.requirements or ()
        ],
    }
    taints = [_taint(t) for t in permanent_taints(rules, pool)]
    if oracle_spot(autoscaler):
        taints.append(PREEMPTIBLE_TAINT)
    gates = startup_gate_taints(rules, pool)
    if taints:
        spec["taints"] = taints
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


def nodepool_notes(rules: NodeRules, pool: NodePool) -> tuple[str, ...]:
    """What the NodePool asks of the pods bound for it (printed above `nodegate render`'s YAML,
    logged by the Pulumi component): for an Oracle spot NodePool, the preemptible taint's
    tolerations."""
    autoscaler = pool.autoscaler
    if autoscaler is None or not oracle_spot(autoscaler):
        return ()
    taint = f"{OKE_PREEMPTIBLE_TAINT_KEY}:{OKE_PREEMPTIBLE_TAINT_EFFECT}"
    toleration = (
        f"{{key: {OKE_PREEMPTIBLE_TAINT_KEY}, operator: Exists, "
        f"effect: {OKE_PREEMPTIBLE_TAINT_EFFECT}}}"
    )
    labels = pool.eventual_labels()
    pods = [
        f"{g.ready_when.pods.namespace}/{g.ready_when.pods.label_selector} (gate '{g.name}')"
        for g in rules.startup_gates
        if g.ready_when.pods is not None and g.match.matches(labels)
    ]
    notes = [
        f"Pool '{pool.name}' may launch spot capacity on karpenter-provider-oci, which offers "
        f"OCI preemptible shapes only to a NodePool whose taints hold {taint}: it is declared "
        "in spec.template.spec.taints, and OKE puts it on every preemptible node.",
        f"Pods bound for these nodes need the toleration {toleration}, and so do the "
        "DaemonSets that must run there"
        + (f", the init pods that lift its gates ({', '.join(pods)}) above all" if pods else "")
        + "; the reconciler needs it in its deploy settings' tolerations only if it must run "
        "on these nodes.",
    ]
    if capacity_types(autoscaler.requirements or ()) - {SPOT}:
        notes.append(
            "The NodePool may launch other capacity types too, and Karpenter puts its taints "
            f"on every node it launches: those nodes carry {taint} as well; give spot a "
            "NodePool (pool) of its own if they should not."
        )
    return tuple(notes)
