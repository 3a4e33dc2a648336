"""Which taints and labels a pool's nodes are born with (pure derivation from the rules)."""

from __future__ import annotations

import pytest

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.registration import (
    permanent_taints,
    registration_labels,
    registration_taints,
    startup_gate_taints,
)
from nodegate.core.rules.model import LabelSelector, LabelTaintRule, NodeRules, Taint
from tests.unit.bootstrap.support import awkward_rules, example_rules, rules_and_pool


def _flags(taints: tuple[Taint, ...]) -> list[str]:
    return [t.flag() for t in taints]


@pytest.mark.parametrize(
    ("rule_set", "pool", "expected"),
    [
        pytest.param("example", "ci", ["example.com/dedicated=ci:NoSchedule"], id="example-ci"),
        pytest.param(
            "example",
            "gpu",
            [
                "nvidia.com/gpu=present:NoSchedule",
                "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule",
            ],
            id="example-gpu",
        ),
        pytest.param(
            "example",
            "batch",
            [
                "example.com/spot=true:PreferNoSchedule",
                "nvidia.com/gpu=present:NoSchedule",
                "startup-taint.cluster-autoscaler.kubernetes.io/initializing=wait:NoSchedule",
            ],
            id="example-batch",
        ),
        pytest.param(
            "awkward",
            "data-1",
            [
                "capacity.example.com/on-demand=yes:NoSchedule",
                "flags.example.com/empty:NoSchedule",
                "role.example.com/infra=true:NoSchedule",
                "startup.example.com/warm-up:NoExecute",
                "team.a-b.example.com/dedicated=data_eng-1:NoExecute",
                "team.a-b.example.com/dedicated=data_eng-1:NoSchedule",
            ],
            id="awkward-data-1",
        ),
        pytest.param(
            "awkward",
            "edge-1",
            [
                "edge.example.com/zone=z_1.a-b:PreferNoSchedule",
                "startup.example.com/edge_init=wait-1:NoSchedule",
            ],
            id="awkward-edge-1",
        ),
        pytest.param("awkward", "plain", [], id="awkward-plain"),
    ],
)
def test_registration_taints_are_every_matching_label_taint_and_gate_sorted(
    rule_set: str, pool: str, expected: list[str]
) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    assert _flags(registration_taints(rules, node_pool)) == expected


def test_a_label_only_the_reconciler_sets_still_taints_the_node_at_birth() -> None:
    rules, pool = rules_and_pool("awkward", "data-1")
    assert "role.example.com/infra=true:NoSchedule" in _flags(permanent_taints(rules, pool))


def test_the_pool_label_can_select_a_taint() -> None:
    rules, pool = rules_and_pool("awkward", "edge-1")
    assert "edge.example.com/zone=z_1.a-b:PreferNoSchedule" in _flags(permanent_taints(rules, pool))


def test_two_rules_wanting_the_same_taint_give_it_once() -> None:
    rules, pool = rules_and_pool("awkward", "data-1")
    flags = _flags(registration_taints(rules, pool))
    assert flags.count("flags.example.com/empty:NoSchedule") == 1


def test_condition_taints_are_never_registration_taints() -> None:
    rules = awkward_rules()
    for pool in rules.node_pools:
        assert "cond.example.com/disk" not in {t.key for t in registration_taints(rules, pool)}


@pytest.mark.parametrize("pool", ["ci", "gpu", "batch"])
def test_permanent_taints_hold_no_startup_gate(pool: str) -> None:
    rules, node_pool = rules_and_pool("example", pool)
    gates = {g.taint for g in rules.startup_gates}
    assert not gates & set(permanent_taints(rules, node_pool))


def test_startup_gate_taints_are_only_the_matching_gates() -> None:
    rules, pool = rules_and_pool("awkward", "edge-1")
    assert _flags(startup_gate_taints(rules, pool)) == [
        "startup.example.com/edge_init=wait-1:NoSchedule"
    ]


def test_registration_labels_are_pool_labels_and_pool_name_sorted_without_reconciler_labels() -> (
    None
):
    _, pool = rules_and_pool("awkward", "data-1")
    labels = registration_labels(pool)
    assert list(labels.items()) == [
        ("a.b.c/under_score", "x_y-z.1"),
        ("flags.example.com/empty", ""),
        ("nodegate.dev/pool", "data-1"),
        ("team.a-b.example.com/owner", "data_eng-1"),
    ]


def test_a_pool_without_labels_is_still_born_with_its_pool_label() -> None:
    _, pool = rules_and_pool("awkward", "plain")
    assert registration_labels(pool) == {"nodegate.dev/pool": "plain"}


def test_two_values_for_one_key_and_effect_are_refused() -> None:
    # Validation refuses this in a rules file; built directly, rendering must still refuse it.
    rules = example_rules()
    conflicting = LabelTaintRule(
        name="other-value",
        match=LabelSelector(labels={"example.com/dedicated": "ci"}),
        taint=Taint(key="example.com/dedicated", value="other", effect="NoSchedule"),
    )
    broken = NodeRules.model_construct(
        **{**dict(rules), "label_taints": (*rules.label_taints, conflicting)}
    )
    pool = broken.pool("ci")
    assert pool is not None
    with pytest.raises(BootstrapError, match=r"pool 'ci'.*share key and effect"):
        registration_taints(broken, pool)
