"""The NodeRules CRD: its schema is one the API server takes as structural, generated from the
rules model (every field of it), and what `kubectl get noderules` shows."""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from nodegate.core.rules.model import NodeRules
from nodegate.manifests.build import build_manifests
from nodegate.manifests.crd import noderules_crd, structural
from tests.unit.manifests.support import example_document, settings

NodeSchema = dict[str, Any]


def _version() -> dict[str, Any]:
    (version,) = noderules_crd()["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _root() -> NodeSchema:
    root = _version()["schema"]["openAPIV3Schema"]
    assert isinstance(root, dict)
    return root


def _nodes(node: NodeSchema, path: str = "") -> Iterator[tuple[str, NodeSchema]]:
    """Every schema node with its path (`spec.labelTaints[].taint.effect`, `{}` for a map's
    values)."""
    yield path, node
    for key, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{key}" if path else key)
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


def test_every_schema_node_has_a_type_or_says_it_is_kept_as_written() -> None:
    """Structural: the API server refuses a CRD with a node of no type, unless it is
    int-or-string or keeps unknown fields."""
    untyped = [
        path
        for path, node in _nodes(_root())
        if "type" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and not node.get("x-kubernetes-int-or-string")
    ]
    assert untyped == []


def test_the_schema_has_no_json_schema_only_keywords() -> None:
    """No `$ref` (a structural schema is inline), no `anyOf` (the model's unions are nullable
    nodes or shorthands kept as written), no `const`, `title` or `$defs`."""
    found = [
        (path, key)
        for path, node in _nodes(_root())
        for key in ("$ref", "$defs", "anyOf", "oneOf", "allOf", "const", "title", "$schema")
        if key in node
    ]
    assert found == []


def test_the_schema_has_no_defaults_for_the_api_server_to_store() -> None:
    assert [path for path, node in _nodes(_root()) if "default" in node] == []


def test_no_node_has_both_properties_and_additional_properties() -> None:
    """The API server refuses the model's `additionalProperties: false` beside `properties`."""
    both = [p for p, n in _nodes(_root()) if "properties" in n and "additionalProperties" in n]
    assert both == []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds (in a list, an optional, a union)."""
    origin = get_origin(annotation)
    if origin in (Annotated, tuple):
        return _models_in(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _models_in(a)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _field_paths(model: type[BaseModel], prefix: str) -> Iterator[str]:
    """Every field path of the model, from the pydantic classes themselves (not from the JSON
    Schema the CRD is generated from)."""
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        yield path
        many = get_origin(info.annotation) is tuple
        for inner in _models_in(info.annotation):
            yield from _field_paths(inner, f"{path}[]" if many else path)


def _kept_as_written() -> set[str]:
    return {p for p, n in _nodes(_root()) if n.get("x-kubernetes-preserve-unknown-fields")}


def test_every_field_of_the_rules_model_is_under_spec() -> None:
    """Every field path of the model is in the CRD's schema, or inside a field the CRD keeps as
    written (a shorthand beside the long form)."""
    kept = _kept_as_written()
    model_paths = {
        p
        for p in _field_paths(NodeRules, "spec")
        if p not in ("spec.apiVersion", "spec.kind")
        and not any(p.startswith(f"{k}.") or p.startswith(f"{k}[]") for k in kept)
    }
    crd_paths = {path for path, _ in _nodes(_root())}

    assert sorted(model_paths - crd_paths) == []
    assert len(model_paths) > 100


def test_the_object_schema_has_no_apiversion_or_kind_under_spec() -> None:
    spec = _root()["properties"]["spec"]["properties"]
    assert "apiVersion" not in spec and "kind" not in spec


def test_a_nullable_model_field_is_a_nullable_node() -> None:
    gate = _root()["properties"]["spec"]["properties"]["startupGates"]["items"]
    timeout = gate["properties"]["timeout"]
    assert (timeout["type"], timeout["nullable"]) == ("string", True)
    assert timeout["pattern"] == r"^(\d+(\.\d+)?(ms|s|m|h))+$"


def test_a_shorthand_union_is_kept_as_written_for_nodegate_to_check() -> None:
    """`evictionBudget: unlimited` beside `{window: 5m, ...}`: no one type fits both. Only
    those unions are kept unchecked."""
    assert _kept_as_written() == {
        "spec.evictionBudget",
        *(f"spec.{k}[].evictionBudget" for k in ("labelTaints", "conditionTaints", "nodeAgents")),
        "spec.nodeAgents[].daemonSets",
        "spec.nodePools[].autoscaler",
    }
    spec = _root()["properties"]["spec"]["properties"]
    for node in (
        spec["evictionBudget"],
        spec["labelTaints"]["items"]["properties"]["evictionBudget"],
        spec["nodeAgents"]["items"]["properties"]["daemonSets"],
        spec["nodePools"]["items"]["properties"]["autoscaler"],
    ):
        assert node["x-kubernetes-preserve-unknown-fields"] is True
        assert "type" not in node
        assert "nodegate checks it" in node["description"]


def test_a_free_map_is_an_object_of_strings() -> None:
    match = _root()["properties"]["spec"]["properties"]["labelTaints"]["items"]["properties"]
    assert match["match"]["properties"]["labels"] == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }


def test_const_becomes_a_one_value_enum() -> None:
    assert structural({"const": "auto"}, {}) == {"enum": ["auto"], "type": "string"}


def test_an_int_or_string_union_is_int_or_string() -> None:
    union = {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "d"}
    assert structural(union, {}) == {"x-kubernetes-int-or-string": True, "description": "d"}


_NOT_RE2 = re.compile(r"\(\?[=!<]|\(\?P=|\\[1-9]|[*+?}]\+|\(\?>|\\Z")
"""Python regex syntax Go's RE2 (the API server's) lacks: lookarounds, backreferences,
possessive quantifiers, atomic groups, `\\Z`."""


def test_every_pattern_compiles_and_uses_only_re2_syntax() -> None:
    patterns = [(path, n["pattern"]) for path, n in _nodes(_root()) if "pattern" in n]
    assert len(patterns) > 10
    for path, pattern in patterns:
        re.compile(pattern)
        assert not _NOT_RE2.search(pattern), f"{path}: {pattern} is not RE2"


def test_each_list_of_named_rules_refuses_a_name_twice() -> None:
    spec = _root()["properties"]["spec"]["properties"]
    keyed = {k for k, v in spec.items() if v.get("x-kubernetes-list-map-keys") == ["name"]}
    assert keyed == {"labelTaints", "conditionTaints", "startupGates", "nodeAgents", "nodePools"}
    assert all(spec[k]["x-kubernetes-list-type"] == "map" for k in keyed)


def test_status_conditions_are_a_map_keyed_by_type() -> None:
    conditions = _root()["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["items"]["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def test_kubectl_get_shows_accepted_rules_tainted_waiting_and_age() -> None:
    columns = {
        c["name"]: (c["type"], c["jsonPath"]) for c in _version()["additionalPrinterColumns"]
    }
    assert columns == {
        "Accepted": ("string", '.status.conditions[?(@.type=="Accepted")].status'),
        "Rules": ("integer", ".status.ruleCount"),
        "Tainted": ("integer", ".status.nodesTainted"),
        "Waiting": ("integer", ".status.nodesWaiting"),
        "Age": ("date", ".metadata.creationTimestamp"),
    }


def test_the_crd_is_cluster_scoped_with_a_status_subresource() -> None:
    crd = noderules_crd()
    assert crd["metadata"]["name"] == "noderules.nodegate.dev"
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["nr"]
    assert _version()["subresources"] == {"status": {}}


def test_the_manifest_builder_ships_the_crd_first() -> None:
    assert build_manifests(example_document(), settings())[0] == noderules_crd()
