"""Each NodeRules object's status (core/reports/rules_objects.py): conditions by the
conventions, and per rule the nodes it matches, taints and keeps waiting, right at 1,000 nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.rules_objects import (
    EXAMPLES,
    ObjectFacts,
    object_status,
    rule_counts,
    unreadable_rules,
)
from nodegate.core.rules.merge import RulesObject, Verdict, merge
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
SPEC: dict[str, Any] = {
    "labelTaints": [
        {
            "name": "gpu",
            "match": {"labels": {"example.com/gpu": "yes"}},
            "taint": {"key": "example.com/gpu", "effect": "NoSchedule"},
            "nodeMayLift": True,
        }
    ],
    "conditionTaints": [
        {
            "name": "nic",
            "conditions": [{"type": "NicBroken", "status": "True"}],
            "taint": {"key": "example.com/nic", "effect": "NoSchedule"},
        }
    ],
}


def _nodes() -> list[NodeState]:
    """1,000 nodes: every 2nd labelled gpu, of which every 4th not tainted yet; every 10th
    with its NIC broken and tainted, every other 25th broken and not tainted yet."""
    nodes = []
    for i in range(1000):
        labels = {"example.com/gpu": "yes"} if i % 2 == 0 else {}
        taints: list[NodeTaint] = []
        if i % 2 == 0 and i % 8 != 0:
            taints.append(NodeTaint("example.com/gpu", "NoSchedule"))
        conditions = []
        if i % 10 == 0:
            conditions.append(
                NodeCondition("NicBroken", "True", last_transition_time=NOW - timedelta(minutes=10))
            )
            taints.append(NodeTaint("example.com/nic", "NoSchedule"))
        elif i % 25 == 0:
            conditions.append(
                NodeCondition("NicBroken", "True", last_transition_time=NOW - timedelta(minutes=1))
            )
        nodes.append(
            NodeState(f"n{i:04}", labels, taints=tuple(taints), conditions=tuple(conditions))
        )
    return nodes


def test_each_rules_counts_are_right_at_1000_nodes() -> None:
    merged = merge([RulesObject("team", 1, SPEC)], {})
    counts = rule_counts(merged.rules, ((n, PlanFacts(NOW)) for n in _nodes()))
    gpu, nic = counts["gpu"], counts["nic"]
    assert (gpu.matched, gpu.tainted, gpu.waiting) == (500, 375, 125)
    assert gpu.waiting_examples == ["n0000", "n0008", "n0016"][:EXAMPLES]
    # Every 25th is every 10th too for 20 of the 40: 20 broken and not tainted.
    assert (nic.matched, nic.tainted, nic.waiting) == (120, 100, 20)


def test_the_status_sums_its_rules_and_stays_small_at_1000_nodes() -> None:
    merged = merge([RulesObject("team", 1, SPEC)], {})
    counts = rule_counts(merged.rules, ((n, PlanFacts(NOW)) for n in _nodes()))
    facts = ObjectFacts(1, merged.verdicts["team"], SPEC, 1)
    status = object_status(facts, counts, None, NOW)
    # Nodes, not taints: a node carrying both rules' taints is one node.
    tainted = {n.name for n in _nodes() if n.taints}
    assert (status["ruleCount"], status["nodesTainted"]) == (2, len(tainted))
    assert status["nodesTainted"] < 375 + 100
    assert status["nodesWaiting"] == 125 + 20
    assert [c["type"] for c in status["conditions"]] == ["Accepted", "Conflicting", "Degraded"]
    assert len(str(status)) < 2000


def test_a_condition_keeps_its_transition_time_while_its_status_does_not_change() -> None:
    facts = ObjectFacts(2, Verdict(2, in_force=2), SPEC, 2)
    first = object_status(facts, {}, None, NOW)
    later = object_status(facts, {}, first, NOW + timedelta(hours=1))
    assert later["conditions"] == first["conditions"]
    refused = ObjectFacts(3, Verdict(3, ("spec.x: bad",), in_force=2), SPEC, 2)
    moved = object_status(refused, {}, later, NOW + timedelta(hours=2))
    accepted = next(c for c in moved["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["lastTransitionTime"]) == ("False", "2026-12-06T14:00:00Z")
    assert accepted["observedGeneration"] == 3


GATED_SPEC: dict[str, Any] = {
    "startupGates": [
        {
            "name": "gpu-init",
            "match": {"labels": {"example.com/gpu": "yes"}},
            "taint": {"key": "example.com/gpu-init", "effect": "NoSchedule"},
            "readyWhen": {"pods": {"namespace": "kube-system", "selector": {"app": "init"}}},
        }
    ]
}
FORBIDDEN = {"Pod": 'pods is forbidden: User "system:serviceaccount:ng:ng" cannot list'}


def test_a_rule_whose_reads_rbac_refuses_makes_its_object_degraded_with_the_grant_to_give() -> None:
    merged = merge([RulesObject("team", 1, GATED_SPEC), RulesObject("other", 1, SPEC)], {})
    cannot_read = unreadable_rules(merged.rules, FORBIDDEN)
    assert set(cannot_read) == {"gpu-init"}

    gated = ObjectFacts(1, merged.verdicts["team"], GATED_SPEC, 1, None, cannot_read)
    other = ObjectFacts(1, merged.verdicts["other"], SPEC, 1, None, cannot_read)
    [degraded] = [
        c for c in object_status(gated, {}, None, NOW)["conditions"] if c["type"] == "Degraded"
    ]
    assert (degraded["status"], degraded["reason"]) == ("True", "CannotRead")
    assert "gpu-init: the reconciler may not list pods (pods is forbidden" in degraded["message"]
    assert "grant it: the installation's access.pods" in degraded["message"]
    [fine] = [
        c for c in object_status(other, {}, None, NOW)["conditions"] if c["type"] == "Degraded"
    ]
    assert (fine["status"], fine["reason"]) == ("False", "InForce")


def test_nothing_refused_leaves_every_rule_readable() -> None:
    merged = merge([RulesObject("team", 1, GATED_SPEC)], {})
    assert unreadable_rules(merged.rules, {}) == {}
    assert unreadable_rules(merged.rules, {"CSINode": "forbidden"}) == {}
