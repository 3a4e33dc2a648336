"""The gate census: what the autoscaler-threshold alerts read (gated nodes per gate and pool,
the oldest one's age, the gated share of all nodes)."""

from __future__ import annotations

from datetime import timedelta

from nodegate.core.reports.gate_census import AGE_BUCKETS, GATE_AGE_WARNING, GatedGroup, gate_census
from nodegate.core.rules.autoscalers import CA_STARTUP_WINDOW
from nodegate.core.rules.node import NodeState, NodeTaint
from tests.unit.core.builders import NOW, node, rules

RULES = rules(
    """
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup-taint.cluster-autoscaler.kubernetes.io/warmup, value: wait,
                effect: NoSchedule}
        formerKeys: [startup.k8s.io/initializing]
        readyWhen: {annotation: example.com/ready=true}
      - name: drivers
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/drivers, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/drivers=true}
    """
)
WARMUP = NodeTaint("startup-taint.cluster-autoscaler.kubernetes.io/warmup", "NoSchedule", "wait")
FORMER = NodeTaint("startup.k8s.io/initializing", "NoSchedule", "wait")
DRIVERS = NodeTaint("startup.example.com/drivers", "NoSchedule", "wait")
GPU = {"nodegate.dev/pool": "gpu"}


def test_gated_nodes_are_counted_per_gate_and_pool_with_the_oldest_age() -> None:
    nodes = [
        node(GPU, taints=(WARMUP,), created=NOW - timedelta(minutes=12)),
        node(GPU, taints=(WARMUP,), created=NOW - timedelta(minutes=2)),
        node({"nodegate.dev/pool": "cpu"}, taints=(WARMUP,), created=NOW - timedelta(minutes=1)),
    ]

    census = gate_census(nodes, RULES, NOW)

    assert census.groups == (
        GatedGroup("warmup", "cpu", 1, 60.0),
        GatedGroup("warmup", "gpu", 2, 720.0),
    )


def test_a_node_born_under_a_former_key_is_gated_too() -> None:
    census = gate_census([node(GPU, taints=(FORMER,))], RULES, NOW)

    assert census.groups == (GatedGroup("warmup", "gpu", 1, 0.0),)


def test_the_share_counts_a_node_held_by_two_gates_once() -> None:
    nodes = [node(GPU, taints=(WARMUP, DRIVERS)), node(GPU), node(GPU), node(GPU)]

    census = gate_census(nodes, RULES, NOW)

    assert (census.gated_nodes, census.all_nodes, census.gated_share) == (1, 4, 0.25)
    assert sum(group.nodes for group in census.groups) == 2


def test_a_taint_with_the_gates_key_but_another_effect_is_not_the_gate() -> None:
    other = NodeTaint(WARMUP.key, "NoExecute", "wait")

    assert gate_census([node(GPU, taints=(other,))], RULES, NOW).gated_nodes == 0


def test_no_nodes_is_a_share_of_zero() -> None:
    assert gate_census([], RULES, NOW).gated_share == 0.0


def _minutes_old(minutes: float, *taints: NodeTaint) -> NodeState:
    return node(GPU, taints=taints, created=NOW - timedelta(minutes=minutes))


def test_gated_nodes_are_bucketed_by_age_each_once_at_most_each_bound() -> None:
    nodes = [
        _minutes_old(0.5, WARMUP, DRIVERS),  # two gates, one node
        _minutes_old(10, WARMUP),  # exactly at the 600 s bound: counted in it
        _minutes_old(12, WARMUP),
        _minutes_old(40),  # not gated
    ]

    census = gate_census(nodes, RULES, NOW)

    assert dict(zip(AGE_BUCKETS, census.gated_by_age, strict=True)) == {
        60.0: 1,
        300.0: 1,
        600.0: 2,
        900.0: 3,
        1800.0: 3,
        3600.0: 3,
    }
    assert census.gated_nodes == 3
    assert census.gated_age_sum == 30 + 600 + 720


def test_the_age_buckets_hold_the_alerts_warning_age_and_the_autoscalers_window() -> None:
    assert GATE_AGE_WARNING.total_seconds() in AGE_BUCKETS
    assert CA_STARTUP_WINDOW.total_seconds() in AGE_BUCKETS
    assert GATE_AGE_WARNING < CA_STARTUP_WINDOW


def test_a_node_created_in_the_future_is_of_age_zero() -> None:
    census = gate_census([_minutes_old(-1, WARMUP)], RULES, NOW)

    assert census.gated_by_age[0] == 1
    assert census.groups[0].oldest_seconds == 0.0
