"""The program and each pool's autoscaler: what the stack makes of it and what it declares."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from nodegate.infra.cloud_inputs import PATCH_FORCE
from nodegate.infra.program import InvalidStackConfigError
from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    OKE_NODE_POOL,
    example_rules_data,
    run_program,
    write_rules,
)

KARPENTER_COMPONENT = "nodegate:index:KarpenterNodePool"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
AKS = "Pulumi.aks-example.yaml: nodegate:aks"
PLAIN_GATE = "startup.example.com/initializing"


def _rules_with(project: Path, **pool_changes: dict[str, Any]) -> dict[str, Any]:
    """The example rules with some pools edited (by name), written as the project's rules."""
    data = example_rules_data()
    for pool in data["spec"]["nodePools"]:
        pool.update(pool_changes.get(pool["name"], {}))
    write_rules(project, data)
    return data


def _with_plain_gate(data: dict[str, Any], project: Path) -> None:
    data["spec"]["startupGates"][0]["taint"]["key"] = PLAIN_GATE
    write_rules(project, data)


def test_an_autoscaled_aks_pool_is_checked_as_run_by_aks_managed_autoscaler(
    aks_example: dict[str, Any], project: Path
) -> None:
    """The rules name no autoscaler for batch; its stack `autoscaling` makes it managed CA."""
    _with_plain_gate(_rules_with(project), project)
    aks_example["nodegate:rules"] = "rules.yaml"

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert isinstance(run.error, InvalidStackConfigError)
    assert str(run.error) == (
        f"{AKS}.pools.batch.autoscaling: makes the pool autoscaled by AKS's managed "
        "cluster-autoscaler (the rules name no autoscaler for it), and then "
        "startupGates[0].taint.key: gate 'gpu-warmup' is not a startup taint to a managed "
        "cluster-autoscaler (OKE add-on, AKS: no --startup-taint flag) in front of pool 'batch': "
        "it would count a gated node as ready capacity the pending pods cannot use and add "
        "another node, and never scale the pool up from zero; rename the key "
        "'startup-taint.cluster-autoscaler.kubernetes.io/initializing'"
    )
    assert run.resources == []


def test_the_same_gate_on_a_fixed_size_aks_pool_is_not_an_autoscaler_matter(
    aks_example: dict[str, Any], project: Path
) -> None:
    _with_plain_gate(_rules_with(project), project)
    aks_example["nodegate:rules"] = "rules.yaml"
    del aks_example["nodegate:aks"]["pools"]["batch"]["autoscaling"]

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert run.error is None
    assert [r.name for r in run.of_type(AKS_AGENT_POOL)] == ["batch-agentpool"]


def test_rules_saying_no_autoscaler_contradict_stack_autoscaling(
    aks_example: dict[str, Any], project: Path
) -> None:
    _rules_with(project, batch={"autoscaler": {"type": "none"}})
    aks_example["nodegate:rules"] = "rules.yaml"

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert str(run.error) == (
        f"{AKS}.pools.batch.autoscaling: enables AKS's cluster-autoscaler on pool 'batch', "
        "whose autoscaler the rules say is none; remove one of the two"
    )


def test_a_managed_autoscaler_in_the_rules_needs_stack_autoscaling_on_aks(
    aks_example: dict[str, Any], project: Path
) -> None:
    _rules_with(project, batch={"autoscaler": {"type": "cluster-autoscaler"}})
    aks_example["nodegate:rules"] = "rules.yaml"
    del aks_example["nodegate:aks"]["pools"]["batch"]["autoscaling"]

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert str(run.error).startswith(f"{AKS}.pools.batch.autoscaling: is not set, but the rules")


def test_autoscaler_warnings_are_logged_and_do_not_stop_the_program(
    aks_example: dict[str, Any], project: Path
) -> None:
    data = _rules_with(project)
    data["spec"]["startupGates"][0]["timeout"] = "20m"
    write_rules(project, data)
    aks_example["nodegate:rules"] = "rules.yaml"

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert run.error is None
    warnings = [r.getMessage() for r in run.logs if r.levelno == logging.WARNING]
    assert any(
        w.startswith(
            "warning: startupGates[0].timeout: timeout 20m of gate 'gpu-warmup' on "
            "autoscaled pool 'batch'"
        )
        for w in warnings
    ), warnings


def test_an_oke_pool_behind_cluster_autoscaler_leaves_its_size_to_it(
    oke_example: dict[str, Any], project: Path
) -> None:
    _rules_with(project, gpu={"autoscaler": {"type": "cluster-autoscaler"}})
    oke_example["nodegate:rules"] = "rules.yaml"

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert run.error is None
    assert "nodeConfigDetails.size" in run.ignore_changes["gpu-nodepool"]


KARPENTER = {"autoscaler": {"type": "karpenter", "nodePool": "batch-nap"}}


def test_a_karpenter_pool_is_declared_as_a_nodepool_not_an_agent_pool(
    aks_example: dict[str, Any], project: Path
) -> None:
    _rules_with(project, batch=KARPENTER)
    aks_example["nodegate:rules"] = "rules.yaml"
    del aks_example["nodegate:aks"]["pools"]["batch"]

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert run.error is None
    assert run.of_type(AKS_AGENT_POOL) == []
    assert [r.name for r in run.of_type(KARPENTER_COMPONENT)] == ["batch"]
    nodepool = run.one(NODEPOOL, "batch-nodepool")
    assert nodepool.inputs["metadata"]["name"] == "batch-nap"
    assert nodepool.inputs["metadata"]["annotations"] == {PATCH_FORCE: "true"}  # hand edits
    spec = nodepool.inputs["spec"]["template"]["spec"]
    assert spec["startupTaints"] == [
        {
            "key": "startup-taint.cluster-autoscaler.kubernetes.io/initializing",
            "value": "wait",
            "effect": "NoSchedule",
        }
    ]
    assert {t["key"] for t in spec["taints"]} == {"example.com/spot", "nvidia.com/gpu"}
    assert run.outputs["pools"]["batch"]["startupTaints"] == [
        "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule"
    ]


def test_a_karpenter_pool_with_an_agent_pool_entry_is_refused(
    aks_example: dict[str, Any], project: Path
) -> None:
    _rules_with(project, batch=KARPENTER)
    aks_example["nodegate:rules"] = "rules.yaml"

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert str(run.error) == (
        f"{AKS}.pools.batch: pool 'batch' is run by Karpenter: it has no aks node pool to "
        "configure (its Karpenter NodePool comes from the rules); remove this entry"
    )


def test_an_external_karpenter_nodepool_is_left_alone(
    aks_example: dict[str, Any], project: Path
) -> None:
    external = {
        "type": "karpenter",
        "externalStartupTaints": [
            {
                "key": "startup-taint.cluster-autoscaler.kubernetes.io/initializing",
                "effect": "NoSchedule",
            }
        ],
    }
    _rules_with(project, batch={"autoscaler": external})
    aks_example["nodegate:rules"] = "rules.yaml"
    del aks_example["nodegate:aks"]["pools"]["batch"]

    run = run_program(aks_example, stack="aks-example", project_dir=project)

    assert run.error is None
    assert run.of_type(KARPENTER_COMPONENT) == []
    assert "batch" in run.outputs["skippedPools"]
    assert run.of_type(OKE_NODE_POOL) == []


ORACLE_SPOT = {
    "autoscaler": {
        "type": "karpenter",
        "version": "v1.6.2",
        "nodeClassRef": {"group": "oci.oraclecloud.com", "kind": "OCINodeClass", "name": "gpu"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
        ],
    }
}


def test_an_oracle_spot_pool_is_a_nodepool_with_its_gates_and_the_preemptible_taint(
    oke_example: dict[str, Any], project: Path
) -> None:
    """karpenter-provider-oci v1.0.0 (Karpenter v1.6.2): gates in startupTaints, and the
    preemptible taint in taints, without which it offers no spot shape; the toleration note
    is logged."""
    _rules_with(project, gpu=ORACLE_SPOT)
    oke_example["nodegate:rules"] = "rules.yaml"
    del oke_example["nodegate:oke"]["pools"]["gpu"]

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert run.error is None
    assert [r.name for r in run.of_type(KARPENTER_COMPONENT)] == ["gpu"]
    spec = run.one(NODEPOOL, "gpu-nodepool").inputs["spec"]["template"]["spec"]
    assert spec["startupTaints"] == [
        {
            "key": "startup-taint.cluster-autoscaler.kubernetes.io/initializing",
            "value": "wait",
            "effect": "NoSchedule",
        }
    ]
    assert spec["taints"][-1] == {
        "key": "oci.oraclecloud.com/oke-is-preemptible",
        "effect": "NoSchedule",
        "value": "present",
    }
    assert (
        "oci.oraclecloud.com/oke-is-preemptible=present:NoSchedule"
        in (run.outputs["pools"]["gpu"]["taints"])
    )
    logged = [r.getMessage() for r in run.logs]
    assert any("operator: Exists, effect: NoSchedule}" in m for m in logged), logged
