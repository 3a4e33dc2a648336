"""Pool settings real clusters need: OKE image family, networking, keys, capacity, ignored
changes; AKS OS type and SKUs checked against the SDK's enums."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any, get_args

import pytest
from pulumi_azure_native import containerservice

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.oke import ImageFamily, render_oke_cloud_init
from nodegate.infra.program import InvalidStackConfigError
from nodegate.infra.providers.aks import AksMode, AksOsSku, AksOsType
from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    OKE_NODE_POOL,
    decode_user_data,
    example_pool,
    expected_registration,
    kubelet_registration,
    run_program,
)

SUBNET = "ocid1.subnet.oc1.phx.aaaaaaaapods"
NSG = "ocid1.networksecuritygroup.oc1.phx.aaaaaaaansg"
KEY = "ocid1.key.oc1.phx.aaaaaaaakey"
SSH = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@example"


def _failing(run: Any) -> list[str]:
    assert isinstance(run.error, InvalidStackConfigError), run.error
    return str(run.error).splitlines()


def _ci(run: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = run.one(OKE_NODE_POOL, "ci-nodepool").inputs
    return inputs


def test_ubuntu_pools_boot_with_oke_bootstrap_and_the_same_registration(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {"imageFamily": "ubuntu"}

    run = run_program(oke_example, stack="oke-example")

    cloud_init = decode_user_data(run.one(OKE_NODE_POOL, "ci-nodepool"))
    assert "\noke bootstrap --kubelet-extra-args '" in cloud_init
    assert "oke-init.sh" not in cloud_init
    assert kubelet_registration(cloud_init) == expected_registration("ci")
    gpu = decode_user_data(run.one(OKE_NODE_POOL, "gpu-nodepool"))
    assert "bash /var/run/oke-init.sh --kubelet-extra-args" in gpu  # the default family


def _user_script(size: int) -> str:
    """A user cloud-init script of about `size` bytes that gzip cannot shrink."""
    noise = base64.b64encode(random.Random(7).randbytes(size)).decode()[:size]
    return f"#!/bin/bash\n# {noise}\n"


def _fits(family: ImageFamily, size: int) -> bool:
    rules, pool = example_pool("gpu")
    try:
        render_oke_cloud_init(rules, pool, _user_script(size), image_family=family)
    except BootstrapError:
        return False
    return True


def test_an_ubuntu_pool_is_checked_against_its_own_user_data_not_oracle_linuxs(
    oke_example: dict[str, Any], project: Path
) -> None:
    # The largest user script that fits beside the (shorter) Ubuntu boot script: beside Oracle
    # Linux's it would not, so a pre-flight that renders the wrong family refuses the stack.
    low, high = 0, 24_000
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _fits("ubuntu", middle) else (low, middle - 1)
    assert not _fits("oracle-linux", low), "the test needs a script only Ubuntu's fits beside"
    oke_example["nodegate:rules"] = "rules.yaml"
    (project / "big.sh").write_text(_user_script(low), encoding="utf-8")
    oke_example["nodegate:oke"]["pools"]["gpu"].update(
        {"userCloudInit": "big.sh", "imageFamily": "ubuntu"}
    )

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert run.error is None, run.error
    cloud_init = decode_user_data(run.one(OKE_NODE_POOL, "gpu-nodepool"))
    assert "\noke bootstrap --kubelet-extra-args '" in cloud_init


def test_vcn_native_pod_network_nsgs_key_and_ssh_reach_the_node_pool(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:oke"]["defaults"].update(
        podNetwork={
            "cniType": "OCI_VCN_IP_NATIVE",
            "podSubnetIds": [SUBNET],
            "podNsgIds": [NSG],
            "maxPodsPerNode": 31,
        },
        nsgIds=[NSG],
        kmsKeyId=KEY,
        sshPublicKey=SSH,
    )

    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    details = _ci(run)["nodeConfigDetails"]
    assert details["nodePoolPodNetworkOptionDetails"] == {
        "cniType": "OCI_VCN_IP_NATIVE",
        "podSubnetIds": [SUBNET],
        "podNsgIds": [NSG],
        "maxPodsPerNode": 31,
    }
    assert details["nsgIds"] == [NSG]
    assert details["kmsKeyId"] == KEY
    assert _ci(run)["sshPublicKey"] == SSH


def test_preemptible_pools_ask_every_placement_for_preemptible_capacity(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {"preemptible": True}

    run = run_program(oke_example, stack="oke-example")

    for placement in _ci(run)["nodeConfigDetails"]["placementConfigs"]:
        assert placement["preemptibleNodeConfig"] == {
            "preemptionAction": {"type": "TERMINATE", "isPreserveBootVolume": False}
        }
    gpu = run.one(OKE_NODE_POOL, "gpu-nodepool").inputs["nodeConfigDetails"]
    assert "preemptibleNodeConfig" not in gpu["placementConfigs"][0]


def test_ignored_changes_reach_the_engine_as_node_pool_property_paths(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {
        "ignoreChanges": ["size", "kubernetesVersion", "image"]
    }

    run = run_program(oke_example, stack="oke-example")

    assert run.ignore_changes["ci-nodepool"] == [
        "nodeConfigDetails.size",
        "kubernetesVersion",
        "nodeSourceDetails.imageId",
    ]
    assert "gpu-nodepool" not in run.ignore_changes


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        pytest.param(
            {"podNetwork": {"cniType": "OCI_VCN_IP_NATIVE"}},
            "pools.ci.podNetwork: OCI_VCN_IP_NATIVE needs podSubnetIds",
            id="vcn-native-without-pod-subnets",
        ),
        pytest.param(
            {"podNetwork": {"cniType": "OCI_VCN_IP_NATIV", "podSubnetIds": [SUBNET]}},
            "pools.ci.podNetwork.cniType: 'OCI_VCN_IP_NATIV' is not allowed",
            id="cni-typo",
        ),
        pytest.param(
            {"podNetwork": {"cniType": "FLANNEL_OVERLAY", "podSubnetId": [SUBNET]}},
            "pools.ci.podNetwork.podSubnetId: unknown field 'podSubnetId'; did you mean "
            "'podSubnetIds'?",
            id="field-typo",
        ),
        pytest.param(
            {"nsgIds": [SUBNET]},
            "pools.ci.nsgIds[0]: 'ocid1.subnet.oc1.phx.aaaaaaaapods' is not an OCID of the "
            "right kind",
            id="swapped-nsg",
        ),
        pytest.param(
            {"sshPublicKey": "~/.ssh/id_ed25519.pub"},
            "pools.ci.sshPublicKey: not an OpenSSH public key",
            id="ssh-path",
        ),
        pytest.param(
            {"ignoreChanges": ["nodeMetadata"]},
            "pools.ci.ignoreChanges[0]: 'nodeMetadata' is not allowed",
            id="ignore-unknown",
        ),
        pytest.param(
            {"imageFamily": "debian"},
            "pools.ci.imageFamily: 'debian' is not allowed",
            id="image-family",
        ),
    ],
)
def test_wrong_oke_settings_name_the_key_and_the_fix(
    oke_example: dict[str, Any], setting: dict[str, Any], message: str
) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = setting

    lines = _failing(run_program(oke_example, stack="oke-example"))

    assert len(lines) == 1
    assert lines[0].startswith(f"Pulumi.oke-example.yaml: nodegate:oke.{message}"), lines[0]


# --- AKS ---------------------------------------------------------------------------------------


def test_every_aks_enum_the_config_accepts_is_the_sdks() -> None:
    assert set(get_args(AksOsSku)) <= {m.value for m in containerservice.OSSKU}
    assert set(get_args(AksOsType)) <= {m.value for m in containerservice.OSType}
    assert set(get_args(AksMode)) <= {m.value for m in containerservice.AgentPoolMode}


def test_a_windows_sku_makes_a_windows_pool(aks_example: dict[str, Any]) -> None:
    aks_example["nodegate:aks"]["pools"]["batch"] = {
        "osSku": "Windows2022",
        "agentPoolName": "win1",
    }

    run = run_program(aks_example, stack="aks-example")

    assert run.error is None
    inputs = run.one(AKS_AGENT_POOL, "batch-agentpool").inputs
    assert (inputs["osSKU"], inputs["osType"]) == ("Windows2022", "Windows")


def test_linux_pools_leave_os_type_to_aks(aks_example: dict[str, Any]) -> None:
    run = run_program(aks_example, stack="aks-example")

    assert "osType" not in run.one(AKS_AGENT_POOL, "batch-agentpool").inputs


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        pytest.param(
            {"osSku": "Windows2022", "osType": "Linux", "agentPoolName": "win1"},
            "pools.batch.osType: osType Linux does not fit osSku Windows2022",
            id="windows-sku-linux-type",
        ),
        pytest.param(
            {"osSku": "AzureLinux", "osType": "Windows"},
            "pools.batch.osType: osType Windows does not fit osSku AzureLinux",
            id="linux-sku-windows-type",
        ),
        pytest.param(
            {"osSku": "Windows2022", "mode": "System", "agentPoolName": "win1"},
            "pools.batch.mode: AKS runs System pools on Linux only",
            id="windows-system-pool",
        ),
        pytest.param(
            {"osSku": "Windows2022", "agentPoolName": "batchwin"},
            "pools.batch.agentPoolName: 'batchwin' is too long for a Windows agent pool",
            id="windows-name-length",
        ),
        pytest.param(
            {"osSku": "CBLMariner"},
            "pools.batch.osSku: 'CBLMariner' is retired",
            id="retired-sku",
        ),
    ],
)
def test_wrong_aks_os_settings_name_the_key_and_the_fix(
    aks_example: dict[str, Any], setting: dict[str, Any], message: str
) -> None:
    aks_example["nodegate:aks"]["pools"]["batch"].update(setting)

    lines = _failing(run_program(aks_example, stack="aks-example"))

    assert any(
        line.startswith(f"Pulumi.aks-example.yaml: nodegate:aks.{message}") for line in lines
    ), lines
