"""`node.kubernetes.io/out-of-service` (non-graceful node shutdown): allowed in condition rules
only, and only in a rule that requires the node to be really shut down."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import NodeCondition, NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.text.errors import RulesError
from tests.unit.core.builders import NOW, node, rules, seen_when_written

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
OUT_OF_SERVICE = "{key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}"
SHUTDOWN_RULE = f"""\
conditionTaints:
  - name: preempted-spot
    conditions:
      - {{type: Ready, status: "False|Unknown"}}
      - {{type: SpotPreempted, status: "True"}}
    taint: {OUT_OF_SERVICE}
"""
FACTS = PlanFacts(now=NOW)
TAINT = NodeTaint("node.kubernetes.io/out-of-service", "NoExecute", "nodeshutdown")


def problems_of(body: str) -> list[str]:
    with pytest.raises(RulesError) as caught:
        parse_rules(HEADER + body, "rules.yaml")
    return [str(p) for p in caught.value.problems]


def test_a_condition_rule_that_requires_shutdown_may_apply_out_of_service() -> None:
    [rule] = rules(SHUTDOWN_RULE).condition_taints
    assert rule.taint.identity == ("node.kubernetes.io/out-of-service", "NoExecute")


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (
            "labelTaints:\n  - {name: spot, match: {labels: {a: b}}, "
            f"taint: {OUT_OF_SERVICE}, nodeMayLift: true}}\n",
            "rules.yaml:4:43: labelTaints[0].taint",
        ),
        (
            "startupGates:\n  - name: spot\n    match: {labels: {a: b}}\n"
            f"    taint: {OUT_OF_SERVICE}\n    readyWhen: {{annotation: example.com/ready=true}}\n",
            "rules.yaml:6:5: startupGates[0].taint",
        ),
    ],
    ids=["labelTaints", "startupGates"],
)
def test_out_of_service_is_refused_outside_condition_rules(body: str, path: str) -> None:
    assert problems_of(body) == [
        f"{path}: taint key 'node.kubernetes.io/out-of-service' is allowed only in "
        "conditionTaints: only a node's conditions can show that it is really shut down (Ready "
        "not True plus the provider's preemption condition), and on a node that still runs this "
        "taint force-detaches its volumes and deletes its pods"
    ]


@pytest.mark.parametrize(
    "ready",
    ["", '      - {type: Ready, status: "True|False"}\n', '      - {type: Ready, status: ".*"}\n'],
    ids=["no-ready-condition", "status-may-be-true", "any-status"],
)
def test_out_of_service_without_a_ready_guard_is_refused_at_the_rule(ready: str) -> None:
    body = (
        "conditionTaints:\n  - name: preempted-spot\n    conditions:\n"
        f'{ready}      - {{type: SpotPreempted, status: "True"}}\n    taint: {OUT_OF_SERVICE}\n'
    )
    assert problems_of(body) == [
        "rules.yaml:4:5: conditionTaints[0]: a rule that applies node.kubernetes.io/out-of-service "
        "must require the node's Ready condition not True: add {type: Ready, status: "
        '"False|Unknown"} (a status that never matches True); on a node that still runs, this '
        "taint force-detaches its volumes and deletes its pods"
    ]


def test_out_of_service_on_the_ready_guard_alone_is_refused() -> None:
    body = SHUTDOWN_RULE.replace('      - {type: SpotPreempted, status: "True"}\n', "")
    [problem] = problems_of(body)
    assert problem.startswith(
        "rules.yaml:4:5: conditionTaints[0]: a rule that applies node.kubernetes.io/out-of-service "
        "must also require the condition that says the node was shut down"
    )


@pytest.mark.parametrize(
    "key",
    ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready", "node.kubernetes.io/x"],
)
def test_keys_the_lifecycle_controller_and_kubelet_own_stay_refused_in_condition_rules(
    key: str,
) -> None:
    body = SHUTDOWN_RULE.replace("node.kubernetes.io/out-of-service", key)
    assert problems_of(body) == [
        f"rules.yaml:8:5: conditionTaints[0].taint: taint key '{key}' belongs to the node "
        "lifecycle controller and kubelet; nodegate must not add or remove it. Use a key in your "
        "own domain, e.g. 'example.com/dedicated'"
    ]


def shut_down(ready: str) -> tuple[NodeCondition, ...]:
    since = NOW - timedelta(seconds=5)
    return (
        NodeCondition("Ready", ready, last_transition_time=since),
        NodeCondition("SpotPreempted", "True", last_transition_time=since),
    )


def test_a_preempted_node_that_is_still_ready_is_not_taken_out_of_service() -> None:
    assert plan(node(conditions=shut_down("True")), rules(SHUTDOWN_RULE), FACTS).add_taints == ()


def test_a_preempted_node_no_longer_ready_is_taken_out_of_service_with_time_added() -> None:
    [added] = plan(node(conditions=shut_down("Unknown")), rules(SHUTDOWN_RULE), FACTS).add_taints
    assert added.taint == replace(TAINT, time_added="2026-11-21T12:00:00Z")


def test_the_rule_removes_its_out_of_service_taint_once_the_node_is_ready_again() -> None:
    tainted = node(taints=(TAINT,), conditions=shut_down("True"))
    assert [c.taint for c in plan(tainted, rules(SHUTDOWN_RULE), FACTS).remove_taints] == [TAINT]


def test_out_of_service_left_by_a_deleted_rule_or_an_operator_is_never_removed() -> None:
    """Once no current rule names it, the taint may be an operator's: a claim is not enough."""
    claimed = node(
        taints=(TAINT,),
        annotations={OWNED_TAINTS_ANNOTATION: "node.kubernetes.io/out-of-service:NoExecute"},
    )
    history = PlanFacts(now=NOW, previously_owned=frozenset({TAINT.identity}))
    other_rules = rules(
        "labelTaints: [{name: a, match: {labels: {a: b}}, taint: {key: a, effect: NoSchedule}, "
        "nodeMayLift: true}]\n"
    )
    assert plan(claimed, other_rules, history).remove_taints == ()


def test_the_rule_docs_rules_md_shows_is_valid_and_waits_for_its_hold() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "rules.md").read_text()
    section = docs.split("### Out of service", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    [rule] = rules(block).condition_taints
    spot = {"kubernetes.azure.com/scalesetpriority": "spot"}
    events = (
        NodeCondition("VMEventScheduled", "True", last_transition_time=NOW - timedelta(minutes=2)),
        NodeCondition("Ready", "Unknown", last_transition_time=NOW - timedelta(seconds=30)),
    )
    waiting = plan(node(spot, conditions=events), rules(block), seen_when_written(events))
    assert (waiting.add_taints, waiting.recheck_after) == ((), timedelta(seconds=30))
    assert rule.on_recovery == "keep"
