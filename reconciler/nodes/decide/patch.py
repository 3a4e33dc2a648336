"""Turn a NodePlan into one preconditioned write. Pure.

A JSON merge patch replaces `spec.taints` whole (the field is an atomic list), so the patch
carries the resourceVersion that was read: the API server answers 409 if anyone wrote in
between, and the caller re-reads and re-plans. Surviving taints are copied from the raw object
as read, so nothing of someone else's taint (timeAdded, fields we don't model) is altered.
"""

from __future__ import annotations

from nodegate.core.decisions.plan import NodePlan
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.text.k8s_names import in_nodegate_domain
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.nodes.node_view import CachedNode


def merge_patch(node: CachedNode, node_plan: NodePlan) -> RawObject:
    """The body of the single write that carries out `node_plan` on the node as read."""
    metadata: RawObject = {"resourceVersion": node.state.resource_version}
    if node_plan.set_labels:
        metadata["labels"] = {c.key: c.value for c in node_plan.set_labels}
    annotations: dict[str, str | None] = dict(node_plan.set_annotations)
    if node_plan.owned_annotation is not None:
        annotations[OWNED_TAINTS_ANNOTATION] = node_plan.owned_annotation or None
    if annotations:
        metadata["annotations"] = annotations
    body: RawObject = {"metadata": metadata}
    if node_plan.add_taints or node_plan.remove_taints:
        removed = {(c.taint.key, c.taint.effect) for c in node_plan.remove_taints}
        kept = [dict(t) for t in node.raw_taints if (t.get("key"), t.get("effect")) not in removed]
        body["spec"] = {"taints": kept + [dict(c.taint.to_k8s()) for c in node_plan.add_taints]}
    return body


def describe(node_plan: NodePlan) -> str:
    """One line for the Event and the log: what was added and removed, and by which rule."""
    parts = [f"added taint {c.taint} ({_by(c.rules, c.why)})" for c in node_plan.add_taints]
    parts += [f"removed taint {c.taint} ({_by(c.rules, c.why)})" for c in node_plan.remove_taints]
    parts += [f"set label {c.key}={c.value} ({c.why})" for c in node_plan.set_labels]
    # Annotations written for other tools' readers (a first-ready time, a completion record);
    # nodegate's own records are not news.
    parts += [
        f"set annotation {key}={value}"
        for key, value in node_plan.set_annotations
        if value is not None and not in_nodegate_domain(key)
    ]
    if not parts and node_plan.owned_annotation is not None:
        parts.append(f"recorded owned taints '{node_plan.owned_annotation}'")
    return "; ".join(parts)


def _by(rules: tuple[str, ...], why: str) -> str:
    return f"rule {', '.join(rules)}: {why}" if rules else why
