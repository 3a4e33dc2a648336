"""A rules file is a NodeRules object, as `kubectl apply -f` takes it: `apiVersion`, `kind`,
`metadata.name` and the rules under `spec`. The files written before the rules were an API (the
rules beside `apiVersion` and `kind`) are still read, with a warning saying how to move them.

The model (`model.NodeRules`) is the rules themselves; this finds them in the document and says
where each of their paths stands in it, so every problem names the line and the path the author
wrote (`spec.labelTaints[0].taint`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nodegate.core.rules.model import NodeRules, rules_json_schema
from nodegate.core.text.errors import DocPath
from nodegate.core.text.k8s_names import DNS_SUBDOMAIN_PATTERN, PREFIX_MAX
from nodegate.core.text.yaml_input import Positions

SPEC: DocPath = ("spec",)
OBJECT_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
"""A NodeRules object's top-level fields (`status` is the reconciler's, read and ignored)."""

_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
_TYPE_FIELDS = ("apiVersion", "kind")
_TYPE_PATHS: frozenset[DocPath] = frozenset((t,) for t in _TYPE_FIELDS)

FLAT_SHAPE = (
    "this file has the shape rules had before they were a Kubernetes object: it is read as it "
    "is, but `kubectl apply` refuses it. Move every field but apiVersion and kind under "
    "`spec:` and name the object (`metadata: {name: NAME}`); docs/rules.md shows the shape"
)


RULE_FIELDS = frozenset(
    field.alias or name
    for name, field in NodeRules.model_fields.items()
    if (field.alias or name) not in _TYPE_FIELDS
)
"""The rules' own fields as written (labelTaints, conditionTaints, ...)."""


@dataclass(frozen=True)
class ObjectShape:
    """The rules found in a document, where they stood, and what is wrong with the object
    around them."""

    rules: dict[Any, Any]
    """What the model reads: apiVersion and kind beside the spec's fields."""
    positions: Positions
    """Where each path of `rules` stood in the document."""
    prefix: DocPath
    """`("spec",)` for an object; `()` for a file of the old shape."""
    name: str | None
    found: tuple[tuple[DocPath, str], ...] = ()
    """What is wrong with the object itself (its name, a field outside spec), by document path."""
    hints: tuple[str, ...] = ()
    warnings: tuple[tuple[DocPath, str], ...] = ()
    """What the object says that would not survive the way in (a null kubectl drops)."""

    def document_path(self, path: DocPath) -> DocPath:
        """A path of `rules` as a path of the document."""
        return path if path[:1] in _TYPE_PATHS else self.prefix + path


def object_shape(data: dict[Any, Any], positions: Positions) -> ObjectShape:
    """Find the rules in a NodeRules document (its `kind` is NodeRules or absent: a document of
    another kind was turned away before)."""
    if "spec" not in data and "metadata" not in data:
        hints = (FLAT_SHAPE,) if RULE_FIELDS & data.keys() else ()
        return ObjectShape(data, positions, (), None, hints=hints)
    found: list[tuple[DocPath, str]] = []
    name = _name(data.get("metadata"), found)
    spec = data.get("spec")
    if spec is None:
        spec = {}
    elif not isinstance(spec, dict):
        found.append((SPEC, f"expected a mapping of rules, found a {type(spec).__name__}"))
        spec = {}
    for key in data:
        if key in OBJECT_FIELDS:
            continue
        if key in RULE_FIELDS:
            message = f"'{key}' is a rule field: move it under spec (spec.{key})"
        else:
            message = f"unknown field: a NodeRules object has {', '.join(OBJECT_FIELDS)}"
        found.append(((str(key),), message))
    rules = {k: data[k] for k in _TYPE_FIELDS if k in data} | spec
    warnings = tuple(_dropped_nulls(spec, SPEC))
    return ObjectShape(rules, _within(positions), SPEC, name, tuple(found), warnings=warnings)


def _dropped_nulls(value: Any, path: DocPath) -> Iterator[tuple[DocPath, str]]:
    """`perPool: null` in an eviction budget: `kubectl apply` (client side) sends the object
    without it, and the default per-pool limit applies where the author wrote none."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "perPool" and inner is None and path[-1:] == ("evictionBudget",):
                yield (
                    (*path, key),
                    "kubectl apply drops a null, and the default per-pool limit would apply: "
                    "write perPool: none",
                )
            yield from _dropped_nulls(inner, (*path, str(key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _dropped_nulls(inner, (*path, index))


def _name(metadata: Any, found: list[tuple[DocPath, str]]) -> str | None:
    fix = "name the object: metadata: {name: NAME}, a DNS subdomain such as team-gpu"
    if not isinstance(metadata, dict):
        found.append((("metadata",), f"expected a mapping with the object's name; {fix}"))
        return None
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        found.append((("metadata",), f"the object has no name; {fix}"))
        return None
    if len(name) > PREFIX_MAX or not _DNS_SUBDOMAIN.match(name):
        found.append(
            (
                ("metadata", "name"),
                f"'{name}' is not a DNS subdomain (lower-case letters, digits, '-' and '.', at "
                "most 253 characters, starting and ending with a letter or digit)",
            )
        )
        return None
    return name


def _within(positions: Positions) -> Positions:
    """The positions of the spec's paths (and apiVersion and kind), as paths of the rules."""

    def inner(path: DocPath) -> DocPath | None:
        if path[: len(SPEC)] == SPEC:
            return path[len(SPEC) :]
        return path if path[:1] in _TYPE_PATHS else None

    mapped = Positions(
        {p: where for path, where in positions.items() if (p := inner(path)) is not None},
        written={
            p: text for path, text in positions.written.items() if (p := inner(path)) is not None
        },
    )
    mapped.setdefault((), positions.get(SPEC, positions.get((), (1, 1))))
    return mapped


def position(positions: Positions, path: DocPath) -> tuple[int, int]:
    """Where `path` (or its longest known prefix) stood; (0, 0): nowhere known."""
    for end in range(len(path), -1, -1):
        if path[:end] in positions:
            return positions[path[:end]]
    return (0, 0)


def rules_file_json_schema() -> dict[str, Any]:
    """JSON Schema of a rules file, the NodeRules object (for yaml-language-server completion):
    the model's (`rules_json_schema`) under `spec`."""
    rules = rules_json_schema()
    spec = {
        "type": "object",
        "description": "The rules (docs/rules.md).",
        "additionalProperties": False,
        "properties": {k: v for k, v in rules["properties"].items() if k not in _TYPE_FIELDS},
    }
    return {
        "$schema": rules["$schema"],
        "title": rules["title"],
        "description": "A NodeRules object: `kubectl apply -f` it, or give it to nodegate.",
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            **{k: rules["properties"][k] for k in _TYPE_FIELDS},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {
                        "type": "string",
                        "maxLength": PREFIX_MAX,
                        "pattern": DNS_SUBDOMAIN_PATTERN,
                        "description": "The object's name: a DNS subdomain, e.g. team-gpu.",
                    }
                },
            },
            "spec": spec,
            "status": {"type": "object", "description": "Written by the reconciler."},
        },
        "$defs": rules["$defs"],
    }
