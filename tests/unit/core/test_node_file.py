"""Node files for `nodegate explain`: kubectl's shapes are read; anything else is located."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodegate.core.rules.node_file import parse_nodes
from nodegate.core.text.errors import RulesError

NODE = Path(__file__).resolve().parents[3] / "examples" / "nodes" / "gpu-node.yaml"


def problems(data: str | bytes) -> list[str]:
    with pytest.raises(RulesError) as raised:
        parse_nodes(data, "node.yaml")
    return [str(p) for p in raised.value.problems]


def test_a_node_as_kubectl_prints_it_is_read() -> None:
    [node] = parse_nodes(NODE.read_bytes(), "node.yaml")

    assert node.name == "gpu-pool-0"
    assert node.labels["example.com/accelerator"] == "nvidia"


def test_a_node_list_as_json_is_read() -> None:
    text = (
        '{"kind": "NodeList", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}'
    )

    assert [n.name for n in parse_nodes(text, "nodes.json")] == ["a", "b"]


def test_something_else_is_refused_with_what_was_found() -> None:
    assert problems("kind: Pod\n") == [
        "node.yaml:1:1: (document): expected a Node or a list of Nodes, as `kubectl get node "
        "NAME -o yaml` prints it; found kind 'Pod'"
    ]


def test_an_empty_list_is_refused_at_its_items() -> None:
    assert problems("kind: List\nitems: []\n") == [
        "node.yaml:2:1: items: no Nodes; expected a Node or a list of Nodes, as `kubectl get "
        "node NAME -o yaml` prints it"
    ]


def test_every_item_that_is_not_a_readable_node_is_located() -> None:
    text = (
        "kind: List\nitems:\n"
        "  - {kind: Node, metadata: {name: ok}}\n"
        "  - {kind: Pod}\n"
        "  - {kind: Node, metadata: [name]}\n"
        "  - {kind: Node, status: {conditions: [{type: Ready, lastTransitionTime: soon}]}}\n"
    )

    found = problems(text)

    assert [p.split(": ", 2)[:2] for p in found] == [
        ["node.yaml:4:5", "items[1]"],
        ["node.yaml:5:5", "items[2]"],
        ["node.yaml:6:5", "items[3]"],
    ]
    assert "not a Node" in found[0]
    assert "cannot read this Node (AttributeError" in found[1]
    assert "cannot read this Node (ValueError: Invalid isoformat string: 'soon')" in found[2]


def test_node_files_pass_the_same_front_door_as_rules() -> None:
    assert "is not UTF-8" in problems(b"kind: Node\nmetadata: {name: \xff}\n")[0]
