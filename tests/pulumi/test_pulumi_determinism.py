"""A rules edit that does not change a pool's bootstrap leaves that pool's inputs byte-identical.

Pulumi diffs a resource by its inputs, so byte-identical inputs mean no update for that pool:
editing the rules for one pool never rolls another.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.pulumi.harness import (
    AKS_AGENT_POOL,
    OKE_NODE_POOL,
    ProgramRun,
    example_rules_data,
    run_program,
    write_rules,
)


def edited_run(
    config: dict[str, Any], stack: str, project: Path, edit: Callable[[dict[str, Any]], None]
) -> ProgramRun:
    """Run `config` against the example rules after `edit` (applied to them as data: the
    NodeRules object's spec, where the rules are)."""
    document = example_rules_data()
    edit(document["spec"])
    write_rules(project, document)
    config["nodegate:rules"] = "rules.yaml"
    return run_program(config, stack=stack, project_dir=project)


def inputs_of(run: ProgramRun, typ: str, name: str) -> bytes:
    assert run.error is None, run.error
    return run.one(typ, name).canonical()


def pool_of(rules: dict[str, Any], name: str) -> dict[str, Any]:
    (pool,) = [p for p in rules["nodePools"] if p["name"] == name]
    assert isinstance(pool, dict)
    return pool


def taint_only_gpu(rules: dict[str, Any]) -> None:
    """A new label taint keyed on a label the gpu pool has and the ci pool does not."""
    ci, gpu = pool_of(rules, "ci"), pool_of(rules, "gpu")
    key, value = next((k, v) for k, v in gpu["labels"].items() if ci["labels"].get(k) != v)
    rules["labelTaints"].append(
        {
            "name": "only-gpu",
            "match": {"labels": {key: value}},
            "taint": {"key": "example.com/only-gpu", "value": "yes", "effect": "NoSchedule"},
            "nodeMayLift": True,
        }
    )


def test_same_stack_twice_gives_byte_identical_inputs(oke_example: dict[str, Any]) -> None:
    first = run_program(oke_example, stack="oke-example")
    second = run_program(oke_example, stack="oke-example")

    assert {r.name: r.canonical() for r in first.resources} == {
        r.name: r.canonical() for r in second.resources
    }


def test_new_label_taint_for_gpu_leaves_ci_inputs_byte_identical(
    oke_example: dict[str, Any], project: Path
) -> None:
    before = run_program(oke_example, stack="oke-example")

    after = edited_run(oke_example, "oke-example", project, taint_only_gpu)

    assert inputs_of(after, OKE_NODE_POOL, "ci-nodepool") == inputs_of(
        before, OKE_NODE_POOL, "ci-nodepool"
    )


def test_new_label_taint_for_gpu_changes_gpu_user_data(
    oke_example: dict[str, Any], project: Path
) -> None:
    before = run_program(oke_example, stack="oke-example")

    after = edited_run(oke_example, "oke-example", project, taint_only_gpu)

    assert inputs_of(after, OKE_NODE_POOL, "gpu-nodepool") != inputs_of(
        before, OKE_NODE_POOL, "gpu-nodepool"
    )


def test_reconciler_only_rule_edits_leave_every_pool_byte_identical(
    oke_example: dict[str, Any], project: Path
) -> None:
    def edit(rules: dict[str, Any]) -> None:
        assert rules["conditionTaints"], "the example rules need a condition taint to edit"
        rules["conditionTaints"][0]["for"] = "17m"
        rules["conditionTaints"][0]["onRecovery"] = "keep"

    before = run_program(oke_example, stack="oke-example")

    after = edited_run(oke_example, "oke-example", project, edit)

    for name in ("ci-nodepool", "gpu-nodepool"):
        assert inputs_of(after, OKE_NODE_POOL, name) == inputs_of(before, OKE_NODE_POOL, name)


def test_oke_pool_edit_leaves_the_aks_pool_byte_identical(
    aks_example: dict[str, Any], project: Path
) -> None:
    def edit(rules: dict[str, Any]) -> None:
        pool_of(rules, "ci")["labels"]["example.com/tier"] = "gold"

    before = run_program(aks_example, stack="aks-example")

    after = edited_run(aks_example, "aks-example", project, edit)

    assert inputs_of(after, AKS_AGENT_POOL, "batch-agentpool") == inputs_of(
        before, AKS_AGENT_POOL, "batch-agentpool"
    )
