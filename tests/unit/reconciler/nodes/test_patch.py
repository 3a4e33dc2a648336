"""The single write the reconciler sends for a plan."""

from __future__ import annotations

from typing import Any

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.nodes.decide.patch import describe, merge_patch
from nodegate.reconciler.nodes.node_view import slim_node
from tests.unit.core.builders import NOW, rules

RULES = rules(
    """\
    labelTaints:
      - name: ci
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        nodeMayLift: true
    """
)


def raw_node(
    labels: dict[str, str], taints: list[dict[str, Any]], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "n1",
            "resourceVersion": "42",
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"taints": taints},
    }


def patch_for(raw: dict[str, Any]) -> dict[str, Any]:
    return merge_patch(
        slim_node(raw, lambda _key: True), plan(NodeState.from_k8s(raw), RULES, PlanFacts(now=NOW))
    )


def test_write_carries_the_resource_version_that_was_read() -> None:
    body = patch_for(raw_node({"example.com/dedicated": "ci"}, []))
    assert body["metadata"]["resourceVersion"] == "42"


def test_foreign_taints_are_copied_exactly_as_read() -> None:
    foreign = {
        "key": "node.kubernetes.io/unreachable",
        "effect": "NoExecute",
        "timeAdded": "2026-11-21T10:00:00Z",
    }
    body = patch_for(raw_node({"example.com/dedicated": "ci"}, [foreign]))
    assert body["spec"]["taints"] == [
        foreign,
        {"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"},
    ]


def test_removing_the_last_owned_taint_drops_the_ownership_annotation() -> None:
    owned = {"nodegate.dev/owned-taints": "example.com/dedicated:NoSchedule"}
    raw = raw_node(
        {}, [{"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"}], owned
    )
    body = patch_for(raw)
    assert body["spec"]["taints"] == []
    assert body["metadata"]["annotations"] == {"nodegate.dev/owned-taints": None}


def test_adoption_only_writes_the_annotation_and_leaves_taints_alone() -> None:
    raw = raw_node(
        {"example.com/dedicated": "ci"},
        [{"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"}],
    )
    body = patch_for(raw)
    assert "spec" not in body
    assert body["metadata"]["annotations"] == {
        "nodegate.dev/owned-taints": "example.com/dedicated:NoSchedule"
    }


def test_description_names_the_rule_and_the_reason() -> None:
    raw = raw_node({"example.com/dedicated": "ci"}, [])
    text = describe(plan(NodeState.from_k8s(raw), RULES, PlanFacts(now=NOW)))
    assert text == "added taint example.com/dedicated=ci:NoSchedule (rule ci: node labels match)"


def test_gate_records_are_written_and_removed_in_the_same_write() -> None:
    from nodegate.core.decisions.plan import NodePlan

    gate_plan = NodePlan(
        "n1",
        set_annotations=(
            ("completed.gate.nodegate.dev/warmup", "2026-11-21T12:00:00Z"),
            ("regated.gate.nodegate.dev/warmup", None),
        ),
    )
    patch = merge_patch(slim_node(raw_node({}, []), lambda _key: True), gate_plan)
    assert patch["metadata"]["annotations"] == {
        "completed.gate.nodegate.dev/warmup": "2026-11-21T12:00:00Z",
        "regated.gate.nodegate.dev/warmup": None,
    }


def test_description_names_an_annotation_written_for_other_tools_but_not_nodegates_records() -> (
    None
):
    """nidhogg's first-ready annotation is news (its own Event said `FirstTimeReady`); the
    gate records nodegate keeps for itself are not."""
    from nodegate.core.decisions.plan import NodePlan

    written = NodePlan(
        "n1",
        set_annotations=(
            ("nidhogg.uswitch.com/ready-since", "2026-11-21T12:00:00Z"),
            ("completed.gate.nodegate.dev/warmup", "2026-11-21T12:00:00Z"),
        ),
    )
    assert (
        describe(written) == "set annotation nidhogg.uswitch.com/ready-since=2026-11-21T12:00:00Z"
    )
