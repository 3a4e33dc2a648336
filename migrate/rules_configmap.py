"""`nodegate migrate configmap`: nodegate's own rules ConfigMap (the rules source before
NodeRules objects) as a NodeRules object. Pure.

The rules text is checked as the reconciler checks it; its rules go under the object's spec
as they are (a text already in the object shape keeps its name).
"""

from __future__ import annotations

from typing import Any

from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import KIND
from nodegate.core.rules.rules_object import object_shape
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.yaml_input import read_yaml, read_yaml_documents
from nodegate.migrate.conversion import Conversion, rules_document

COMMAND = "nodegate migrate configmap"
SWITCH = (
    "To switch an installation without a moment with no rules in force: kubectl apply -f this "
    "file, then deploy with rulesSource: objects (the reconciler's --rules-objects). The "
    "reconciler first puts back the rules in force from its status record and judges the "
    "objects against them (no rules at all are held, never applied); once `kubectl get "
    "noderules` says Accepted and nodegate status says in force, delete the ConfigMap."
)


def convert_rules_configmap(data: bytes, source: str, key: str | None = None) -> Conversion:
    """The rules of the one ConfigMap in `data` (a document, or the List kubectl prints);
    RulesError naming what is wrong."""
    documents = read_yaml_documents(data, source)
    found = [
        (document, positions, at)
        for tree, positions in documents
        for document, at in _configmaps(tree)
    ]
    if len(found) != 1:
        message = f"expected one ConfigMap (kubectl get configmap NAME -o yaml), found {len(found)}"
        raise RulesError([Problem(0, 0, source, (), message)])
    configmap, positions, at = found[0]
    found_data = configmap.get("data")
    values: dict[str, Any] = found_data if isinstance(found_data, dict) else {}
    held = sorted(k for k, v in values.items() if isinstance(v, str) and f"kind: {KIND}" in v)
    chosen = key if key is not None else (held[0] if len(held) == 1 else None)
    if chosen is None or not isinstance(values.get(chosen), str):
        where = positions.get((*at, "data"), (0, 0))  # a List item's at its own line
        why = (
            f"has no key '{key}'"
            if key is not None
            else f"holds rules under {len(held)} keys ({', '.join(held) or 'none'}): give --key"
        )
        raise RulesError([Problem(*where, source, ("data",), f"the ConfigMap {why}")])
    text = values[chosen]
    name = str((configmap.get("metadata") or {}).get("name", ""))
    parse_rules(text, f"{source} key {chosen}")  # refused as the reconciler would
    tree, text_positions = read_yaml(text, f"{source} key {chosen}")
    shape = object_shape(tree, text_positions)
    # Its own apiVersion and kind, if it has them, are those (the reconciler accepted them).
    rules = {**rules_document(), **shape.rules}
    named = f" (from ConfigMap {name})" if name else ""
    return Conversion(
        command=COMMAND,
        source=f"{source} key {chosen}{named}",
        rules=rules,
        notes=(SWITCH,),
        name=shape.name or name or None,
    )


def _configmaps(tree: Any) -> list[tuple[dict[str, Any], DocPath]]:
    """A ConfigMap document, or the ConfigMaps among a List's items, each with its path in the
    document (a List kubectl printed may hold other kinds too)."""
    if not isinstance(tree, dict):
        return []
    if tree.get("kind") == "ConfigMap":
        return [(tree, ())]
    items = tree.get("items")
    if tree.get("kind") == "List" and isinstance(items, list):
        return [
            (item, ("items", n))
            for n, item in enumerate(items)
            if isinstance(item, dict) and item.get("kind") == "ConfigMap"
        ]
    return []
