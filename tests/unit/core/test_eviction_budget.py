"""The eviction budget's arithmetic and what it does to a plan
(core/decisions/eviction_budget.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from nodegate.core.decisions.blast_radius import blast_radius, hold_reason
from nodegate.core.decisions.eviction_budget import (
    SHARED,
    Census,
    Charge,
    Grant,
    Place,
    admit,
    charges,
    check,
    grants_on_nodes,
    limit,
)
from nodegate.core.decisions.node_decision import decide
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import EvictionLimit, NodeRules
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint, format_time
from nodegate.core.text.errors import RulesError
from tests.unit.core.builders import NOW, rules

WINDOW = timedelta(minutes=5)
BROKEN = (NodeCondition("NetworkProblem", "True"),)
STORM = """\
conditionTaints:
  - name: network-problem
    conditions: [{type: NetworkProblem, status: "True"}]
    taint: {key: example.com/network-problem, effect: NoExecute}
"""
TAINT = NodeTaint("example.com/network-problem", "NoExecute", "", format_time(NOW))


def storm_node(name: str, **labels: str) -> NodeState:
    return NodeState(name=name, labels=labels, conditions=BROKEN)


NOWHERE = Place()
TWENTY = Census(20)


def grants(
    count: int, ago: timedelta = timedelta(0), place: Place = NOWHERE, first: int = 0
) -> list[Grant]:
    return [Grant(SHARED, f"g{i}", place, NOW - ago) for i in range(first, first + count)]


def default_check(
    spent: list[Grant], where: Place = NOWHERE, nodes: Census = TWENTY, node: str = "x"
) -> bool:
    budget = rules("").eviction_budget
    return check(budget, SHARED, spent, node, where, nodes, NOW).allowed


@pytest.mark.parametrize(
    ("share", "number", "nodes", "expected"),
    [
        (0.2, None, 20, 4),
        (0.2, None, 19, 3),
        (0.2, None, 3, 1),
        (0.2, None, 0, 1),
        (0.5, 2, 20, 2),
        (None, 7, 20, 7),
        (1.0, None, 20, 20),
    ],
    ids=["20% of 20", "rounded down", "one at least", "empty", "smaller", "number", "all"],
)
def test_a_limit_is_the_share_rounded_down_or_the_number_never_below_one_node(
    share: float | None, number: int | None, nodes: int, expected: int
) -> None:
    assert limit(EvictionLimit(max_share=share, max_nodes=number), nodes) == expected


def test_the_defaults_allow_a_fifth_of_the_cluster_per_five_minutes() -> None:
    budget = rules("").eviction_budget

    assert budget.window == WINDOW
    assert budget.cluster.max_share == budget.per_pool.max_share == 0.2  # type: ignore[union-attr]
    assert not budget.no_schedule


def test_a_node_over_the_cluster_budget_waits_until_the_oldest_grant_leaves_the_window() -> None:
    spent = grants(3, ago=timedelta(minutes=4)) + grants(1, ago=timedelta(minutes=1), first=3)
    budget = rules("").eviction_budget

    verdict = check(budget, SHARED, spent, "x", Place(), Census(20), NOW)

    assert not verdict.allowed
    assert verdict.retry_at == NOW + timedelta(minutes=1)
    assert "4 of 20 nodes of the cluster" in verdict.why


def test_a_grant_older_than_the_window_no_longer_counts() -> None:
    assert default_check(grants(4, ago=WINDOW))
    assert not default_check(grants(4, ago=WINDOW - timedelta(seconds=1)))


def test_a_pool_over_its_budget_holds_its_nodes_but_not_another_pools() -> None:
    spent = grants(2, place=Place(pool="gpu"))
    nodes = Census(100, pools={"gpu": 10, "cpu": 90})

    assert not default_check(spent, Place(pool="gpu"), nodes)
    assert default_check(spent, Place(pool="cpu"), nodes)


def test_a_zone_over_its_budget_holds_its_nodes_but_not_another_zones() -> None:
    spent = grants(1, place=Place(zone="a"))
    nodes = Census(100, zones={"a": 5, "b": 95})
    budget = rules("evictionBudget: {perZone: {maxShare: 0.2}}\n").eviction_budget

    assert not check(budget, SHARED, spent, "x", Place(zone="a"), nodes, NOW).allowed
    assert check(budget, SHARED, spent, "x", Place(zone="b"), nodes, NOW).allowed


def test_zones_are_not_limited_unless_asked_a_kubelet_may_change_its_zone_label() -> None:
    spent = grants(1, place=Place(zone="a"))
    assert default_check(spent, Place(zone="a"), Census(100, zones={"a": 5, "b": 95}))


def test_a_node_already_counted_in_the_window_is_not_charged_twice() -> None:
    assert default_check(grants(4), node="g0")


def test_an_unlimited_rule_is_never_held() -> None:
    storm = rules(STORM + "    evictionBudget: unlimited\n")
    node = storm_node("n")

    decided = admit(
        storm,
        node,
        charges(node, plan(node, storm, PlanFacts(NOW)), storm),
        grants(20),
        Census(20),
        NOW,
    )

    assert not decided.waiting and not decided.granted


def test_a_rule_with_its_own_budget_does_not_spend_the_shared_one() -> None:
    own = rules(STORM + "    evictionBudget: {cluster: {maxNodes: 10}}\n")
    node = storm_node("n")
    wanted = charges(node, plan(node, own, PlanFacts(NOW)), own)

    decided = admit(own, node, wanted, grants(4), Census(20), NOW)

    assert [c.ledger for c in wanted] == ["network-problem"]
    assert decided.granted and not decided.waiting


def test_noschedule_is_budgeted_only_when_the_budget_says_so() -> None:
    text = STORM.replace("NoExecute", "NoSchedule")
    node = storm_node("n")
    off, on = rules(text), rules(text + "evictionBudget: {noSchedule: true}\n")

    assert charges(node, plan(node, off, PlanFacts(NOW)), off) == ()
    assert len(charges(node, plan(node, on, PlanFacts(NOW)), on)) == 1


def test_a_removal_is_never_charged() -> None:
    storm = rules(STORM)
    recovered = NodeState(
        name="n", taints=(TAINT,), conditions=(NodeCondition("NetworkProblem", "False"),)
    )
    result = plan(recovered, storm, PlanFacts(NOW))

    assert result.remove_taints and charges(recovered, result, storm) == ()


def test_a_value_change_of_a_taint_the_node_has_is_not_a_new_eviction() -> None:
    storm = rules(STORM)
    old = NodeState(
        name="n", taints=(NodeTaint(TAINT.key, TAINT.effect, "old"),), conditions=BROKEN
    )
    result = plan(old, storm, PlanFacts(NOW))

    assert result.add_taints and charges(old, result, storm) == ()


def test_a_taint_waiting_for_the_budget_leaves_the_node_as_it_is() -> None:
    storm = rules(STORM)
    node = storm_node("n")

    result = plan(node, storm, PlanFacts(NOW, budget_waiting={"network-problem": "over budget"}))

    assert result.is_empty
    assert [(d.verdict, d.why) for d in result.decisions] == [("keep", "over budget")]


def test_decide_asks_the_budget_of_the_charges_alone_and_keeps_out_what_waits() -> None:
    storm = rules(STORM)
    asked: list[tuple[str, tuple[Charge, ...]]] = []

    def budget(node: NodeState, wanted: tuple[Charge, ...]) -> dict[str, str]:
        asked.append((node.name, wanted))
        return {"network-problem": "over budget"}

    held = decide(storm_node("sick"), storm, PlanFacts(NOW), budget)
    kept = decide(NodeState(name="well"), storm, PlanFacts(NOW), budget)

    assert held.is_empty and not kept.add_taints
    charge = Charge("network-problem", "example.com/network-problem:NoExecute", SHARED)
    assert asked == [("sick", (charge,))]  # never asked of a node that adds no evicting taint
    assert decide(storm_node("sick"), storm, PlanFacts(NOW)).add_taints  # no budget: granted


def test_a_removal_goes_ahead_even_while_its_rule_waits_for_the_budget() -> None:
    storm = rules(STORM)
    recovered = NodeState(
        name="n", taints=(TAINT,), conditions=(NodeCondition("NetworkProblem", "False"),)
    )

    result = plan(recovered, storm, PlanFacts(NOW, budget_waiting={"network-problem": "over"}))

    assert [c.taint.identity for c in result.remove_taints] == [TAINT.identity]


def test_a_waiting_rule_leaves_a_taint_the_node_has() -> None:
    storm = rules(STORM)
    node = NodeState(name="n", taints=(TAINT,), conditions=BROKEN)

    result = plan(node, storm, PlanFacts(NOW, budget_waiting={"network-problem": "over budget"}))

    assert not result.remove_taints


def test_the_nodes_time_added_counts_as_spent_after_a_restart() -> None:
    storm = rules(STORM)
    tainted = NodeState(name="t", taints=(TAINT,), conditions=BROKEN)

    assert [g.node for g in grants_on_nodes([tainted], storm, NOW + timedelta(minutes=1))] == ["t"]
    assert grants_on_nodes([tainted], storm, NOW + WINDOW + timedelta(seconds=2)) == []


def test_a_time_added_far_ahead_holds_a_slot_one_window_from_the_nodes_creation_at_most() -> None:
    """A kubelet may register with a budgeted taint and any timeAdded: dated in 2200, it used to
    count as spent now on every pass, for as long as it stayed, and hold evictions elsewhere.
    (Far ahead, but not 9999: a second past 9999-12-31T23:59:59 overflows, and the test then
    failed on the overflow before reaching its assertions, protection or not.)"""
    storm = rules(STORM)
    forged = replace(TAINT, time_added="2200-01-01T00:00:00Z")
    registered = NodeState(name="r", taints=(forged,), conditions=BROKEN, created=NOW)

    inside = grants_on_nodes([registered], storm, NOW + timedelta(minutes=1))
    assert [g.at for g in inside] == [NOW + timedelta(seconds=1)]
    assert grants_on_nodes([registered], storm, NOW + WINDOW + timedelta(seconds=2)) == []


def test_a_time_added_a_little_ahead_counts_as_made_now() -> None:
    storm = rules(STORM)
    ahead = replace(TAINT, time_added="2026-11-21T12:00:30Z")
    node = NodeState(name="a", taints=(ahead,), conditions=BROKEN, created=NOW)

    assert [g.at for g in grants_on_nodes([node], storm, NOW)] == [NOW]


def _ready_bug(nodes: int) -> tuple[list[tuple[NodeState, PlanFacts]], NodeRules]:
    ready = (NodeCondition("Ready", "True"),)
    cluster = [(NodeState(name=f"n{i}", conditions=ready), PlanFacts(NOW)) for i in range(nodes)]
    update = rules(STORM.replace("NetworkProblem", "Ready"))
    return cluster, update


def test_a_rules_update_that_would_noexecute_most_nodes_is_held() -> None:
    cluster, update = _ready_bug(10)

    reason = hold_reason(blast_radius(cluster, update), update, 0.5)

    assert reason is not None and "add evicting taints to 10 of 10 nodes" in reason


def test_evicting_taints_the_rules_in_force_add_anyway_are_not_the_updates() -> None:
    cluster, update = _ready_bug(10)
    edited = rules(STORM.replace("NetworkProblem", "Ready") + "evictionBudget: {window: 1m}\n")

    assert blast_radius(cluster, edited, in_force=update).evicted_nodes == 0


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ("unlimted", "write 'unlimited'"),
        ("{window: 0s}", "out of range"),
        ("{cluster: {}}", "give 'maxShare'"),
        ("{unlimited: true, window: 1m}", "takes no window"),
        ("{cluster: {maxShare: 20}}", "for 20 % write 0.2"),
    ],
    ids=["typo", "no window", "empty limit", "unlimited and limits", "share as percent"],
)
def test_a_bad_rule_budget_is_refused_at_its_place_with_the_fix(budget: str, message: str) -> None:
    with pytest.raises(RulesError) as err:
        rules(STORM + f"    evictionBudget: {budget}\n")

    text = str(err.value.problems[0])
    assert text.startswith("<rules>:") and "conditionTaints[0].evictionBudget" in text
    assert message in text


def test_a_node_spends_the_budget_of_the_pool_it_registered_in_not_the_one_it_claims() -> None:
    from nodegate.core.decisions.eviction_budget import place_of
    from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL
    from nodegate.core.rules.node import NodeState

    claims = NodeState(name="n", labels={POOL_LABEL: "payments", TRUSTED_POOL_LABEL: "ci"})
    assert place_of(claims).pool == "ci"
    assert place_of(NodeState(name="n", labels={POOL_LABEL: "payments"})).pool is None
