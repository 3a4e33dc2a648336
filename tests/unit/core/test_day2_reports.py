"""The pure halves of the day-2 commands: the status record's format, `plan`'s rules change
and its exit codes, `status`'s report and `explain`'s "waiting for" lines."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
import yaml

from nodegate.core.decisions.eviction_budget import SHARED, Grant, Place, waiting_rules
from nodegate.core.decisions.node_decision import decide
from nodegate.core.decisions.plan import (
    plan,
)
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.status_record import (
    HeldUpdate,
    ReconcilerStatus,
    StatusRecordError,
    decode_status,
    encode_status,
)
from nodegate.core.reports.cluster_status import (
    EventView,
    LeaseView,
    RecordsView,
    RulesSourceView,
    StatusReport,
    age,
    status_report,
)
from nodegate.core.reports.node_waits import InitPod, NodeContext, recorded_budget, waits
from nodegate.core.reports.rules_change import CHANGES, HELD, NO_CHANGE, rules_change
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint, format_time
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.text.yaml_output import dump_all
from tests.unit.core.builders import NOW, node, rules

TEAM = """\
labelTaints:
  - name: team
    match: {labels: {example.com/team: a}}
    taint: {key: example.com/team, value: a, effect: NoSchedule}
    nodeMayLift: true
"""
ALSO = """\
  - name: also
    match: {labels: {example.com/team: a}}
    taint: {key: example.com/also, value: x, effect: NoSchedule}
    nodeMayLift: true
"""
GATE = """\
startupGates:
  - name: warmup
    match: {labels: {example.com/gpu: "true"}}
    taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
    readyWhen:
      pods: {namespace: kube-system, selector: {app: init}}
    timeout: 30m
"""
BROKEN = """\
conditionTaints:
  - name: broken
    conditions: [{type: Broken, status: "True"}]
    taint: {key: example.com/broken, value: "true", effect: NoExecute}
"""
TEAM_TAINT = NodeTaint("example.com/team", "NoSchedule", "a")
GATE_TAINT = NodeTaint("startup.example.com/init", "NoSchedule", "wait")


def named(name: str, state: NodeState) -> NodeState:
    return replace(state, name=name)


def team_node(name: str, tainted: bool = True) -> NodeState:
    """A node of team a; `tainted`: as the reconciler leaves it (taint and ownership recorded)."""
    taints = (TEAM_TAINT,) if tainted else ()
    owned = {OWNED_TAINTS_ANNOTATION: "example.com/team:NoSchedule"} if tainted else {}
    labels = {"example.com/team": "a", "nodegate.dev/pool": "ci"}
    return named(name, node(labels, taints, annotations=owned))


def facts() -> PlanFacts:
    """The taint history says the team rule's taint was owned (so its removal may clean up)."""
    return PlanFacts(now=NOW, previously_owned=frozenset({TEAM_TAINT.identity}))


# --- the status record --------------------------------------------------------------------------


def test_the_status_record_reads_back_what_was_written() -> None:
    status = ReconcilerStatus(
        "replica-1",
        "0.1.0",
        3,
        "abcd",
        "configmap x",
        NOW,
        HeldUpdate("ef01", "it would remove taints", "configmap x", NOW),
        NOW,
        0.25,
    )
    assert decode_status(encode_status(status, "rules text")) == (status, "rules text")


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"status.json": "{"},
        {"status.json": '{"version": 9}'},
        {"status.json": '{"version": 1}'},
    ],
    ids=["no-key", "not-json", "newer-format", "fields-missing"],
)
def test_an_unreadable_status_record_is_an_error_saying_why(data: dict[str, str]) -> None:
    with pytest.raises(StatusRecordError):
        decode_status(data)


# --- plan: the rules change ----------------------------------------------------------------------


def test_the_rules_in_force_change_nothing_and_exit_0() -> None:
    in_force = rules(TEAM)
    change = rules_change([(team_node("n1"), facts())], in_force, in_force, 0.5)
    assert (change.verdict, change.exit_code, change.changed) == ("no change", NO_CHANGE, ())


@pytest.mark.parametrize("new", [TEAM, GATE])
def test_a_cluster_without_nodes_has_nothing_to_change_or_hold_and_exits_0(new: str) -> None:
    """0 nodes: no share to divide by, nothing to remove."""
    change = rules_change([], rules(new), rules(TEAM), 0.0)
    assert (change.verdict, change.exit_code, change.nodes, change.hold) == (
        "no change",
        NO_CHANGE,
        0,
        None,
    )


def test_rules_emptied_are_held_even_with_no_node_to_untaint() -> None:
    """Nodes born later with a gate would keep it for ever: a truncated rules ConfigMap, or
    every NodeRules object deleted, waits for a confirmation."""
    for nodes in ([], [(named("n2", node()), facts())]):
        change = rules_change(nodes, rules(""), rules(TEAM), 0.5)
        assert change.hold is not None
        assert "no rules at all in place of 1 rule(s) in force" in change.hold


def test_a_new_rule_lists_each_node_it_taints_and_exits_2() -> None:
    nodes = [(team_node("n1"), facts()), (named("n2", node()), facts())]
    change = rules_change(nodes, rules(TEAM + ALSO), rules(TEAM), 0.5)
    assert change.exit_code == CHANGES
    [n1] = change.changed
    assert (n1.node, n1.pool, [str(c) for c in n1.changes]) == (
        "n1",
        "ci",
        ["+ taint example.com/also=x:NoSchedule"],
    )
    [row] = change.summary
    assert (row.rule, row.pool, row.change, row.nodes) == (
        "also",
        "ci",
        "+ taint example.com/also=x:NoSchedule",
        1,
    )


def test_drift_the_rules_in_force_would_fix_anyway_is_not_blamed_on_the_change() -> None:
    untainted = team_node("n1", tainted=False)  # the reconciler will taint it under both
    change = rules_change([(untainted, facts())], rules(TEAM + GATE), rules(TEAM), 0.5)
    assert change.verdict == "no change"


def test_removing_taints_from_more_than_the_share_is_held_and_exits_3() -> None:
    nodes = [(team_node(f"n{i}"), facts()) for i in range(3)]
    change = rules_change(nodes, rules(GATE), rules(TEAM), 0.5)
    assert (change.verdict, change.exit_code) == ("held", HELD)
    assert change.hold is not None and "remove taints from 3 of 3 nodes" in change.hold
    assert all(
        [(str(c), c.rule) for c in n.changes]
        == [("- taint example.com/team=a:NoSchedule", "team (removed)")]
        for n in change.changed
    )


def test_the_same_removal_within_the_share_is_a_change_not_a_hold() -> None:
    nodes = [(team_node(f"n{i}"), facts()) for i in range(3)]
    assert rules_change(nodes, rules(GATE), rules(TEAM), 1.0).exit_code == CHANGES


def test_a_rule_that_would_put_evicting_taints_on_most_nodes_is_held() -> None:
    sick = NodeCondition("Broken", "True", last_transition_time=NOW)
    nodes = [(named(f"n{i}", node(conditions=(sick,))), facts()) for i in range(3)]
    change = rules_change(nodes, rules(BROKEN), rules(TEAM), 0.5)
    assert change.hold is not None and "evicting taints to 3 of 3 nodes" in change.hold


def test_the_change_as_data_names_verdict_exit_code_and_each_node() -> None:
    data = rules_change([(team_node("n1"), facts())], rules(TEAM + ALSO), rules(TEAM), 0.5)
    plain = data.to_data()
    assert (plain["verdict"], plain["exitCode"], plain["changedNodes"]) == ("changes", 2, 1)
    assert plain["changes"] == [
        {"node": "n1", "pool": "ci", "changes": ["+ taint example.com/also=x:NoSchedule"]}
    ]


# --- status: the report -------------------------------------------------------------------------


def gated(name: str, minutes: int) -> NodeState:
    labels = {"example.com/gpu": "true", "nodegate.dev/pool": "gpu"}
    return named(name, node(labels, (GATE_TAINT,), created=NOW - timedelta(minutes=minutes)))


def report_of(
    nodes: list[NodeState], text: str, status: ReconcilerStatus | None = None
) -> StatusReport:
    lease = LeaseView("replica-1", NOW - timedelta(seconds=3), 15)
    source = RulesSourceView("ns/nodegate-rules", "abcd")
    return status_report(
        NOW,
        nodes,
        rules(text),
        lease,
        status,
        source,
        RecordsView(),
        [],
    )


def test_status_counts_gated_nodes_per_gate_and_pool_with_the_oldest_age() -> None:
    report = report_of([gated("g1", 3), gated("g2", 12), team_node("t1")], TEAM + GATE)
    [group] = report.gates
    assert (group.gate, group.pool, group.nodes, group.oldest_seconds) == ("warmup", "gpu", 2, 720)


def test_status_counts_the_nodes_carrying_each_rules_taint() -> None:
    report = report_of([team_node("t1"), team_node("t2", tainted=False)], TEAM + GATE)
    assert [(t.rule, t.nodes) for t in report.taints] == [
        ("team", 1),
        ("warmup", 0),
    ]


def test_status_shows_the_budget_spent_by_recent_evicting_taints_and_the_nodes_waiting() -> None:
    sick = NodeCondition("Broken", "True", last_transition_time=NOW)
    recent = NodeTaint("example.com/broken", "NoExecute", "true", format_time(NOW))
    nodes = [named("hit", node(conditions=(sick,), taints=(recent,)))]
    nodes += [named(f"w{i}", node(conditions=(sick,))) for i in range(3)]
    [budget] = report_of(nodes, BROKEN).budgets
    assert (budget.budget, budget.spent, budget.waiting) == ("(shared)", 1, 3)


def test_status_counts_what_the_ledger_recorded_for_a_node_that_recovered() -> None:
    """Issue 42: the spend of a node whose evicting taint is gone (it recovered, its pods were
    evicted already) is in the ledger only; status counts it as the breaker does."""
    sick = NodeCondition("Broken", "True", last_transition_time=NOW)
    nodes = [named(f"w{i}", node(conditions=(sick,))) for i in range(3)]
    recovered = Grant(SHARED, "gone-well", Place(None, None), NOW - timedelta(minutes=1))
    report = status_report(
        NOW, nodes, rules(BROKEN), None, None, None, RecordsView(), (), recorded=[recovered]
    )
    [budget] = report.budgets
    assert budget.spent == 1


def test_explain_waits_for_what_the_ledger_recorded() -> None:
    sick = NodeCondition("Broken", "True", last_transition_time=NOW)
    state = named("late", node(conditions=(sick,)))
    broken = rules(BROKEN)
    spent_elsewhere = [
        Grant(SHARED, f"recovered-{i}", Place(None, None), NOW - timedelta(minutes=1))
        for i in range(5)
    ]
    alone = recorded_budget(broken, [state], NOW)
    assert waiting_rules(decide(state, broken, facts(), alone)) == set()
    recorded = recorded_budget(broken, [state], NOW, spent_elsewhere)
    assert waiting_rules(decide(state, broken, facts(), recorded)) == {"broken"}


def test_status_says_the_configmap_differs_from_the_rules_in_force_when_an_update_is_held() -> None:
    held = HeldUpdate("ef01", "it would remove taints", "configmap", NOW)
    status = ReconcilerStatus("replica-1", "0.1.0", 1, "0000", "configmap", NOW, held, NOW)
    report = report_of([], TEAM, status)
    assert report.held == held
    assert report.rules is not None and report.rules.in_sync is False
    assert report.leader is not None and report.leader.version == "0.1.0"


def test_status_as_data_is_plain_json_with_times_as_text() -> None:
    event = EventView("RulesHeld", "ConfigMap/rules", "held", 2, NOW)
    report = status_report(
        NOW, [], None, None, None, None, RecordsView(), [event], notes=("a note",)
    )
    data = report.to_data()
    assert data["events"] == [
        {
            "reason": "RulesHeld",
            "involved": "ConfigMap/rules",
            "message": "held",
            "count": 2,
            "lastSeen": "2026-11-21T12:00:00Z",
        }
    ]
    assert data["leader"] is None and "a note" in data["notes"]


def test_status_as_yaml_reads_back_as_the_same_data() -> None:
    event = EventView("RulesHeld", "ConfigMap/rules", "held: a; b", 2, NOW)
    report = status_report(NOW, [], None, None, None, None, RecordsView(), [event])
    assert yaml.safe_load(dump_all([report.to_data()])) == report.to_data()


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "-"), (45, "45s"), (725, "12m05s"), (3 * 3600 + 120, "3h02m")]
)
def test_ages_read_short(seconds: float | None, text: str) -> None:
    assert age(seconds) == text


# --- explain: what the node waits for -----------------------------------------------------------


def test_a_gated_node_waits_for_its_init_pod_named_with_its_state_and_the_time_left() -> None:
    state = gated("g1", 12)
    gate_rules = rules(GATE)
    pods = {"warmup": (InitPod("kube-system/init-abc", "Running", False),)}
    lines = waits(state, gate_rules, plan(state, gate_rules, facts()), NodeContext(pods), NOW)
    assert lines == (
        "warmup: waits for init pod kube-system/init-abc (Running, not Ready); "
        "times out in 18m00s (onTimeout: keep); gated for 12m00s",
    )


def test_a_gated_node_without_an_init_pod_says_none_is_there_yet() -> None:
    state = gated("g1", 1)
    gate_rules = rules(GATE)
    [line] = waits(state, gate_rules, plan(state, gate_rules, facts()), NodeContext(), NOW)
    assert "an init pod in kube-system with labels app=init on this node (none yet)" in line


def test_a_held_update_and_a_quarantined_record_are_said() -> None:
    held = HeldUpdate("ef01", "it would remove taints", "configmap", NOW)
    context = NodeContext(held=held, quarantined=("nodegate-labels-x-quarantined-1",))
    state = team_node("t1")
    lines = waits(state, rules(TEAM), plan(state, rules(TEAM), facts()), context, NOW)
    assert lines == (
        "rules update ef01 held since 2026-11-21T12:00:00Z: it would remove taints; "
        "explained with the rules in force (confirm its digest to apply it)",
        "persisted labels: record quarantined as nodegate-labels-x-quarantined-1",
    )


def test_an_evicting_taint_over_the_budget_waits_and_says_for_what() -> None:
    sick = NodeCondition("Broken", "True", last_transition_time=NOW)
    recent = NodeTaint("example.com/broken", "NoExecute", "true", format_time(NOW))
    others = [named(f"hit{i}", node(conditions=(sick,), taints=(recent,))) for i in range(5)]
    state = named("late", node(conditions=(sick,)))
    broken = rules(BROKEN)
    result = decide(state, broken, facts(), recorded_budget(broken, [*others, state], NOW))
    assert waiting_rules(result) == {"broken"}
    assert result.is_empty
    [line] = waits(state, broken, result, NodeContext(), NOW)
    assert line.startswith(
        "broken: taint example.com/broken=true:NoExecute waiting for the eviction budget"
    )


def test_a_gate_lifted_by_node_conditions_says_which_it_waits_for() -> None:
    state = gated("g1", 2)
    gate_rules = rules(
        GATE.replace(
            "      pods: {namespace: kube-system, selector: {app: init}}\n",
            '      conditions: [{type: GPUReady, status: "True"}, {type: DriverReady, '
            'status: "True"}]\n',
        )
    )
    [line] = waits(state, gate_rules, plan(state, gate_rules, facts()), NodeContext(), NOW)
    assert line.startswith(
        "warmup: waits for the node conditions GPUReady=True and DriverReady=True; times out in"
    )
