"""Inputs a user or a cluster could send: real documents, mutated byte by byte or with a
subtree replaced, and documents generated from scratch. Hypothesis draws and shrinks them.

Seeds are the files the project ships (examples/, test fixtures), so mutations start from
something valid and reach deep into validation, not only the YAML parser.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
RULES_SEEDS = (
    ROOT / "examples" / "rules.yaml",
    ROOT / "tests" / "unit" / "bootstrap" / "fixtures" / "awkward-rules.yaml",
)
NODE_SEEDS = (ROOT / "examples" / "nodes" / "gpu-node.yaml",)

# Fragments that mean something to a YAML reader, scanner, parser, composer or constructor,
# and bytes that are not text. Mutations splice them in anywhere.
TOKENS = (
    b"\x00",
    b"\x01",
    b"\x1b",
    b"\x7f",
    b"\x85",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\xff",
    b"\xfe\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"\t",
    b"\r",
    b"\r\n",
    b"\n",
    b" ",
    b"    ",
    b"- ",
    b": ",
    b"? ",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b"&a ",
    b"*a",
    b"&b [*a, *a, *a, *a]",
    b"<<: *a",
    b"<<: [*a, *b]",
    b"!!binary ",
    b"!!int ",
    b"!!float ",
    b"!!timestamp ",
    b"!!set ",
    b"!!omap ",
    b"!!str ",
    b"!!map ",
    b"!foo ",
    b"!!python/object:os.system ",
    b"%YAML 1.1\n---\n",
    b"%TAG ! tag:x,2000:\n---\n",
    b"---\n",
    b"...\n",
    b"#",
    b"'",
    b'"',
    b"|",
    b"|-\n",
    b">",
    b"\\",
    b'"\\x',
    b'"\\u',
    b"~",
    b"null",
    b"true",
    b"yes",
    b".nan",
    b"-.inf",
    b"1e999",
    b"0x",
    b"0o9",
    b"1_000",
    b"2001-13-45",
    b"2001-02-30 25:61:61",
    b"9" * 5000,
    b"labelTaints: ",
    b"nodePools: ",
    b"match: ",
    b"effect: ",
)


def seed_bytes(paths: tuple[Path, ...]) -> list[bytes]:
    return [path.read_bytes() for path in paths]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A seed after a few edits: splice a token, delete, duplicate or flip bytes, truncate."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(("token", "byte", "delete", "duplicate", "truncate")))
        if edit == "token":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif edit == "byte":
            data[at : at + 1] = bytes([draw(st.integers(0, 255))])
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif edit == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
        else:
            del data[at:]
    return bytes(data)


RULE_KEYS = (
    "apiVersion",
    "kind",
    "labelTaints",
    "conditionTaints",
    "persistentLabels",
    "startupGates",
    "nodePools",
    "name",
    "match",
    "labels",
    "expressions",
    "key",
    "operator",
    "values",
    "taint",
    "value",
    "effect",
    "conditions",
    "type",
    "typePattern",
    "status",
    "reason",
    "for",
    "onRecovery",
    "readyWhen",
    "pods",
    "namespace",
    "selector",
    "annotation",
    "timeout",
    "onTimeout",
    "provider",
    "size",
    "reconcilerLabels",
    "prefixes",
    "keys",
    "keyBy",
    "metadata",
    "spec",
    "taints",
    "items",
    "lastTransitionTime",
    "creationTimestamp",
)
WORDS = (
    "NoSchedule",
    "NoExecute",
    "PreferNoSchedule",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "oke",
    "aks",
    "Node",
    "List",
    "NodeList",
    "True",
    "30s",
    "remove",
    "keep",
    "lift",
    "providerID",
    "nodeName",
    "example.com/a",
    "node-role.kubernetes.io/x",
    "2026-11-21T10:00:00Z",
    "(",
    "",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(max_size=20),
)
plain_data = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.sampled_from(RULE_KEYS) | st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=30,
)
"""JSON-like values whose keys are mostly the rules' and a Node's own keys."""


def paths_of(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in plain data (the seeds are small: recursion is fine)."""
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths_of(value, (*path, index))
    return found


def replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of `data` with the value at `path` replaced (the root for an empty path)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {**data, head: replaced(data[head], rest, value)}
    copy = list(data)
    copy[head] = replaced(copy[head], rest, value)
    return copy


@st.composite
def grafted(draw: st.DrawFn, seed: Any, *, whole: bool = True) -> Any:
    """A seed document with one subtree replaced by generated data: the shape stays mostly
    right, so validation, cross-checks and the Node parser see wrong types deep inside.
    `whole=False` keeps the root (only what is inside it is replaced)."""
    path = draw(st.sampled_from(paths_of(seed)[0 if whole else 1 :]))
    return replaced(seed, path, draw(plain_data))


@st.composite
def dumped(draw: st.DrawFn, data: st.SearchStrategy[Any]) -> bytes:
    """Generated data written as YAML (block or flow style) or JSON-style flow YAML."""
    value = draw(data)
    stream = io.StringIO()
    yaml.safe_dump(
        value,
        stream,
        default_flow_style=draw(st.sampled_from((False, True, None))),
        allow_unicode=draw(st.booleans()),
    )
    return stream.getvalue().encode("utf-8", "surrogatepass")


def plain_seed(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))
