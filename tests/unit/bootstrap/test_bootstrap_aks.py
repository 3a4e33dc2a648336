"""AKS agent pool lists: permanent taints in nodeTaints, startup gates anywhere but there."""

from __future__ import annotations

import json

import pytest

from nodegate.bootstrap.aks import render_aks_pool
from nodegate.bootstrap.errors import BootstrapError
from tests.unit.bootstrap.support import check_golden, pool_params, rules_and_pool

AKS_POOLS = pool_params("aks")
EXAMPLE_GATE = "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule"
SUPPORT = [
    pytest.param(False, id="no-init-taints"),
    pytest.param(True, id="init-taints"),
]


@pytest.mark.parametrize("supported", SUPPORT)
@pytest.mark.parametrize(("rule_set", "pool"), AKS_POOLS)
def test_aks_json_matches_golden(rule_set: str, pool: str, supported: bool) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    spec = render_aks_pool(rules, node_pool, initialization_taints_supported=supported)
    suffix = "aks-init-taints.json" if supported else "aks.json"
    check_golden(f"{rule_set}/{pool}.{suffix}", spec.to_json() + "\n")


@pytest.mark.parametrize("supported", SUPPORT)
@pytest.mark.parametrize(("rule_set", "pool"), AKS_POOLS)
def test_startup_gates_are_never_in_node_taints(rule_set: str, pool: str, supported: bool) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    spec = render_aks_pool(rules, node_pool, initialization_taints_supported=supported)
    gate_keys = {g.taint.key for g in rules.startup_gates}
    assert not {t.partition(":")[0].partition("=")[0] for t in spec.node_taints} & gate_keys


def test_gates_go_to_node_initialization_taints_when_the_api_has_them() -> None:
    rules, pool = rules_and_pool("example", "batch")
    spec = render_aks_pool(rules, pool, initialization_taints_supported=True)
    assert spec.startup_gates_via == "nodeInitializationTaints"
    assert spec.node_initialization_taints == (EXAMPLE_GATE,)
    assert json.loads(spec.to_json())["properties"]["nodeInitializationTaints"] == [EXAMPLE_GATE]


def test_gates_go_to_the_webhook_when_the_api_lacks_initialization_taints() -> None:
    rules, pool = rules_and_pool("example", "batch")
    spec = render_aks_pool(rules, pool)
    assert spec.startup_gates_via == "webhook"
    assert spec.node_initialization_taints == ()
    assert spec.startup_gate_taints == (EXAMPLE_GATE,)
    assert "admission webhook" in spec.note
    assert "nodeInitializationTaints" not in json.loads(spec.to_json())["properties"]


def test_a_pool_without_gates_says_so() -> None:
    rules, pool = rules_and_pool("awkward", "bare-aks")
    spec = render_aks_pool(rules, pool, initialization_taints_supported=True)
    assert spec.startup_gates_via == "none"
    assert spec.node_initialization_taints == ()
    assert spec.note.startswith("No startup gate matches this pool.")


def test_node_taints_are_the_permanent_label_taints_sorted() -> None:
    rules, pool = rules_and_pool("awkward", "edge-aks")
    spec = render_aks_pool(rules, pool)
    assert spec.node_taints == (
        "capacity.example.com/on-demand=yes:NoSchedule",
        "team.a-b.example.com/dedicated=data_eng-1:NoExecute",
        "team.a-b.example.com/dedicated=data_eng-1:NoSchedule",
    )


def test_node_labels_are_the_registration_labels() -> None:
    rules, pool = rules_and_pool("awkward", "edge-aks")
    assert render_aks_pool(rules, pool).node_labels == {
        "capacity.example.com/type": "on-demand",
        "nodegate.dev/pool": "edge-aks",
        "team.a-b.example.com/owner": "data_eng-1",
    }


def test_an_oke_pool_gets_no_aks_lists() -> None:
    rules, pool = rules_and_pool("example", "ci")
    with pytest.raises(BootstrapError, match="'ci' is an oke pool"):
        render_aks_pool(rules, pool)
