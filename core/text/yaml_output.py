"""Objects to YAML for people and `kubectl apply -f`: one document per object, readable text.

The one YAML writer: `nodegate manifests` (and `deploy/reconciler.yaml`), `nodegate render
--format karpenter-nodepool` and `nodegate migrate` all print through `dump_all`. ruamel.yaml
(already the rules loader's YAML library) writes multi-line strings such as the rules
ConfigMap's text as literal blocks (`|`), so the rules read as their author wrote them.

ruamel.yaml writes YAML 1.2, but the readers of this output are not all 1.2: kubectl and helm
read through sigs.k8s.io/yaml (go-yaml v2, YAML 1.1), where a plain `yes`, `on` or `1:20` is not
a string, and PyYAML reads 1.1 too. A string either version would read as something else is
written quoted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from io import StringIO
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import LiteralScalarString, SingleQuotedScalarString

_STRING_TAG = "tag:yaml.org,2002:str"
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))


def _styled(value: Any) -> Any:
    """Multi-line strings as literal blocks (when YAML can represent them that way), and
    strings that a YAML 1.1 or 1.2 reader would take for another type quoted."""
    if isinstance(value, Mapping):
        return {_styled(k): _styled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_styled(v) for v in value]
    if not isinstance(value, str):
        return value
    if "\n" in value and _literal_safe(value):
        return LiteralScalarString(value)
    if _read_as_another_type(value):
        return SingleQuotedScalarString(value)
    return value


def _read_as_another_type(text: str) -> bool:
    implicit = (True, False)
    return any(r.resolve(ScalarNode, text, implicit) != _STRING_TAG for r in _RESOLVERS)


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
    yaml.dump_all([_styled(o) for o in objects], out)
    return out.getvalue()
