"""OKE node pool metadata: the registration taints where cluster-autoscaler looks for them."""

from __future__ import annotations

import json
import re

import pytest

from nodegate.bootstrap.kubelet_flags import parse_kubelet_flags
from nodegate.bootstrap.oke import kubelet_extra_args, oke_node_metadata
from nodegate.bootstrap.registration import registration_taints
from tests.unit.bootstrap.support import check_golden, pool_params, rules_and_pool

OKE_POOLS = pool_params("oke")

CA_REGISTERED_TAINTS = re.compile(r"-?-register-with-taints[= ](\S*)")
"""The expression cluster-autoscaler's OCI provider applies to the metadata value
(`cloudprovider/oci/nodepools/registered_taints.go`): the first match's value, up to a blank."""


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_oke_metadata_matches_golden(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    rendered = json.dumps(oke_node_metadata(rules, node_pool), indent=2) + "\n"
    check_golden(f"{rule_set}/{pool}.oke-metadata.json", rendered)


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_the_autoscaler_reads_exactly_the_registration_taints(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    value = oke_node_metadata(rules, node_pool)["kubelet-extra-args"]
    found = CA_REGISTERED_TAINTS.search(value)
    read = found.group(1).split(",") if found else []
    assert read == [t.flag() for t in registration_taints(rules, node_pool)]


@pytest.mark.parametrize(("rule_set", "pool"), OKE_POOLS)
def test_metadata_and_cloud_init_carry_the_same_flags(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    metadata = oke_node_metadata(rules, node_pool)["kubelet-extra-args"]
    assert metadata == kubelet_extra_args(rules, node_pool)
    assert parse_kubelet_flags(metadata)[0] == registration_taints(rules, node_pool)


def test_an_autoscaled_pools_gate_reaches_the_metadata_with_its_startup_prefix() -> None:
    rules, pool = rules_and_pool("autoscaled", "gpu-oke")
    assert (
        "startup-taint.cluster-autoscaler.kubernetes.io/gpu-init=wait:NoSchedule"
        in oke_node_metadata(rules, pool)["kubelet-extra-args"]
    )
