"""The rules in force are every accepted NodeRules object together (`core/rules/merge.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.merge import RulesObject, merge, rules_list_text
from nodegate.core.text.errors import RulesError


def rule(name: str, key: str, effect: str = "NoSchedule") -> dict[str, Any]:
    return {
        "name": name,
        "match": {"labels": {f"example.com/{name}": "yes"}},
        "taint": {"key": key, "effect": effect},
        "nodeMayLift": True,
    }


def obj(
    name: str, *rules: dict[str, Any], generation: int = 1, created: str = "", **spec: Any
) -> RulesObject:
    return RulesObject(
        name,
        generation,
        {"labelTaints": list(rules), **spec},
        created or f"2026-01-01T00:00:0{len(name) % 10}Z",
    )


GPU = obj("gpu", rule("gpu-only", "example.com/gpu"), created="2026-01-01T00:00:01Z")
NET = obj("net", rule("net-only", "example.com/net"), created="2026-01-01T00:00:02Z")


def names(rules: Any) -> list[str]:
    return sorted(r.name for r in rules.taint_rules())


def test_two_teams_objects_are_in_force_together() -> None:
    merged = merge([GPU, NET], {})
    assert names(merged.rules) == ["gpu-only", "net-only"]
    assert {n: v.in_force for n, v in merged.verdicts.items()} == {"gpu": 1, "net": 1}


def test_a_taint_key_claimed_by_a_later_object_is_its_conflict_and_the_earlier_stands() -> None:
    late = obj(
        "late",
        rule("mine", "example.com/gpu"),
        rule("other", "example.com/x"),
        created="2026-02-01T00:00:00Z",
    )
    merged = merge([late, GPU], {})
    assert names(merged.rules) == ["gpu-only"]
    verdict = merged.verdicts["late"]
    assert verdict.accepted and verdict.conflicting and verdict.in_force is None
    assert verdict.conflict == (
        "spec.labelTaints[0].taint: the taint key example.com/gpu belongs to NodeRules gpu; "
        "rename it here, or move the rule into gpu"
    )
    assert not merged.verdicts["gpu"].conflicting


def test_what_is_in_force_stands_against_an_edit_of_an_older_object() -> None:
    """The net object was created after gpu but is in force: gpu's edit claiming net's key
    conflicts, and gpu's version in force stays."""
    edited = obj(
        "gpu",
        rule("gpu-only", "example.com/gpu"),
        rule("grab", "example.com/net"),
        generation=2,
        created=GPU.created,
    )
    merged = merge([edited, NET], {"gpu": GPU, "net": NET})
    assert names(merged.rules) == ["gpu-only", "net-only"]
    assert merged.verdicts["gpu"].conflicting
    assert merged.verdicts["gpu"].in_force == 1


def test_a_refused_generation_keeps_the_last_good_one_in_force() -> None:
    broken = obj(
        "gpu",
        rule("gpu-only", "example.com/gpu", effect="Sometimes"),
        generation=2,
        created=GPU.created,
    )
    merged = merge([broken, NET], {"gpu": GPU, "net": NET})
    assert names(merged.rules) == ["gpu-only", "net-only"]
    verdict = merged.verdicts["gpu"]
    assert not verdict.accepted and verdict.in_force == 1
    assert "spec.labelTaints[0].taint.effect" in verdict.problems[0]
    assert verdict.problems[0].startswith("spec.labelTaints[0].taint.effect: 'Sometimes'")


def test_a_refused_new_object_is_not_in_force_at_all() -> None:
    broken = obj("new", rule("x", "example.com/x", effect="Sometimes"))
    merged = merge([broken, GPU], {"gpu": GPU})
    assert names(merged.rules) == ["gpu-only"]
    assert merged.verdicts["new"].in_force is None


def test_a_deleted_object_takes_only_its_own_rules() -> None:
    merged = merge([NET], {"gpu": GPU, "net": NET})
    assert names(merged.rules) == ["net-only"]
    assert [p.name for p in merged.parts] == ["net"]


def test_a_cluster_wide_setting_belongs_to_one_object() -> None:
    budget = {"window": "5m", "cluster": {"maxShare": 0.1}}
    first = obj("first", created="2026-01-01T00:00:01Z", evictionBudget=budget)
    second = obj("second", created="2026-01-01T00:00:02Z", evictionBudget="unlimited")
    merged = merge([first, second], {})
    assert merged.rules.eviction_budget.cluster is not None
    assert (
        "the setting evictionBudget belongs to NodeRules first"
        in merged.verdicts["second"].conflict
    )


def test_the_same_rule_name_in_two_objects_is_a_conflict() -> None:
    twin = obj("twin", rule("gpu-only", "example.com/other"), created="2026-03-01T00:00:00Z")
    assert (
        "the rule name 'gpu-only' belongs to NodeRules gpu"
        in merge([GPU, twin], {}).verdicts["twin"].conflict
    )


def test_the_rules_in_force_read_back_from_their_text() -> None:
    merged = merge([GPU, NET], {})
    assert parse_rules(merged.text, "record") == merged.rules


def test_a_list_whose_objects_conflict_is_refused_naming_the_later_item() -> None:
    late = obj("late", rule("mine", "example.com/gpu"), created="2026-02-01T00:00:00Z")
    text = rules_list_text([GPU, late])
    with pytest.raises(RulesError) as err:
        parse_rules(text, "list.yaml")
    [problem] = err.value.problems
    assert (problem.path, problem.line) == (("items", 1), 19)
    assert "belongs to NodeRules gpu" in problem.message


def test_a_taint_moved_from_one_object_to_another_in_one_merge_is_never_unowned() -> None:
    """The younger object gives up a key and the older takes it, both seen at once: the older
    one's claim waits for the younger one's release in the same merge, not for the next."""
    older = obj("older", rule("a-y", "example.com/y"), created="2026-01-01T00:00:01Z")
    younger = obj("younger", rule("b-x", "example.com/x"), created="2026-01-01T00:00:02Z")
    standing = {"older": older, "younger": younger}
    took = obj(
        "older",
        rule("a-y", "example.com/y"),
        rule("a-x", "example.com/x"),
        generation=2,
        created=older.created,
    )
    gave = obj("younger", generation=2, created=younger.created)
    merged = merge([took, gave], standing)
    assert names(merged.rules) == ["a-x", "a-y"]
    assert not merged.verdicts["older"].conflicting


def test_a_gates_former_key_is_a_claim_on_that_taint_key() -> None:
    """A gate lifts the taints of its former keys: naming another object's key there would
    lift that object's taint."""
    gate = {
        "name": "warm",
        "match": {"labels": {"pool": "gpu"}},
        "taint": {"key": "example.com/warming", "effect": "NoSchedule"},
        "formerKeys": ["example.com/gpu"],
        "readyWhen": {"annotation": "example.com/ready=true"},
    }
    thief = RulesObject("thief", 1, {"startupGates": [gate]}, "2026-05-01T00:00:00Z")
    verdict = merge([GPU, thief], {}).verdicts["thief"]
    assert (
        "spec.startupGates[0].formerKeys[0]: the taint key example.com/gpu belongs to"
        in verdict.conflict
    )
