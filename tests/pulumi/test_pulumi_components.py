"""The components on their own: inputs are checked before anything is declared."""

from __future__ import annotations

import pytest
from pulumi import Output

from nodegate.bootstrap.aks import AksPoolSpec
from nodegate.bootstrap.oke import kubelet_extra_args
from nodegate.bootstrap.registration import permanent_taints
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.model import NodeRules
from nodegate.infra.providers.aks import AksNodePool, AksNodePoolArgs, _checked_spec
from nodegate.infra.providers.oke import OkeNodePool, OkeNodePoolArgs, OkePlacementArgs
from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    OKE_NODE_POOL,
    REPO,
    decode_user_data,
    expected_registration,
    kubelet_registration,
    run_program,
)


@pytest.fixture
def rules() -> NodeRules:
    return load_rules(REPO / "examples" / "rules.yaml")


def oke_args(rules: NodeRules, pool: str, **overrides: object) -> OkeNodePoolArgs:
    values: dict[str, object] = {
        "rules": rules,
        "pool_name": pool,
        "compartment_id": "ocid1.compartment.oc1..c",
        "cluster_id": "ocid1.cluster.oc1..k",
        "kubernetes_version": "v1.34.1",
        "node_shape": "VM.Standard.E5.Flex",
        "image_id": "ocid1.image.oc1..i",
        "placements": [OkePlacementArgs(availability_domain="AD-1", subnet_id="ocid1.subnet..s")],
        **overrides,
    }
    return OkeNodePoolArgs(**values)  # type: ignore[arg-type]


def test_oke_component_refuses_a_pool_of_another_provider(rules: NodeRules) -> None:
    run = run_program({}, stack="t", program=lambda: OkeNodePool("batch", oke_args(rules, "batch")))

    assert isinstance(run.error, ValueError)
    assert str(run.error) == "pool 'batch' has provider aks, not oke"
    assert run.resources == []


def test_oke_component_refuses_a_pool_missing_from_the_rules(rules: NodeRules) -> None:
    run = run_program({}, stack="t", program=lambda: OkeNodePool("gpus", oke_args(rules, "gpus")))

    assert str(run.error) == "pool 'gpus' is not in the rules (pools: ci, gpu, batch)"
    assert run.resources == []


def test_oke_component_renders_user_cloud_init_given_as_an_output(rules: NodeRules) -> None:
    user = Output.from_input("#!/bin/bash\necho prepared-by-another-resource\n")

    run = run_program(
        {},
        stack="t",
        program=lambda: OkeNodePool("ci", oke_args(rules, "ci", user_cloud_init=user)),
    )

    cloud_init = decode_user_data(run.one(OKE_NODE_POOL, "ci-nodepool"))
    assert "echo prepared-by-another-resource" in cloud_init
    assert kubelet_registration(cloud_init) == expected_registration("ci")


def test_oke_node_metadata_carries_the_kubelet_flags_for_the_autoscaler(rules: NodeRules) -> None:
    """cluster-autoscaler reads a pool-at-zero's taints from `kubelet-extra-args`, not from
    user_data: the same flags must be in both."""
    run = run_program({}, stack="t", program=lambda: OkeNodePool("gpu", oke_args(rules, "gpu")))

    node_pool = run.one(OKE_NODE_POOL, "gpu-nodepool")
    extra_args = node_pool.inputs["nodeMetadata"]["kubelet-extra-args"]
    pool = rules.pool("gpu")
    assert pool is not None
    assert extra_args == kubelet_extra_args(rules, pool)
    assert f"--kubelet-extra-args '{extra_args}'" in decode_user_data(node_pool)


def test_aks_component_refuses_an_invalid_agent_pool_name(rules: NodeRules) -> None:
    args = AksNodePoolArgs(
        rules=rules,
        pool_name="batch",
        resource_group_name="rg",
        cluster_name="aks",
        vm_size="Standard_D4s_v5",
        agent_pool_name="Batch_Pool",
    )

    run = run_program({}, stack="t", program=lambda: AksNodePool("batch", args))

    assert isinstance(run.error, ValueError)
    assert str(run.error).startswith("pool 'batch': 'Batch_Pool' is not a valid AKS agent pool")
    assert run.resources == []


def test_aks_component_declares_the_agent_pool_with_the_rules_taints(rules: NodeRules) -> None:
    args = AksNodePoolArgs(
        rules=rules,
        pool_name="batch",
        resource_group_name="rg",
        cluster_name="aks",
        vm_size="Standard_D4s_v5",
    )

    run = run_program({}, stack="t", program=lambda: AksNodePool("batch", args))

    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs
    batch = rules.pool("batch")
    assert batch is not None
    assert inputs["nodeTaints"] == [t.flag() for t in permanent_taints(rules, batch)]
    assert inputs["count"] == batch.size


def test_guard_refuses_a_startup_gate_in_node_taints() -> None:
    spec = AksPoolSpec(
        pool="batch",
        node_taints=(
            "startup-taint.cluster-autoscaler.kubernetes.io/initializing=other:NoSchedule",
        ),
        node_labels={},
        node_initialization_taints=(),
        startup_gate_taints=(
            "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule",
        ),
        startup_gates_via="webhook",
        note="",
    )

    with pytest.raises(ValueError, match="startup gates must not reach nodeTaints"):
        _checked_spec(spec)
