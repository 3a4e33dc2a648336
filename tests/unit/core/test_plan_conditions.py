"""Condition semantics of issue 30, planned: defaultStatus and conditionPolicy on condition
taint rules (node-readiness-controller's continuous mode), and gates that lift on conditions
(its bootstrap-only mode)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from nodegate.core.decisions.plan import plan, relevant_view
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeTaint, format_time
from nodegate.core.rules.node_marks import GATE_COMPLETED, GATE_REBOOTED_AFTER
from tests.unit.core.builders import NOW, node, rules, seen_when_written

FACTS = PlanFacts(now=NOW)
NET = NodeTaint("readiness.k8s.io/network", "NoSchedule")

CONTINUOUS = rules(
    """\
    conditionTaints:
      - name: network
        conditionPolicy: anyOf
        conditions:
          - {type: NetworkReady, status: "False|Unknown", defaultStatus: Unknown}
          - {type: StorageReady, status: "False|Unknown", defaultStatus: Unknown}
        taint: {key: readiness.k8s.io/network, effect: NoSchedule}
    """
)


def cond(kind: str, status: str, ago: timedelta = timedelta(seconds=30)) -> NodeCondition:
    return NodeCondition(kind, status, "", NOW - ago)


def added(taint_rules: NodeRules, conditions: tuple[NodeCondition, ...] = ()) -> list[NodeTaint]:
    facts = seen_when_written(conditions)
    return [c.taint for c in plan(node(conditions=conditions), taint_rules, facts).add_taints]


def test_new_node_reporting_nothing_is_tainted_by_default_status() -> None:
    assert added(CONTINUOUS) == [NET]


def test_taint_says_which_conditions_were_assumed() -> None:
    decision = next(d for d in plan(node(), CONTINUOUS, FACTS).decisions if d.rule == "network")
    assert decision.why == (
        "a condition matches (not reported, counted as defaultStatus: NetworkReady, StorageReady)"
    )


def test_any_of_taints_while_one_required_condition_is_missing() -> None:
    assert added(CONTINUOUS, (cond("NetworkReady", "True"),)) == [NET]


def test_any_of_untaints_once_every_condition_holds() -> None:
    healthy = node(
        taints=(NET,),
        conditions=(cond("NetworkReady", "True"), cond("StorageReady", "True")),
    )
    assert [c.taint for c in plan(healthy, CONTINUOUS, FACTS).remove_taints] == [NET]


def test_reported_condition_wins_over_its_default_status() -> None:
    only_default = rules(
        """\
        conditionTaints:
          - name: network
            conditions:
              - {type: NetworkReady, status: "False|Unknown", defaultStatus: Unknown}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    assert added(only_default, (cond("NetworkReady", "True"),)) == []


def test_without_default_status_an_unreported_condition_never_matches() -> None:
    no_default = rules(
        """\
        conditionTaints:
          - name: network
            conditions:
              - {type: NetworkReady, status: "False|Unknown"}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    assert added(no_default) == []


def test_default_status_is_matched_with_an_empty_reason() -> None:
    by_reason = rules(
        """\
        conditionTaints:
          - name: network
            conditions:
              - {type: NetworkReady, status: "Unknown", reason: "CNIDown", defaultStatus: Unknown}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    assert added(by_reason) == []


def test_all_of_needs_every_condition() -> None:
    all_of = rules(
        """\
        conditionTaints:
          - name: network
            conditions:
              - {type: NetworkReady, status: "False"}
              - {type: StorageReady, status: "False"}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    assert added(all_of, (cond("NetworkReady", "False"),)) == []
    assert added(all_of, (cond("NetworkReady", "False"), cond("StorageReady", "False"))) == [NET]


def test_any_of_hold_counts_from_the_earliest_matching_condition() -> None:
    held = rules(
        """\
        conditionTaints:
          - name: network
            conditionPolicy: anyOf
            for: 60s
            conditions:
              - {type: NetworkReady, status: "False"}
              - {type: StorageReady, status: "False"}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    early = (
        cond("NetworkReady", "False", timedelta(seconds=90)),
        cond("StorageReady", "False", timedelta(seconds=10)),
    )
    assert added(held, early) == [NET]


END_OF_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=NOW.tzinfo)


def test_a_condition_dated_at_the_end_of_time_holds_for_as_if_it_changed_now() -> None:
    """A node may write any lastTransitionTime: one at 9999-12-31 must not overflow the `for`
    arithmetic (the node's whole plan failed, and with it every other taint it should get);
    a time ahead of now counts as now."""
    held = rules(
        """\
        conditionTaints:
          - name: network
            for: 60s
            conditions:
              - {type: NetworkReady, status: "False"}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        labelTaints:
          - name: tenant
            match: {labels: {node-restriction.kubernetes.io/tenant: payments}}
            taint: {key: example.com/tenant, value: payments, effect: NoSchedule}
        """
    )
    forged = NodeCondition("NetworkReady", "False", "", END_OF_TIME)
    labels = {"node-restriction.kubernetes.io/tenant": "payments"}
    result = plan(node(labels, conditions=(forged,)), held, FACTS)
    assert [c.taint.key for c in result.add_taints] == ["example.com/tenant"]
    assert result.recheck_after == timedelta(seconds=60)


def test_all_of_hold_counts_from_the_latest_matching_condition() -> None:
    held = rules(
        """\
        conditionTaints:
          - name: network
            for: 60s
            conditions:
              - {type: NetworkReady, status: "False"}
              - {type: StorageReady, status: "False"}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    late = (
        cond("NetworkReady", "False", timedelta(seconds=90)),
        cond("StorageReady", "False", timedelta(seconds=10)),
    )
    result = plan(node(conditions=late), held, seen_when_written(late))
    assert (result.add_taints, result.recheck_after) == ((), timedelta(seconds=50))


def test_an_unreported_condition_holds_since_the_node_was_created() -> None:
    held = rules(
        """\
        conditionTaints:
          - name: network
            for: 60s
            conditions:
              - {type: NetworkReady, status: "Unknown", defaultStatus: Unknown}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    young = node(created=NOW - timedelta(seconds=20))
    assert plan(young, held, FACTS).recheck_after == timedelta(seconds=40)


GATE = NodeTaint("readiness.k8s.io/cni", "NoSchedule")


def gate_rules(policy: str = "allOf", extra: str = "") -> NodeRules:
    return rules(
        f"""\
        startupGates:
          - name: cni
            match: {{labels: {{pool: gpu}}}}
            taint: {{key: readiness.k8s.io/cni, effect: NoSchedule}}
            readyWhen:
              conditionPolicy: {policy}
              conditions:
                - {{type: NetworkReady, status: "True"}}
                - {{type: StorageReady, status: "True"}}
        {extra}"""
    )


def lifted(
    gate: NodeRules,
    conditions: tuple[NodeCondition, ...],
    annotations: dict[str, str] | None = None,
    created: datetime = NOW,
) -> tuple[str, ...]:
    gated = node(
        {"pool": "gpu"},
        taints=(GATE,),
        conditions=conditions,
        annotations=annotations,
        created=created,
    )
    return plan(gated, gate, seen_when_written(conditions)).lifted_gates


def test_condition_gate_stays_while_a_condition_is_false() -> None:
    assert lifted(gate_rules(), (cond("NetworkReady", "True"), cond("StorageReady", "False"))) == ()


def test_condition_gate_stays_while_a_condition_is_not_reported() -> None:
    assert lifted(gate_rules(), (cond("NetworkReady", "True"),)) == ()


def test_condition_gate_lifts_once_all_conditions_hold() -> None:
    both = (cond("NetworkReady", "True"), cond("StorageReady", "True"))
    assert lifted(gate_rules(), both) == ("cni",)


def test_any_of_condition_gate_lifts_on_one_condition() -> None:
    assert lifted(gate_rules("anyOf"), (cond("NetworkReady", "True"),)) == ("cni",)


def test_condition_gate_lift_is_recorded_as_every_lift() -> None:
    both = (cond("NetworkReady", "True"), cond("StorageReady", "True"))
    gated = node({"pool": "gpu"}, taints=(GATE,), conditions=both)
    result = plan(gated, gate_rules(), FACTS)
    assert (GATE_COMPLETED + "cni", format_time(NOW)) in result.set_annotations
    assert next(d.why for d in result.decisions if d.rule == "cni") == (
        "conditions NetworkReady=True, StorageReady=True"
    )


def test_condition_gate_respects_min_hold() -> None:
    held = gate_rules("anyOf", "    minHold: 60s\n")
    young = NOW - timedelta(seconds=10)
    assert lifted(held, (cond("NetworkReady", "True"),), created=young) == ()


def test_condition_gate_never_comes_back_when_the_condition_turns_false() -> None:
    done = node(
        {"pool": "gpu"},
        conditions=(cond("NetworkReady", "False"),),
        annotations={GATE_COMPLETED + "cni": format_time(NOW)},
    )
    assert plan(done, gate_rules("anyOf"), FACTS).add_taints == ()


@pytest.mark.parametrize(
    ("changed_ago", "lifts"),
    [
        pytest.param(timedelta(seconds=100), False, id="status-from-the-previous-boot"),
        pytest.param(timedelta(seconds=10), True, id="status-taken-after-the-reboot"),
    ],
)
def test_after_a_re_gate_only_a_condition_of_this_boot_lifts(
    changed_ago: timedelta, lifts: bool
) -> None:
    rebooted = {GATE_REBOOTED_AFTER + "cni": format_time(NOW - timedelta(seconds=60))}
    result = lifted(
        gate_rules("anyOf"), (cond("NetworkReady", "True", changed_ago),), annotations=rebooted
    )
    assert result == (("cni",) if lifts else ())


def test_condition_older_than_the_node_still_lifts_its_gate() -> None:
    # The node's clock may be behind the API server's: its transition time is not checked
    # against the Node's creation, or a skewed node would stay gated for ever.
    skewed = (cond("NetworkReady", "True", timedelta(hours=1)),)
    assert lifted(gate_rules("anyOf"), skewed) == ("cni",)


def test_a_node_reporting_one_condition_type_twice_is_still_planned() -> None:
    """A kubelet may write duplicate conditions, one without a time: nothing fails to sort."""
    twice = node(conditions=(cond("NetworkReady", "False"), NodeCondition("NetworkReady", "False")))
    assert relevant_view(twice, CONTINUOUS) != relevant_view(node(), CONTINUOUS)
