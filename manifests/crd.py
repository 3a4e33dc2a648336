"""`noderules_crd`: the NodeRules CustomResourceDefinition, so the rules can be a Kubernetes
object (`kubectl apply -f rules.yaml`) that the reconciler reads and reports on in `status`.

Pure. The `spec` schema is not written here: it is the one rules model's JSON Schema
(`NodeRules.model_json_schema`, as `nodegate schema` makes it) made structural, so a field added
to the model is a field of the CRD. The API server then refuses what the schema can say (a taint
effect `Sometimes`, a rule without a name) at admission, with the field's path; what it cannot
(checks across rules, the model's shorthands) nodegate's loader still checks.
"""

from __future__ import annotations

import copy
from typing import Any

from nodegate.core.rules.model import API_VERSION, CRD_NAME, KIND, PLURAL, NodeRules
from nodegate.manifests.settings import Manifest

GROUP, VERSION = API_VERSION.split("/")
SINGULAR = "noderule"
MAX_RULE_STATUSES = 1000
"""Rules listed in `status.rules`: generous, as a bound the API server can reason about."""

_KEPT = (
    "description",
    "enum",
    "pattern",
    "maxLength",
    "minLength",
    "minimum",
    "maximum",
    "maxItems",
    "minItems",
    "minProperties",
    "maxProperties",
    "required",
    "format",
)
"""Value validations and documentation the structural schema keeps as they are."""
_DROPPED = ("title", "default", "$schema", "$defs", "examples")
"""Dropped: `default` above all, or the API server would write the model's defaults into every
stored object (the model applies them when it reads the object)."""
_SHAPE = ("type", "properties", "items", "additionalProperties", "anyOf", "const", "$ref")
_COUNT = {"type": "integer", "format": "int64", "minimum": 0}
_UNCHECKED = "nodegate checks it when it reads the rules; the API server keeps it as written"


def noderules_crd() -> Manifest:
    """The `noderules.nodegate.dev` CRD: cluster-scoped (rules are about nodes, which are), one
    version `v1`, the status subresource for the reconciler's report."""
    columns = [
        ("Accepted", "string", '.status.conditions[?(@.type=="Accepted")].status'),
        ("Rules", "integer", ".status.ruleCount"),
        ("Tainted", "integer", ".status.nodesTainted"),
        ("Waiting", "integer", ".status.nodesWaiting"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    schema = {
        "type": "object",
        "description": "Which taints and labels nodes must carry (docs/rules.md).",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": status_schema(),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/part-of": "nodegate"}},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "plural": PLURAL,
                "singular": SINGULAR,
                "kind": KIND,
                "listKind": f"{KIND}List",
                "shortNames": ["nr"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": name, "type": kind, "jsonPath": path}
                        for name, kind, path in columns
                    ],
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def spec_schema() -> dict[str, Any]:
    """Every field of the rules model but apiVersion and kind (the object's own), structural."""
    schema = NodeRules.model_json_schema(by_alias=True)
    defs: dict[str, Any] = schema.get("$defs", {})
    properties = {
        key: value
        for key, value in schema["properties"].items()
        if key not in ("apiVersion", "kind")
    }
    spec = structural(
        {"type": "object", "properties": properties, "description": "The rules."}, defs
    )
    for field in spec["properties"].values():
        _keyed_by_name(field)
    return spec


def _keyed_by_name(field: dict[str, Any]) -> None:
    """A list of named rules (or pools) is a map keyed by name: the API server refuses a name
    twice in one list, at no CEL cost (the loader checks names across lists)."""
    items = field.get("items", {})
    if field.get("type") == "array" and "name" in items.get("required", ()):
        field["x-kubernetes-list-type"] = "map"
        field["x-kubernetes-list-map-keys"] = ["name"]


def structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema node of the model as a structural OpenAPI v3 schema: `$ref`s inlined,
    `anyOf: [X, null]` as X `nullable`, a union of types (a shorthand) kept as written for
    nodegate to check, `const` as a one-value `enum`. Anything else raises, so a model change
    this does not understand fails the tests instead of shipping a schema the API server
    reads otherwise."""
    node = _inlined(node, defs)
    if "anyOf" in node:
        return _union(node, defs)
    unknown = node.keys() - {*_KEPT, *_DROPPED, *_SHAPE, "exclusiveMinimum", "exclusiveMaximum"}
    if unknown:
        raise ValueError(f"no structural form for JSON Schema keywords {sorted(unknown)}")
    out: dict[str, Any] = {k: copy.deepcopy(node[k]) for k in _KEPT if k in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node:  # JSON Schema 2020-12's number is OpenAPI v3.0's boolean
            out[limit] = node[bound]
            out[bound] = True
    kind = _kind(node)
    if kind is None:
        raise ValueError(f"no type for JSON Schema node {node}")
    out["type"] = kind
    if kind == "array":
        out["items"] = structural(node.get("items", {}), defs)
    elif kind == "object":
        _object(node, out, defs)
    return out


def _object(node: dict[str, Any], out: dict[str, Any], defs: dict[str, Any]) -> None:
    extra = node.get("additionalProperties")
    if "properties" in node:
        # A model refuses unknown fields (`additionalProperties: false`); a CRD may not say so
        # beside `properties`: the API server prunes them, and kubectl's strict field
        # validation (its default) refuses them.
        out["properties"] = {k: structural(v, defs) for k, v in node["properties"].items()}
    elif isinstance(extra, dict):
        out["additionalProperties"] = structural(extra, defs)  # a free map: labels
    else:
        out["x-kubernetes-preserve-unknown-fields"] = True


def _union(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    outer = {k: v for k, v in node.items() if k not in ("anyOf", *_DROPPED)}
    branches = [_inlined(b, defs) for b in node["anyOf"] if b != {"type": "null"}]
    nullable = len(branches) < len(node["anyOf"])
    if len(branches) == 1:
        out = structural({**branches[0], **outer}, defs)
    else:
        kinds = {_kind(b) for b in branches}
        description = outer.get("description", "")
        if kinds == {"integer", "string"}:
            out = {"x-kubernetes-int-or-string": True}
        else:
            # A shorthand beside the long form (`evictionBudget: unlimited`): no one type, so
            # the API server keeps the value unchecked; the loader checks it.
            out = {"x-kubernetes-preserve-unknown-fields": True}
            description = f"{description} ({_UNCHECKED}.)".strip()
            if len(kinds) == 1 and None not in kinds:
                out["type"] = kinds.pop()
        if description:
            out["description"] = description
    if nullable:
        out["nullable"] = True
    return out


def _inlined(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """`node` with its `$ref` replaced by the definition; the node's own words (a field's
    description) win over the definition's (its class's)."""
    if "$ref" not in node:
        return node
    target = defs[node["$ref"].removeprefix("#/$defs/")]
    rest = {k: v for k, v in node.items() if k != "$ref"}
    return _inlined({**target, **rest}, defs)


def _kind(node: dict[str, Any]) -> str | None:
    if isinstance(node.get("type"), str):
        return str(node["type"])
    values = [node["const"]] if "const" in node else node.get("enum", [])
    names = {type(v).__name__ for v in values}
    known = {"str": "string", "bool": "boolean", "int": "integer", "float": "number"}
    if len(names) == 1 and (name := names.pop()) in known:
        return known[name]
    if "properties" in node:
        return "object"
    return None


def status_schema() -> dict[str, Any]:
    """What the reconciler writes through the status subresource."""
    return {
        "type": "object",
        "description": "What the reconciler makes of these rules (written by the reconciler).",
        "properties": {
            "observedGeneration": {
                **_COUNT,
                "description": "The generation of this object the reconciler last read.",
            },
            "conditions": {
                "type": "array",
                "description": "Accepted: the rules are valid and in force (reason and message "
                "say why not).",
                "items": _condition(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "inForceGeneration": {
                **_COUNT,
                "description": "The generation of this object in force (absent: none is).",
            },
            "ruleCount": {**_COUNT, "description": "Rules of every kind."},
            "nodesTainted": {**_COUNT, "description": "Nodes with a taint of these rules."},
            "nodesWaiting": {
                **_COUNT,
                "description": "Nodes that should get a taint and do not yet (held by the "
                "eviction budget, a rule's `for`, dry run).",
            },
            "rules": {
                "type": "array",
                "description": "Each rule: the nodes it matches, taints, holds back.",
                "maxItems": MAX_RULE_STATUSES,
                "items": _rule_status(),
            },
        },
    }


def _rule_status() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "description": "The rule's name."},
            "kind": {"type": "string", "description": "labelTaint, conditionTaint, ..."},
            "matched": {**_COUNT, "description": "Nodes the rule selects."},
            "tainted": {**_COUNT, "description": "Nodes carrying its taint."},
            "waiting": {**_COUNT, "description": "Nodes that should and do not yet."},
            "waitingExamples": {
                "type": "array",
                "maxItems": 3,
                "items": {"type": "string"},
                "description": "A few of the waiting nodes, by name.",
            },
        },
    }


def _condition() -> dict[str, Any]:
    """metav1.Condition's schema, as Kubernetes' own CRDs declare it."""
    return {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            },
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "message": {"type": "string", "maxLength": 32768},
        },
    }
