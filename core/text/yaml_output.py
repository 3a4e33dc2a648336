"""Objects to YAML for people and `kubectl apply -f`: one document per object, readable text.

The one YAML writer: `nodegate manifests` (and `deploy/reconciler.yaml`), `nodegate render
--format karpenter-nodepool` and `nodegate migrate` all print through `dump_all`. ruamel.yaml
(already the rules loader's YAML library) writes multi-line strings such as the rules
ConfigMap's text as literal blocks (`|`), so the rules read as their author wrote them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from io import StringIO
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString


def _literal_blocks(value: Any) -> Any:
    """Multi-line strings as literal blocks (when YAML can represent them that way)."""
    if isinstance(value, Mapping):
        return {k: _literal_blocks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal_blocks(v) for v in value]
    if isinstance(value, str) and "\n" in value and _literal_safe(value):
        return LiteralScalarString(value)
    return value


def _literal_safe(text: str) -> bool:
    """A literal block cannot carry trailing blanks on a line or control characters; such
    text stays a quoted scalar, which is just as exact."""
    printable = all(ch == "\n" or ch.isprintable() for ch in text)
    return printable and all(line == line.rstrip(" \t") for line in text.split("\n"))


def dump_all(objects: Iterable[Mapping[str, Any]], header: str = "") -> str:
    """`---`-separated YAML documents, preceded by `header` as comment lines."""
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096  # never fold long lines (args, expressions)
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = StringIO()
    for line in header.splitlines():
        out.write(f"# {line}".rstrip() + "\n")
    yaml.dump_all([_literal_blocks(o) for o in objects], out)
    return out.getvalue()
