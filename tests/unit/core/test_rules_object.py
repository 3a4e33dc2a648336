"""A rules file is a NodeRules object (`kubectl apply -f` takes it); the old shape still reads."""

from __future__ import annotations

import pytest

from nodegate.core.rules.loader import check_rules_data, parse_rules
from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_input import Positions, read_yaml

RULE = "{name: r, match: {labels: {a: b}}, taint: {key: k, effect: NoSchedule}, nodeMayLift: true}"
OBJECT = f"""apiVersion: nodegate.dev/v1
kind: NodeRules
metadata: {{name: team-a}}
spec:
  labelTaints:
    - {RULE}
"""
FLAT = f"""apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - {RULE}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as err:
        parse_rules(text, "f.yaml")
    return [str(p) for p in err.value.problems]


def test_an_object_holds_the_same_rules_as_the_old_shape() -> None:
    assert parse_rules(OBJECT) == parse_rules(FLAT)


def test_a_problem_in_the_spec_names_its_line_and_its_path_in_the_object() -> None:
    assert problems(OBJECT.replace("effect: NoSchedule", "effect: Sometimes")) == [
        "f.yaml:6:58: spec.labelTaints[0].taint.effect: "
        "'Sometimes' is not a taint effect: use one of NoSchedule, PreferNoSchedule, NoExecute"
    ]


def test_an_object_without_a_name_is_refused_with_the_fix() -> None:
    [found] = problems(OBJECT.replace("metadata: {name: team-a}", "metadata: {}"))
    assert found.startswith("f.yaml:3:1: metadata: the object has no name; name the object")


def test_a_name_kubernetes_would_refuse_is_refused() -> None:
    [found] = problems(OBJECT.replace("team-a", "Team_A"))
    assert "metadata.name: 'Team_A' is not a DNS subdomain" in found


def test_a_rule_field_beside_the_spec_is_refused_saying_where_it_goes() -> None:
    text = OBJECT + "conditionTaints: []\n"
    [found] = problems(text)
    assert found == (
        "f.yaml:7:1: conditionTaints: 'conditionTaints' is a rule field: move it under spec "
        "(spec.conditionTaints)"
    )


def test_the_status_kubectl_prints_is_read_past() -> None:
    printed = OBJECT + "status:\n  observedGeneration: 3\n  conditions: []\n"
    assert parse_rules(printed) == parse_rules(OBJECT)


def test_an_object_without_spec_holds_no_rules() -> None:
    rules = parse_rules("apiVersion: nodegate.dev/v1\nkind: NodeRules\nmetadata: {name: x}\n")
    assert rules.taint_rules() == ()


def test_only_the_old_shape_carries_the_hint_to_move() -> None:
    assert check_rules_data({"apiVersion": "nodegate.dev/v1", "kind": "NodeRules"}, "f").hints == ()
    flat = check_rules_data(
        {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", "labelTaints": []}, "f"
    )
    [hint] = flat.hints
    assert "under `spec:`" in hint
    assert (
        check_rules_data(
            {
                "apiVersion": "nodegate.dev/v1",
                "kind": "NodeRules",
                "metadata": {"name": "x"},
                "spec": {},
            },
            "f",
        ).hints
        == ()
    )


def test_no_per_pool_limit_is_the_word_none() -> None:
    text = OBJECT + "  evictionBudget: {perPool: none}\n"
    assert parse_rules(text).eviction_budget.per_pool is None


def test_a_word_other_than_none_is_no_limit_and_says_what_is() -> None:
    [found] = problems(OBJECT + "  evictionBudget: {perPool: off}\n")
    assert "'off' is not a limit: write 'none'" in found


def test_a_null_per_pool_limit_in_an_object_warns_that_kubectl_apply_drops_it() -> None:
    text = OBJECT + "  evictionBudget: {perPool: null}\n"
    checked = check_rules_data(*_read(text))
    [warning] = checked.warnings
    assert (warning.path, warning.line) == (("spec", "evictionBudget", "perPool"), 7)
    assert "write perPool: none" in warning.message
    assert checked.rules.eviction_budget.per_pool is None


def _read(text: str) -> tuple[object, str, Positions]:
    tree, positions = read_yaml(text, "f.yaml")
    return tree, "f.yaml", positions
