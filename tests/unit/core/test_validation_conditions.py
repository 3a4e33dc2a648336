"""The condition model's new fields (issue 30): defaultStatus, conditionPolicy, gate conditions,
dryRun; each refusal shown on a small bad file with its exact, located message."""

from __future__ import annotations

import textwrap

import pytest

from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.errors import RulesError

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"


def parsed(body: str) -> NodeRules:
    return parse_rules(HEADER + textwrap.dedent(body), "rules.yaml")


def problems_of(body: str) -> list[str]:
    with pytest.raises(RulesError) as caught:
        parsed(body)
    return [str(p) for p in caught.value.problems]


def condition_rule(conditions: str, extra: str = "") -> str:
    return (
        "conditionTaints:\n  - name: nrc\n    conditions:\n"
        + textwrap.indent(textwrap.dedent(conditions), "      ")
        + "    taint: {key: readiness.k8s.io/net, effect: NoSchedule}\n"
        + textwrap.indent(textwrap.dedent(extra), "    ")
    )


def gate(ready_when: str) -> str:
    return (
        "startupGates:\n  - name: net\n    match: {labels: {pool: gpu}}\n"
        "    taint: {key: readiness.k8s.io/net, effect: NoSchedule}\n    readyWhen:\n"
        + textwrap.indent(textwrap.dedent(ready_when), "      ")
    )


def test_condition_rule_defaults_are_todays_behaviour() -> None:
    rule = parsed(condition_rule("- {type: NetReady, status: 'False'}\n")).condition_taints[0]
    assert (rule.condition_policy, rule.dry_run, rule.conditions[0].default_status) == (
        "allOf",
        False,
        None,
    )


def test_nrc_continuous_shape_is_accepted() -> None:
    rule = parsed(
        condition_rule(
            "- {type: NetReady, status: 'False|Unknown', defaultStatus: Unknown}\n",
            "conditionPolicy: anyOf\ndryRun: true\n",
        )
    ).condition_taints[0]
    assert (rule.condition_policy, rule.dry_run, rule.conditions[0].default_status) == (
        "anyOf",
        True,
        "Unknown",
    )


def test_default_status_with_type_pattern_is_refused() -> None:
    assert problems_of(
        condition_rule("- {typePattern: 'Net.*', status: 'False', defaultStatus: Unknown}\n")
    ) == [
        "rules.yaml:6:9: conditionTaints[0].conditions[0]: defaultStatus needs an exact 'type': "
        "with typePattern there is no one condition whose absence it could stand for; name the "
        "condition type, or drop defaultStatus"
    ]


def test_default_status_outside_the_three_statuses_is_refused() -> None:
    assert problems_of(
        condition_rule("- {type: NetReady, status: 'False', defaultStatus: Missing}\n")
    ) == [
        "rules.yaml:6:43: conditionTaints[0].conditions[0].defaultStatus: 'Missing' is not "
        "allowed: use 'True', 'False' or 'Unknown'"
    ]


def test_unknown_condition_policy_is_refused() -> None:
    assert problems_of(
        condition_rule("- {type: NetReady, status: 'False'}\n", "conditionPolicy: oneOf\n")
    ) == [
        "rules.yaml:8:5: conditionTaints[0].conditionPolicy: 'oneOf' is not allowed: use "
        "'allOf' or 'anyOf'"
    ]


def test_more_than_32_conditions_are_refused() -> None:
    many = "".join(f"- {{type: C{i}, status: 'False'}}\n" for i in range(33))
    assert problems_of(condition_rule(many)) == [
        "rules.yaml:5:5: conditionTaints[0].conditions: 33 conditions: a rule takes 32 at most "
        "(as node-readiness-controller's); split it into several rules"
    ]


def test_exactly_32_conditions_are_accepted() -> None:
    many = "".join(f"- {{type: C{i}, status: 'False'}}\n" for i in range(32))
    assert len(parsed(condition_rule(many)).condition_taints[0].conditions) == 32


def test_condition_type_longer_than_316_is_refused() -> None:
    long_type = "a" * 317
    assert problems_of(condition_rule(f"- {{type: {long_type}, status: 'False'}}\n")) == [
        "rules.yaml:6:10: conditionTaints[0].conditions[0].type: condition type is 317 "
        "characters long; the API server allows 316 at most (metav1.Condition), so no node "
        "reports it: shorten it"
    ]


def test_empty_condition_type_is_refused() -> None:
    assert problems_of(condition_rule("- {type: '', status: 'False'}\n")) == [
        "rules.yaml:6:10: conditionTaints[0].conditions[0].type: a condition type is empty: "
        "name one, e.g. 'Ready'"
    ]


def test_out_of_service_rule_refuses_any_of() -> None:
    body = """\
        conditionTaints:
          - name: shut-down
            conditionPolicy: anyOf
            conditions:
              - {type: Ready, status: "False|Unknown"}
              - {type: example.com/Preempted, status: "True"}
            taint: {key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}
        """
    assert problems_of(body) == [
        "rules.yaml:4:5: conditionTaints[0]: a rule that applies node.kubernetes.io/out-of-service "
        "needs all its conditions (Ready not True and the shutdown evidence): remove "
        "conditionPolicy: anyOf"
    ]


def test_out_of_service_rule_refuses_default_status() -> None:
    body = """\
        conditionTaints:
          - name: shut-down
            conditions:
              - {type: Ready, status: "False|Unknown"}
              - {type: example.com/Preempted, status: "True", defaultStatus: "True"}
            taint: {key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}
        """
    assert problems_of(body) == [
        "rules.yaml:4:5: conditionTaints[0]: a rule that applies node.kubernetes.io/out-of-service "
        "acts on reported conditions only: a node that reports nothing yet is not shown to be "
        "shut down; remove defaultStatus"
    ]


def test_gate_may_lift_on_conditions_alone() -> None:
    ready_when = (
        parsed(gate("conditions:\n  - {type: NetReady, status: 'True'}\nconditionPolicy: anyOf\n"))
        .startup_gates[0]
        .ready_when
    )
    assert (ready_when.pods, ready_when.annotation, ready_when.condition_policy) == (
        None,
        None,
        "anyOf",
    )
    assert [c.type for c in ready_when.conditions] == ["NetReady"]


def test_gate_condition_refuses_default_status() -> None:
    assert problems_of(
        gate("conditions:\n  - {type: NetReady, status: 'True', defaultStatus: 'True'}\n")
    ) == [
        "rules.yaml:9:44: startupGates[0].readyWhen.conditions[0].defaultStatus: a gate must not "
        "lift on a condition the node has not reported, so defaultStatus is not allowed in "
        "readyWhen.conditions (node-readiness-controller refuses it with bootstrap-only too); "
        "remove it"
    ]


def test_gate_condition_refuses_type_pattern() -> None:
    assert problems_of(gate("conditions:\n  - {typePattern: 'Net.*', status: 'True'}\n")) == [
        "rules.yaml:9:12: startupGates[0].readyWhen.conditions[0].typePattern: a gate's condition "
        "needs an exact 'type' (a gate lifts once, on named evidence): replace typePattern with "
        "type"
    ]


def test_gate_condition_policy_without_conditions_is_refused() -> None:
    assert problems_of(gate("annotation: example.com/ready=true\nconditionPolicy: anyOf\n")) == [
        "rules.yaml:7:5: startupGates[0].readyWhen: conditionPolicy combines 'conditions', and "
        "there are none: add conditions or remove conditionPolicy"
    ]


def test_ready_when_with_no_signal_names_every_signal() -> None:
    assert problems_of(gate("conditions: []\n")) == [
        "rules.yaml:7:5: startupGates[0].readyWhen: give 'pods', 'annotation', 'conditions' or "
        "'csiDrivers' (several: any one lifts the gate)"
    ]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            "labelTaints:\n  - name: ci\n"
            '    match: {labels: {node-restriction.kubernetes.io/ci: "true"}}\n'
            "    taint: {key: example.com/ci, effect: NoSchedule}\n    dryRun: true\n",
            id="labelTaints",
        ),
        pytest.param(
            condition_rule("- {type: NetReady, status: 'False'}\n", "dryRun: true\n"),
            id="conditionTaints",
        ),
        pytest.param(
            gate("annotation: example.com/ready=true\n") + "    dryRun: true\n", id="startupGates"
        ),
        pytest.param(
            "persistentLabels:\n  prefixes: [persist.example.com/]\n  dryRun: true\n",
            id="persistentLabels",
        ),
    ],
)
def test_every_rule_kind_takes_dry_run(body: str) -> None:
    rules = parsed(body)
    flags = [r.dry_run for r in rules.label_taints]
    flags += [r.dry_run for r in rules.condition_taints]
    flags += [g.dry_run for g in rules.startup_gates]
    flags += [rules.persistent_labels.dry_run] if rules.persistent_labels else []
    assert flags == [True]


def test_dry_run_must_be_a_boolean() -> None:
    assert problems_of(
        condition_rule("- {type: NetReady, status: 'False'}\n", "dryRun: maybe\n")
    ) == [
        "rules.yaml:8:5: conditionTaints[0].dryRun: Input should be a valid boolean, unable to "
        "interpret input (got 'maybe')"
    ]
