"""The slim view of a Node that the reconciler caches: what the planner and the write need.

A raw Node (managedFields, images, addresses, capacity...) costs tens of KiB of heap; this keeps
labels, taints (also as read, so a write copies other writers' taints byte for byte), the
conditions without heartbeat times, the annotations the rules read, providerID, bootID and the
resourceVersion. Everything else is dropped as the watch event is decoded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodegate.core.decisions.plan import annotations_read
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.text.k8s_names import NODEGATE_DOMAIN


@dataclass(frozen=True)
class CachedNode:
    state: NodeState
    raw_taints: tuple[dict[str, Any], ...]
    kept_under: int = field(default=0, compare=False)
    """Which annotation filter slimmed it (the controller's count of filters): an entry slimmed
    before the rules read more annotations lacks them until the relist replaces it."""


def annotation_filter(rules: NodeRules | None) -> Callable[[str], bool]:
    """Keep nodegate's own annotations and those the rules read (`NodeRules.reads`)."""
    read = annotations_read(rules)
    return lambda key: key in read or key.partition("/")[0].endswith(NODEGATE_DOMAIN)


def slim_node(
    raw: dict[str, Any], keep_annotation: Callable[[str], bool], kept_under: int = 0
) -> CachedNode:
    taints = (raw.get("spec") or {}).get("taints") or ()
    return CachedNode(
        state=NodeState.from_k8s(raw, keep_annotation),
        raw_taints=tuple(dict(t) for t in taints),
        kept_under=kept_under,
    )
