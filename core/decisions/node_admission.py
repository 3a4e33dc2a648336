"""What the Node admission webhook adds to a node being created, as a JSON Patch (RFC 6902).

Pure, like the planner: the Node object of the AdmissionReview, the rules and the labels of the
node's persisted-label record in; patch operations out. Nodes that no cloud-init of ours
bootstrapped (AKS pools without `nodeInitializationTaints`, autoscaler-made and self-managed
nodes) are then still born gated, and born with the labels they had before re-creation.

The patch only ever adds:

* the taint of every startup gate whose `match` the node's labels satisfy, unless the node
  already carries a taint with the gate's key and effect (whatever its value: the node's own
  wins). The labels matched are the node's own plus the persisted labels being restored, as a
  pool's bootstrap matches its nodes' eventual labels;
* every persisted label (as `persistentLabels` selects them) the node does not already carry,
  if its key and value are valid: a hand-edited record must not make the API server refuse the
  whole node;
* the registration seal (`nodegate.dev/registered-pool=<pool>:PreferNoSchedule`): the pool the
  node registers in (`nodegate.dev/pool`), frozen where its kubelet can no longer change it (a
  taint), until the reconciler records it in `node-restriction.kubernetes.io/nodegate-pool`
  (core/decisions/node_trust.py says why not that label at once).

* the ownership claim (`nodegate.dev/owned-taints`) of the gates it adds, joined to any claim
  already there, so a gate the rules drop before the reconciler's first write is still lifted.

Nothing is ever removed: every operation is an `add` of a member that is absent or null, an
append to the taint list, or the claim annotation extended. A part of the object that is not the
shape the API defines (a taint list that is not a list...) is left alone, and says so in `skipped`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nodegate.core.decisions.node_trust import seal_for_registration
from nodegate.core.decisions.persisted_labels import persisted_view
from nodegate.core.decisions.plan import parse_ownership
from nodegate.core.rules.model import NodeRules, Taint
from nodegate.core.rules.node import NodeTaint, format_time
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.rules.registration import gates_for
from nodegate.core.text.k8s_names import label_value_problem, qualified_name_problem

JsonPatchOp = dict[str, Any]
"""One RFC 6902 operation as plain data: {"op": "add", "path": "/spec/taints/-", "value": …}."""


@dataclass(frozen=True)
class AdmissionPatch:
    """The webhook's answer for one node, and why (for its log line)."""

    ops: tuple[JsonPatchOp, ...] = ()
    gates: tuple[str, ...] = ()
    """Names of the gates whose taints are added."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Persisted labels added."""
    sealed: str | None = None
    """The pool sealed at registration (None: no seal added)."""
    skipped: tuple[str, ...] = ()
    """What was wanted but not added, and why."""


def pointer_token(key: str) -> str:
    """`key` as one JSON Pointer reference token (RFC 6901: '~' is '~0', '/' is '~1')."""
    return key.replace("~", "~0").replace("/", "~1")


def string_labels(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The labels of an object's metadata; entries that are not string to string are ignored
    (the API server refuses such an object anyway)."""
    raw = metadata.get("labels")
    if not isinstance(raw, Mapping):
        return {}
    return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}


def restorable_labels(
    node_labels: Mapping[str, str], stored: Mapping[str, str], rules: NodeRules
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The stored labels to add to a new node, and why any other stored label is not added.

    Only labels `persistentLabels` selects (never platform-owned ones), only keys the node does
    not carry (its own value wins, as in the reconciler's restore), only valid keys and values.
    """
    config = rules.persistent_labels
    if config is None:
        return {}, ()
    restore: dict[str, str] = {}
    skipped: list[str] = []
    for key, value in persisted_view(stored, config).items():
        if key in node_labels:
            continue
        problem = qualified_name_problem(key) or label_value_problem(value)
        if problem:
            skipped.append(f"stored label {key!r} not restored: {problem}")
            continue
        restore[key] = value
    return restore, tuple(skipped)


def _taint_identities(taints: list[Any]) -> set[tuple[str, str]]:
    return {(str(t.get("key")), str(t.get("effect"))) for t in taints if isinstance(t, Mapping)}


def _node_taints(taints: object) -> list[NodeTaint]:
    """The well-formed taints of a raw taint list (others are the API server's to refuse)."""
    if not isinstance(taints, list):
        return []
    return [
        NodeTaint.from_k8s(t)
        for t in taints
        if isinstance(t, Mapping)
        and isinstance(t.get("key"), str)
        and isinstance(t.get("effect"), str)
    ]


def _raw_taint(taint: Taint, now: datetime) -> dict[str, Any]:
    """The taint as the API takes it; NoExecute carries timeAdded, as the reconciler's do."""
    time_added = format_time(now) if taint.effect == "NoExecute" else None
    return dict(NodeTaint(taint.key, taint.effect, taint.value, time_added).to_k8s())


def _add_ops(
    node: Mapping[str, Any], path: str, shape: type, whole: Any, each: list[JsonPatchOp]
) -> list[JsonPatchOp] | None:
    """Operations adding to the member two levels down `path` (`/metadata/labels`): none when
    `each` is empty; `whole` as that member where it or its parent is absent or null, else
    `each` into it; None where either is not the shape the API defines (the member a `shape`):
    it cannot take them safely."""
    if not each:
        return []
    _, parent_name, member = path.split("/")
    parent = node.get(parent_name)
    if parent is None:
        return [{"op": "add", "path": f"/{parent_name}", "value": {member: whole}}]
    if not isinstance(parent, Mapping):
        return None
    existing = parent.get(member)
    if existing is None:
        return [{"op": "add", "path": path, "value": whole}]
    return each if isinstance(existing, shape) else None


def _claim_ops(node: Mapping[str, Any], gates: set[tuple[str, str]]) -> list[JsonPatchOp]:
    """Claim the gates added in the node's ownership annotation, as the reconciler's writes do:
    should the rules drop a gate before the reconciler first writes the node, the claim and the
    taint history still let it lift the gate (a claim alone never does: `removable_taints`)."""
    metadata = node.get("metadata")
    if not gates or not isinstance(metadata, Mapping):
        return []
    existing = metadata.get("annotations")
    held = existing.get(OWNED_TAINTS_ANNOTATION) if isinstance(existing, Mapping) else None
    claims = gates | (parse_ownership(held) if isinstance(held, str) else frozenset())
    value = ",".join(f"{key}:{effect}" for key, effect in sorted(claims))
    path = f"/metadata/annotations/{pointer_token(OWNED_TAINTS_ANNOTATION)}"
    each = [{"op": "add", "path": path, "value": value}]
    whole = {OWNED_TAINTS_ANNOTATION: value}
    return _add_ops(node, "/metadata/annotations", Mapping, whole, each) or []


def admission_patch(
    node: Mapping[str, Any], rules: NodeRules, stored_labels: Mapping[str, str], now: datetime
) -> AdmissionPatch:
    """The JSON Patch that gives a Node being created its gates and persisted labels.

    `node` is the AdmissionReview's `request.object`; `stored_labels` the labels of its
    persisted-label record (empty when it has none).
    """
    metadata = node.get("metadata")
    own = string_labels(metadata) if isinstance(metadata, Mapping) else {}
    restore, skipped = restorable_labels(own, stored_labels, rules)
    label_adds = [
        {"op": "add", "path": f"/metadata/labels/{pointer_token(k)}", "value": v}
        for k, v in restore.items()
    ]
    label_ops = _add_ops(node, "/metadata/labels", Mapping, dict(restore), label_adds)
    if label_ops is None:
        skipped += ("metadata.labels is not a map: no label added",)
        restore, label_ops = {}, []

    spec = node.get("spec")
    current = spec.get("taints") if isinstance(spec, Mapping) else None
    carried = _taint_identities(current) if isinstance(current, list) else set()
    gates: list[str] = []
    taints: list[dict[str, Any]] = []
    seal = seal_for_registration(own, _node_taints(current), rules)
    if seal is not None:
        taints.append(dict(seal.to_k8s()))
    for gate in gates_for(rules, {**restore, **own}):
        if gate.taint.identity in carried:
            continue
        carried.add(gate.taint.identity)
        gates.append(gate.name)
        taints.append(_raw_taint(gate.taint, now))
    taint_adds = [{"op": "add", "path": "/spec/taints/-", "value": t} for t in taints]
    taint_ops = _add_ops(node, "/spec/taints", list, taints, taint_adds)
    if taint_ops is None:
        skipped += (f"spec or spec.taints is not the API's shape: gates {gates} not added",)
        gates, taint_ops, seal = [], [], None
    claimed = {r.taint.identity for r in rules.taint_rules() if r.name in gates}
    claim_ops = _claim_ops(node, claimed)
    return AdmissionPatch(
        tuple(label_ops + taint_ops + claim_ops),
        tuple(gates),
        labels=restore,
        skipped=skipped,
        sealed=seal.value if seal is not None else None,
    )
