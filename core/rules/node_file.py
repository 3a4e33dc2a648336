"""Nodes given as a file, as `kubectl get node NAME -o yaml|json` (or a List/NodeList) prints
them: what `nodegate explain --node` reads.

The file is user input, not an API response: it goes through the same front door as rules
(`read_yaml`: encoding, size, depth and alias limits) and each item must be a Node the
reconciler's own parser (`NodeState.from_k8s`) can read. Every problem is a located `Problem`
in a `RulesError`, the one error type nodegate's input readers raise.
"""

from __future__ import annotations

from typing import Any

from nodegate.core.rules.node import NodeState
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.yaml_input import read_yaml

_EXPECTED = "expected a Node or a list of Nodes, as `kubectl get node NAME -o yaml` prints it"


def parse_nodes(data: str | bytes, source: str) -> list[NodeState]:
    """The Nodes in a node file; RulesError naming the place of every item that is not one."""
    tree, positions = read_yaml(data, source)

    def at(path: DocPath, message: str) -> Problem:
        return Problem(*positions.get(path, (1, 1)), source, path, message)

    kind = tree.get("kind", "Node") if isinstance(tree, dict) else None
    if kind == "Node":
        items: list[tuple[DocPath, Any]] = [((), tree)]
    elif kind in ("List", "NodeList") and isinstance(tree, dict):
        listed = tree.get("items")
        if not isinstance(listed, list) or not listed:
            raise RulesError([at(("items",), f"no Nodes; {_EXPECTED}")])
        items = [(("items", index), item) for index, item in enumerate(listed)]
    else:
        found = "an empty document" if tree is None else f"kind {kind!r}" if kind else "no kind"
        raise RulesError([at((), f"{_EXPECTED}; found {found}")])
    nodes: list[NodeState] = []
    problems: list[Problem] = []
    for path, item in items:
        if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
            problems.append(at(path, f"not a Node; {_EXPECTED}"))
            continue
        try:
            nodes.append(NodeState.from_k8s(item))
        # from_k8s trusts the API server's shapes; a hand-edited file breaks them in these ways.
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            problems.append(
                at(path, f"cannot read this Node ({type(err).__name__}: {err}); {_EXPECTED}")
            )
    if problems:
        raise RulesError(problems)
    return nodes
