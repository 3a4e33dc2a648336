"""The baseline: the small kopf operator a platform team would write instead of nodegate.

Written the way the label-to-taint operator example is: kopf handlers on Nodes, default
settings, the wanted taints written by patching `spec.taints` (through kopf's `patch`, which
kopf sends as a merge patch together with its own bookkeeping). It implements the same rules as
`scenario.RULES_YAML`: a label taint per label rule, a condition taint for the condition. kopf's
`on.update` ignores `status` unless a handler names a status field, so the condition handler
names `status.conditions`, as kopf's documentation shows for status fields.

Run by the benchmark as `kopf run --standalone --all-namespaces tests/bench/kopf_operator.py`
(standalone: there is one replica, and no KopfPeering resource is installed).
"""

from __future__ import annotations

from typing import Any

import kopf

from tests.bench.scenario import (
    CLASS_KEY,
    FLIP_KEY,
    PROBLEM_KEY,
    PROBLEM_TYPE,
    RACE_KEY,
)

LABEL_TAINTS = {  # label key -> (label value, taint value)
    CLASS_KEY: ("general", "general"),
    FLIP_KEY: ("on", "on"),
    RACE_KEY: ("yes", "yes"),
}
OWNED = {*LABEL_TAINTS, PROBLEM_KEY}


def wanted_taints(body: kopf.Body) -> list[dict[str, Any]]:
    """The taints the node should carry: the ones the operator does not own, then its own."""
    labels = body.metadata.labels
    taints = [dict(t) for t in body.spec.get("taints") or [] if t.get("key") not in OWNED]
    for key, (label_value, taint_value) in LABEL_TAINTS.items():
        if labels.get(key) == label_value:
            taints.append({"key": key, "value": taint_value, "effect": "NoSchedule"})
    conditions = body.status.get("conditions") or []
    if any(c.get("type") == PROBLEM_TYPE and c.get("status") == "True" for c in conditions):
        taints.append({"key": PROBLEM_KEY, "value": "true", "effect": "NoSchedule"})
    return taints


def _sync(body: kopf.Body, patch: kopf.Patch) -> None:
    taints = wanted_taints(body)
    if taints != list(body.spec.get("taints") or []):
        patch.spec["taints"] = taints


@kopf.on.create("", "v1", "nodes")
def node_created(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _sync(body, patch)


@kopf.on.update("", "v1", "nodes")
def node_updated(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _sync(body, patch)


@kopf.on.update("", "v1", "nodes", field="status.conditions")
def node_conditions_updated(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _sync(body, patch)
