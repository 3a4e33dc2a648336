"""The aks-example stack: one AKS agent pool for the AKS pool of examples/rules.yaml."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.bootstrap.registration import (
    permanent_taints,
    registration_taints,
    startup_gate_taints,
)
from nodegate.infra.cloud_inputs import taint_identity
from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    AKS_COMPONENT,
    OKE_NODE_POOL,
    example_pool,
    run_program,
)


def test_declares_one_agent_pool_for_the_aks_pool_of_the_rules(
    aks_example: dict[str, Any],
) -> None:
    run = run_program(aks_example, stack="aks-example")

    assert run.error is None
    assert [r.name for r in run.of_type(AKS_COMPONENT)] == ["batch"]
    assert [r.name for r in run.of_type(AKS_AGENT_POOL)] == ["batch-agentpool"]
    assert run.of_type(OKE_NODE_POOL) == []


def test_agent_pool_is_a_child_of_its_component(aks_example: dict[str, Any]) -> None:
    run = run_program(aks_example, stack="aks-example")

    children = [u for u in run.urns if u.endswith("::batch-agentpool")]
    assert len(children) == 1
    assert f"::{AKS_COMPONENT}${AKS_AGENT_POOL}::" in children[0]


def test_node_taints_are_the_label_derived_taints(aks_example: dict[str, Any]) -> None:
    run = run_program(aks_example, stack="aks-example")

    rules, batch = example_pool("batch")
    permanent = [t.flag() for t in permanent_taints(rules, batch)]
    assert permanent, "the example batch pool must have label taints for this test to mean anything"

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs

    assert inputs["nodeTaints"] == permanent


def test_node_labels_are_the_pool_labels_and_the_pool_label(aks_example: dict[str, Any]) -> None:
    run = run_program(aks_example, stack="aks-example")

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs

    _, batch = example_pool("batch")
    assert inputs["nodeLabels"] == {**batch.labels, "nodegate.dev/pool": "batch"}


def test_startup_gate_is_never_a_node_taint(aks_example: dict[str, Any]) -> None:
    rules, batch = example_pool("batch")
    gates = {t.identity for t in startup_gate_taints(rules, batch)}
    assert gates, "the example rules must gate the batch pool for this test to mean anything"

    run = run_program(aks_example, stack="aks-example")

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs
    assert not gates & {taint_identity(t) for t in inputs["nodeTaints"]}
    assert "nodeInitializationTaints" not in inputs


def test_exports_that_startup_gates_go_through_the_webhook(aks_example: dict[str, Any]) -> None:
    run = run_program(aks_example, stack="aks-example")

    rules, pool = example_pool("batch")
    batch = run.outputs["pools"]["batch"]
    assert batch["startupGatesVia"] == "webhook"
    assert batch["startupGateTaints"] == [t.flag() for t in startup_gate_taints(rules, pool)]
    assert batch["registrationTaints"] == [t.flag() for t in registration_taints(rules, pool)]
    assert len(batch["bootstrapSha256"]) == 64
    assert run.outputs["skippedPools"] == ["ci", "gpu"]


def test_warns_that_gates_need_the_webhook_until_it_is_deployed(
    aks_example: dict[str, Any],
) -> None:
    run = run_program(aks_example, stack="aks-example")

    assert any(
        "pool 'batch'" in w and "admission webhook" in w and "without them" in w
        for w in run.warnings
    )


@pytest.mark.parametrize(
    ("webhook", "certificate_kind"),
    [
        pytest.param({}, "Secret", id="self-signed"),
        pytest.param({"certManager": {"name": "ca-issuer"}}, "Certificate", id="cert-manager"),
    ],
)
def test_no_gate_warning_when_the_stack_deploys_the_webhook(
    aks_example: dict[str, Any], webhook: dict[str, Any], certificate_kind: str
) -> None:
    aks_example["nodegate:reconciler"]["webhook"] = webhook
    run = run_program(aks_example, stack="aks-example")

    assert run.error is None
    assert not any("admission webhook" in w for w in run.warnings)
    kinds = {r.inputs.get("kind") for r in run.resources}
    assert {"MutatingWebhookConfiguration", certificate_kind} <= kinds


def test_cluster_size_and_scaling_come_from_stack_config_and_rules(
    aks_example: dict[str, Any],
) -> None:
    run = run_program(aks_example, stack="aks-example")

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs
    assert inputs["resourceGroupName"] == "rg-nodegate-example"
    assert inputs["resourceName"] == "aks-nodegate-example"
    assert inputs["agentPoolName"] == "batch"
    assert inputs["vmSize"] == "Standard_NC4as_T4_v3"
    # The rules pool's size: the autoscaler's starting point.
    assert inputs["count"] == example_pool("batch")[1].size
    assert (inputs["enableAutoScaling"], inputs["minCount"], inputs["maxCount"]) == (True, 1, 8)
    assert inputs["mode"] == "User"
    assert inputs["osSKU"] == "AzureLinux"
    assert inputs["orchestratorVersion"] == "1.34"


def test_fixed_count_without_autoscaling(aks_example: dict[str, Any]) -> None:
    aks_example["nodegate:aks"]["pools"]["batch"] = {"count": 2}

    run = run_program(aks_example, stack="aks-example")

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs
    assert (inputs["count"], inputs["enableAutoScaling"]) == (2, False)
    assert "minCount" not in inputs
    assert "maxCount" not in inputs
