"""Which CSI drivers a node's kubelet has registered, as its CSINode says. Pure.

The kubelet keeps one CSINode per Node, named after it and owned by it (an ownerReference to
the Node's uid), and lists each node plugin once it has registered, with `allocatable.count`
once the driver reported how many volumes the node can attach. A CSINode owned by another Node
object (an earlier node of the same name, not yet garbage-collected) says nothing of this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nodegate.core.views.raw import RawObject


@dataclass(frozen=True)
class CsiNodeView:
    node: str
    owner_uids: frozenset[str]
    """The uids of the Nodes that own it (the kubelet sets one)."""
    drivers: Mapping[str, bool] = field(default_factory=dict)
    """Driver name -> whether it reports allocatable.count."""


def slim_csinode(raw: RawObject) -> CsiNodeView:
    meta = raw.get("metadata") or {}
    owners = frozenset(
        str(ref.get("uid"))
        for ref in meta.get("ownerReferences") or ()
        if ref.get("kind") == "Node" and ref.get("uid")
    )
    drivers = {
        str(d.get("name")): (d.get("allocatable") or {}).get("count") is not None
        for d in (raw.get("spec") or {}).get("drivers") or ()
        if d.get("name")
    }
    return CsiNodeView(str(meta.get("name") or ""), owners, drivers)


def registered_drivers(view: CsiNodeView | None, node_uid: str) -> Mapping[str, bool]:
    """The drivers registered on the Node of this uid: none unless its CSINode is its own."""
    if view is None or not node_uid or node_uid not in view.owner_uids:
        return {}
    return view.drivers
