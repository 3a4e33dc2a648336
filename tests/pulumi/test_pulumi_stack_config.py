"""Wrong or missing stack config stops the program clearly, naming the key, before declaring."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodegate.bootstrap.oke import user_data_budget
from nodegate.infra.program import BootstrapRenderError, InvalidStackConfigError
from tests.pulumi.harness import (
    OKE_NODE_POOL,
    ProgramRun,
    example_pool,
    example_rules_data,
    run_program,
    write_rules,
)

OKE = "Pulumi.oke-example.yaml: nodegate:oke"
AKS = "Pulumi.aks-example.yaml: nodegate:aks"


def failing(run: ProgramRun) -> list[str]:
    """The lines of a stack config error (and proof that it is one)."""
    assert isinstance(run.error, InvalidStackConfigError), run.error
    return str(run.error).splitlines()


def test_no_rules_source_names_both_keys(oke_example: dict[str, Any]) -> None:
    del oke_example["nodegate:rules"]

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert len(lines) == 1
    assert lines[0].startswith("Pulumi.oke-example.yaml: nodegate: give exactly one of")
    assert "'nodegate:rules'" in lines[0]
    assert "'nodegate:rulesInline'" in lines[0]


def test_rules_given_as_a_mapping_points_to_rules_inline(
    oke_example: dict[str, Any], example_rules_text: str
) -> None:
    oke_example["nodegate:rules"] = yaml.safe_load(example_rules_text)

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        "Pulumi.oke-example.yaml: nodegate:rules: this is the path of a rules file; put the "
        "rules themselves under 'nodegate:rulesInline'"
    ]


def test_rules_pool_without_stack_config_is_named(oke_example: dict[str, Any]) -> None:
    del oke_example["nodegate:skipPools"]

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        "Pulumi.oke-example.yaml: nodegate:aks.pools.batch: rules pool 'batch' (provider aks) "
        "has no stack config: add a 'nodegate:aks' section with 'pools: {batch: {}}' (an empty "
        "entry takes 'nodegate:aks.defaults'), or list 'batch' in nodegate:skipPools if another "
        "stack manages it"
    ]


def test_oke_pool_missing_from_pools_is_named(oke_example: dict[str, Any]) -> None:
    del oke_example["nodegate:oke"]["pools"]["gpu"]

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert len(lines) == 1
    assert lines[0].startswith(f"{OKE}.pools.gpu: rules pool 'gpu' (provider oke) has no stack")


def test_missing_required_setting_names_each_pool_and_key(oke_example: dict[str, Any]) -> None:
    del oke_example["nodegate:oke"]["defaults"]["kubernetesVersion"]

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        f"{OKE}.pools.{pool}.kubernetesVersion: required field 'kubernetesVersion' is missing "
        "(set it here or under nodegate:oke.defaults)"
        for pool in ("ci", "gpu")
    ]


def test_misspelt_key_suggests_the_right_one(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"]["pools"]["ci"] = {"nodeShap": "VM.Standard.E4.Flex"}

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert len(lines) == 1
    assert lines[0].startswith(
        f"{OKE}.pools.ci.nodeShap: unknown field 'nodeShap'; did you mean 'nodeShape'?"
    )


def test_swapped_ocid_is_refused(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"]["clusterId"] = "ocid1.subnet.oc1.phx.aaaaaaaaoops"

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        f"{OKE}.clusterId: 'ocid1.subnet.oc1.phx.aaaaaaaaoops' is not an OCID of the right "
        "kind: expected 'ocid1.cluster.…'"
    ]


def test_stack_config_for_a_pool_not_in_the_rules_is_refused(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"]["pools"]["gpus"] = {}

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        f"{OKE}.pools.gpus: 'gpus' is not a pool in the rules (pools: ci, gpu); did you mean 'gpu'?"
    ]


def test_pool_configured_under_the_wrong_cloud_is_refused(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"]["pools"]["batch"] = {}

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert any(
        line.startswith(f"{OKE}.pools.batch: pool 'batch' has provider aks in the rules")
        for line in lines
    )


def test_structured_key_set_as_a_plain_string_is_refused(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:oke"] = "ocid1.cluster.oc1.phx.aaaaaaaaexamplecluster"

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines[0].startswith(f"{OKE}: must be structured config")


def test_invalid_aks_agent_pool_name_asks_for_agent_pool_name(
    aks_example: dict[str, Any], project: Path
) -> None:
    rules = example_rules_data()
    (batch,) = [p for p in rules["spec"]["nodePools"] if p["name"] == "batch"]
    batch["name"] = "batch-spot-gpus"
    write_rules(project, rules)
    aks_example["nodegate:rules"] = "rules.yaml"
    aks_example["nodegate:aks"]["pools"] = {"batch-spot-gpus": {}}

    lines = failing(run_program(aks_example, stack="aks-example", project_dir=project))

    assert lines == [
        f"{AKS}.pools.batch-spot-gpus.agentPoolName: 'batch-spot-gpus' is not a valid AKS agent "
        "pool name: start with a lowercase letter, then lowercase letters and digits only, at "
        "most 12 characters; set agentPoolName to a valid name"
    ]


def test_count_outside_autoscaling_bounds_is_refused(aks_example: dict[str, Any]) -> None:
    size = example_pool("batch")[1].size
    aks_example["nodegate:aks"]["pools"]["batch"]["autoscaling"] = {
        "minCount": size + 1,
        "maxCount": size + 2,
    }

    lines = failing(run_program(aks_example, stack="aks-example"))

    assert lines == [
        f"{AKS}.pools.batch.count: {size} (from the rules size of pool 'batch') is outside "
        f"autoscaling {size + 1}..{size + 2}; set count inside that range"
    ]


def test_unreadable_user_cloud_init_names_the_key_and_path(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    oke_example["nodegate:oke"]["pools"]["gpu"]["userCloudInit"] = "missing/cloud-init.yaml"

    lines = failing(run_program(oke_example, stack="oke-example", project_dir=project))

    assert lines == [
        f"{OKE}.pools.gpu.userCloudInit: cannot read "
        f"'{project / 'missing/cloud-init.yaml'}': No such file or directory"
    ]


def test_user_data_over_the_oci_limit_stops_the_program(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    noise = base64.b64encode(random.Random(3).randbytes(24_000)).decode()  # gzip cannot help
    (project / "big.sh").write_text(f"#!/bin/bash\n# {noise}\n", encoding="utf-8")
    oke_example["nodegate:oke"]["pools"]["gpu"]["userCloudInit"] = "big.sh"

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert isinstance(run.error, BootstrapRenderError)
    assert str(run.error).startswith("pool 'gpu': user_data is ")
    budget = user_data_budget(*example_pool("gpu"))  # 24,000 less the kubelet-extra-args
    assert f"over the {budget:,} bytes nodegate allows it" in str(run.error)


def _no_rules(c: dict[str, Any]) -> None:
    del c["nodegate:rules"]


def _no_skip(c: dict[str, Any]) -> None:
    del c["nodegate:skipPools"]


def _no_version(c: dict[str, Any]) -> None:
    del c["nodegate:oke"]["defaults"]["kubernetesVersion"]


def _typo(c: dict[str, Any]) -> None:
    c["nodegate:oke"]["pools"]["ci"] = {"nodeShap": "x"}


def _one_bad_pool(c: dict[str, Any]) -> None:
    c["nodegate:oke"]["pools"]["gpu"]["imageId"] = "ocid1.subnet.oc1..wrong"


@pytest.mark.parametrize(
    "breakage",
    [_no_rules, _no_skip, _no_version, _typo, _one_bad_pool],
    ids=["no-rules", "unconfigured-pool", "missing-setting", "typo", "only-gpu-wrong"],
)
def test_config_errors_declare_no_resources(
    oke_example: dict[str, Any], breakage: Callable[[dict[str, Any]], None]
) -> None:
    breakage(oke_example)

    run = run_program(oke_example, stack="oke-example")

    assert isinstance(run.error, InvalidStackConfigError)
    assert run.resources == []


def test_reconciler_section_without_an_image_repository_is_refused(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:reconciler"] = {"namespace": "nodegate-system"}

    lines = failing(run_program(oke_example, stack="oke-example"))

    assert lines == [
        "Pulumi.oke-example.yaml: nodegate:reconciler.image: required field 'image' is missing "
        "(set it here)"
    ]


def test_stack_without_a_reconciler_section_warns_that_nothing_reconciles(
    oke_example: dict[str, Any],
) -> None:
    del oke_example["nodegate:reconciler"]

    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    assert any("no nodegate:reconciler section" in w for w in run.warnings)


def test_null_pool_entry_takes_the_defaults(oke_example: dict[str, Any]) -> None:
    with_empty = run_program(oke_example, stack="oke-example")
    oke_example["nodegate:oke"]["pools"]["ci"] = None

    with_null = run_program(oke_example, stack="oke-example")

    assert with_null.error is None
    assert with_null.one(OKE_NODE_POOL, "ci-nodepool") == with_empty.one(
        OKE_NODE_POOL, "ci-nodepool"
    )
