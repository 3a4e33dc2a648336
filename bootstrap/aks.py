"""AKS: the taint and label lists of a pool's AgentPool, with startup gates kept liftable.

AKS reconciles an agent pool's `nodeTaints` onto its nodes and they cannot be changed through
the Kubernetes API, so only permanent (label-derived) taints may go there: a startup gate in
`nodeTaints` could never be lifted. Gates go to `nodeInitializationTaints` where the AKS API
version in use has it (AKS sets them on new nodes and leaves them alone), otherwise to
nodegate's Node admission webhook, which adds them when a node registers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.registration import (
    permanent_taints,
    registration_labels,
    startup_gate_taints,
)
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.core.rules.providers import AKS

StartupGatesVia = Literal["nodeInitializationTaints", "webhook", "none"]


@dataclass(frozen=True)
class AksPoolSpec:
    """What nodegate sets on one AKS agent pool, and how its startup gates are applied."""

    pool: str
    node_taints: tuple[str, ...]
    """AgentPool `nodeTaints`: permanent label taints only, "key=value:Effect" (or key:Effect)."""
    node_labels: dict[str, str]
    """AgentPool `nodeLabels`: the pool's labels plus nodegate.dev/pool."""
    node_initialization_taints: tuple[str, ...]
    """AgentPool `nodeInitializationTaints`: the startup gates, when that field is usable."""
    startup_gate_taints: tuple[str, ...]
    """Every startup gate of the pool, however it is applied."""
    startup_gates_via: StartupGatesVia
    note: str
    """How the gates reach the nodes, in words for the person running `nodegate render`."""

    def to_json(self) -> str:
        """The AgentPool properties nodegate owns, plus how gates are applied (stable order)."""
        properties: dict[str, object] = {
            "nodeLabels": self.node_labels,
            "nodeTaints": list(self.node_taints),
        }
        if self.startup_gates_via == "nodeInitializationTaints":
            properties["nodeInitializationTaints"] = list(self.node_initialization_taints)
        document = {
            "pool": self.pool,
            "properties": properties,
            "startupGates": {
                "via": self.startup_gates_via,
                "taints": list(self.startup_gate_taints),
                "note": self.note,
            },
        }
        return json.dumps(document, indent=2, ensure_ascii=False)


def render_aks_pool(
    rules: NodeRules, pool: NodePool, *, initialization_taints_supported: bool = False
) -> AksPoolSpec:
    """The pool's AKS taint/label lists. `initialization_taints_supported`: whether the
    AgentPool API version in use has `nodeInitializationTaints` (preview API versions do; the
    stable 2025-09-01 used by pulumi-azure-native 3.x does not)."""
    if pool.provider != AKS.name:
        raise BootstrapError(
            f"pool '{pool.name}' is an {pool.provider} pool; AKS agent pool lists apply to "
            f"{AKS.name} pools only"
        )
    if pool.autoscaler_type == "karpenter":
        raise BootstrapError(
            f"pool '{pool.name}' is run by Karpenter (AKS node auto-provisioning): it has no "
            "agent pool; render its NodePool (--format karpenter-nodepool) instead"
        )
    permanent = tuple(t.flag() for t in permanent_taints(rules, pool))
    gates = tuple(t.flag() for t in startup_gate_taints(rules, pool))
    via: StartupGatesVia = "none"
    if gates:
        via = "nodeInitializationTaints" if initialization_taints_supported else "webhook"
    return AksPoolSpec(
        pool=pool.name,
        node_taints=permanent,
        node_labels=registration_labels(pool),
        node_initialization_taints=gates if via == "nodeInitializationTaints" else (),
        startup_gate_taints=gates,
        startup_gates_via=via,
        note=_note(via, gates),
    )


_LOCKED = (
    "nodeTaints hold only permanent label taints: AKS reconciles them onto every node and they "
    "change only through the AKS API."
)


def _note(via: StartupGatesVia, gates: tuple[str, ...]) -> str:
    listed = ", ".join(gates)
    if via == "nodeInitializationTaints":
        return (
            f"Startup gates ({listed}) are set as nodeInitializationTaints: AKS puts them on each "
            "new node and does not reconcile them, so the reconciler lifts them once the node is "
            f"ready. {_LOCKED}"
        )
    if via == "webhook":
        return (
            f"Startup gates ({listed}) are added by nodegate's Node admission webhook when each "
            "node registers: this AKS API version has no nodeInitializationTaints, and a gate in "
            "nodeTaints could never be lifted. Deploy the webhook before the pool scales up. "
            f"{_LOCKED}"
        )
    return f"No startup gate matches this pool. {_LOCKED}"
