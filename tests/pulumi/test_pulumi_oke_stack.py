"""The oke-example stack: one tainted OKE node pool per OKE pool of examples/rules.yaml."""

from __future__ import annotations

import hashlib
import runpy
from typing import Any

import pytest

from nodegate.bootstrap.oke import render_oke_cloud_init
from nodegate.bootstrap.registration import startup_gate_taints
from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    OKE_COMPONENT,
    OKE_NODE_POOL,
    REPO,
    decode_user_data,
    example_pool,
    expected_registration,
    kubelet_registration,
    run_program,
)


def test_declares_one_oke_node_pool_per_oke_pool_of_the_rules(oke_example: dict[str, Any]) -> None:
    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    assert sorted(r.name for r in run.of_type(OKE_COMPONENT)) == ["ci", "gpu"]
    assert sorted(r.name for r in run.of_type(OKE_NODE_POOL)) == ["ci-nodepool", "gpu-nodepool"]
    assert run.of_type(AKS_AGENT_POOL) == []


def test_node_pools_are_children_of_their_component(oke_example: dict[str, Any]) -> None:
    run = run_program(oke_example, stack="oke-example")

    children = [u for u in run.urns if u.endswith("::ci-nodepool")]
    assert len(children) == 1
    assert f"::{OKE_COMPONENT}${OKE_NODE_POOL}::" in children[0]


@pytest.mark.parametrize("pool", ["ci", "gpu"])
def test_user_data_registers_the_pools_taints_and_labels(
    oke_example: dict[str, Any], pool: str
) -> None:
    run = run_program(oke_example, stack="oke-example")

    registered = kubelet_registration(decode_user_data(run.one(OKE_NODE_POOL, f"{pool}-nodepool")))

    assert registered == expected_registration(pool)


def test_oke_nodes_are_born_with_their_startup_gates(oke_example: dict[str, Any]) -> None:
    rules, gpu = example_pool("gpu")
    gates = {t.flag() for t in startup_gate_taints(rules, gpu)}
    assert gates, "the example rules must gate the gpu pool for this test to mean anything"

    run = run_program(oke_example, stack="oke-example")

    registered, _ = kubelet_registration(decode_user_data(run.one(OKE_NODE_POOL, "gpu-nodepool")))
    assert gates <= registered


def test_user_data_is_the_bootstrap_rendering_of_the_pool(oke_example: dict[str, Any]) -> None:
    rules, pool = example_pool("ci")

    run = run_program(oke_example, stack="oke-example")

    assert decode_user_data(run.one(OKE_NODE_POOL, "ci-nodepool")) == render_oke_cloud_init(
        rules, pool
    )


def test_user_cloud_init_runs_before_nodegates_boot_script(oke_example: dict[str, Any]) -> None:
    run = run_program(oke_example, stack="oke-example")

    cloud_init = decode_user_data(run.one(OKE_NODE_POOL, "gpu-nodepool"))

    assert "modprobe, br_netfilter" in cloud_init
    assert cloud_init.index("br_netfilter") < cloud_init.index("--kubelet-extra-args")


@pytest.mark.parametrize("pool", ["ci", "gpu"])
def test_initial_node_labels_are_the_registration_labels(
    oke_example: dict[str, Any], pool: str
) -> None:
    run = run_program(oke_example, stack="oke-example")

    labels = run.one(OKE_NODE_POOL, f"{pool}-nodepool").inputs["initialNodeLabels"]

    expected = expected_registration(pool)[1]
    assert labels == [{"key": k, "value": v} for k, v in sorted(expected.items())]


def test_placement_shape_image_and_size_come_from_defaults_and_rules(
    oke_example: dict[str, Any],
) -> None:
    run = run_program(oke_example, stack="oke-example")

    ci = run.one(OKE_NODE_POOL, "ci-nodepool").inputs
    assert ci["compartmentId"] == "ocid1.compartment.oc1..aaaaaaaaexamplecompartment"
    assert ci["clusterId"] == "ocid1.cluster.oc1.phx.aaaaaaaaexamplecluster"
    assert ci["kubernetesVersion"] == "v1.34.1"
    assert ci["name"] == "ci"
    assert ci["nodeShape"] == "VM.Standard.E5.Flex"
    assert ci["nodeShapeConfig"] == {"ocpus": 2, "memoryInGbs": 16}
    assert ci["nodeSourceDetails"] == {
        "sourceType": "IMAGE",
        "imageId": "ocid1.image.oc1.phx.aaaaaaaaexampleimage",
    }
    assert ci["nodeConfigDetails"] == {
        "size": example_pool("ci")[1].size,  # the rules pool's size
        "placementConfigs": [
            {
                "availabilityDomain": "Uocm:PHX-AD-1",
                "subnetId": "ocid1.subnet.oc1.phx.aaaaaaaaexampleworkers",
            }
        ],
    }
    assert "nodePoolCyclingDetails" not in ci


def test_pool_entry_overrides_defaults_field_by_field(oke_example: dict[str, Any]) -> None:
    run = run_program(oke_example, stack="oke-example")

    gpu = run.one(OKE_NODE_POOL, "gpu-nodepool").inputs
    assert gpu["nodeShape"] == "VM.GPU.A10.1"
    assert "nodeShapeConfig" not in gpu  # cleared with an explicit null
    assert gpu["nodeSourceDetails"]["imageId"] == "ocid1.image.oc1.phx.aaaaaaaaexamplegpuimage"
    assert gpu["kubernetesVersion"] == "v1.34.1"  # from defaults
    assert gpu["nodePoolCyclingDetails"] == {
        "isNodeCyclingEnabled": True,
        "maximumSurge": "1",
        "maximumUnavailable": "0",
    }


def test_size_in_stack_config_wins_over_the_rules_size(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {"size": 7}

    run = run_program(oke_example, stack="oke-example")

    assert run.one(OKE_NODE_POOL, "ci-nodepool").inputs["nodeConfigDetails"]["size"] == 7


def test_boot_volume_size_is_passed_as_the_string_oci_expects(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {"bootVolumeSizeInGbs": 100}

    run = run_program(oke_example, stack="oke-example")

    source = run.one(OKE_NODE_POOL, "ci-nodepool").inputs["nodeSourceDetails"]
    assert source["bootVolumeSizeInGbs"] == "100"


def test_exports_registration_taints_labels_and_bootstrap_hash_per_pool(
    oke_example: dict[str, Any],
) -> None:
    run = run_program(oke_example, stack="oke-example")

    for pool in ("ci", "gpu"):
        taints, labels = expected_registration(pool)
        exported = run.outputs["pools"][pool]
        user_data = decode_user_data(run.one(OKE_NODE_POOL, f"{pool}-nodepool"))
        assert exported["provider"] == "oke"
        assert set(exported["registrationTaints"]) == taints
        assert exported["registrationLabels"] == labels
        assert exported["bootstrapSha256"] == hashlib.sha256(user_data.encode()).hexdigest()
    assert run.outputs["skippedPools"] == ["batch"]


def test_entry_point_run_from_infra_finds_rules_relative_to_pulumi_yaml(
    oke_example: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pulumi runs `main: infra/` with infra/ as the working directory.
    monkeypatch.chdir(REPO / "infra")

    run = run_program(
        oke_example, stack="oke-example", program=lambda: runpy.run_path(str(REPO / "infra"))
    )

    assert run.error is None
    assert sorted(r.name for r in run.of_type(OKE_NODE_POOL)) == ["ci-nodepool", "gpu-nodepool"]
