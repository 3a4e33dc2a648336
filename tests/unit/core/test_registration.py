"""What a node is born with, keyed by a node's own labels (the webhook's view of a new node)."""

from __future__ import annotations

import pytest

from nodegate.core.rules.model import Taint
from nodegate.core.rules.registration import (
    TaintConflictError,
    gates_for,
    label_taints_for,
    sorted_unique,
)
from tests.unit.core.builders import rules

RULES = rules(
    """\
    labelTaints:
      - name: ci
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        nodeMayLift: true
    startupGates:
      - name: user-warmup
        match:
          expressions: [{key: kubernetes.azure.com/mode, operator: NotIn, values: [system]}]
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/ready=true}
      - name: gpu-warmup
        match: {labels: {example.com/accelerator: nvidia}}
        taint: {key: startup.example.com/gpu, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/gpu-ready=true}
    """
)


def _names(labels: dict[str, str]) -> list[str]:
    return [g.name for g in gates_for(RULES, labels)]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"kubernetes.azure.com/mode": "system"}, [], id="aks-system-pool"),
        pytest.param({"kubernetes.azure.com/mode": "user"}, ["user-warmup"], id="aks-user-pool"),
        pytest.param({}, ["user-warmup"], id="no-mode-label"),
        pytest.param(
            {"kubernetes.azure.com/mode": "user", "example.com/accelerator": "nvidia"},
            ["user-warmup", "gpu-warmup"],
            id="two-gates-in-rules-order",
        ),
        pytest.param(
            {"kubernetes.azure.com/mode": "system", "example.com/accelerator": "nvidia"},
            ["gpu-warmup"],
            id="system-gpu-only-its-own-gate",
        ),
    ],
)
def test_gates_are_those_whose_match_the_node_labels_satisfy(
    labels: dict[str, str], expected: list[str]
) -> None:
    assert _names(labels) == expected


def test_label_taints_follow_the_node_labels() -> None:
    assert [t.flag() for t in label_taints_for(RULES, {"example.com/dedicated": "ci"})] == [
        "example.com/dedicated=ci:NoSchedule"
    ]
    assert label_taints_for(RULES, {"example.com/dedicated": "batch"}) == ()


def test_two_values_for_one_key_and_effect_name_the_place() -> None:
    one = Taint(key="example.com/a", value="x", effect="NoSchedule")
    other = Taint(key="example.com/a", value="y", effect="NoSchedule")
    with pytest.raises(TaintConflictError, match=r"^node 'n1': taints .* share key and effect"):
        sorted_unique((one, other), "node 'n1'")
