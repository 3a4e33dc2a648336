"""The eviction budget on a real API server: a condition storm taints at most the budget per
window, the rest later (none that recovered first); an unlimited rule taints all at once; a
rules update that would NoExecute every node is held by the blast-radius guard."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s_client

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.localcluster.nodes import set_node_condition, wait_until
from tests.e2e.support.reconciler_fixtures import HEADER, Start, taints_of, wait_for_event

NODES = 20
WINDOW_SECONDS = 6
"""Long enough for a loaded 2-core machine to write the storm, see the first window's taints
and write the recoveries before the window ends: no slot frees before `started` + the window."""
TAINT = ("example.com/network-problem", "NoExecute")
STORM_RULES = HEADER + (
    f"evictionBudget: {{window: {WINDOW_SECONDS}s}}\n"
    "conditionTaints:\n"
    "  - name: network-problem\n"
    '    conditions: [{type: NetworkProblem, status: "True"}]\n'
    "    taint: {key: example.com/network-problem, effect: NoExecute}\n"
)
UNLIMITED_RULES = STORM_RULES + "    evictionBudget: unlimited\n"
HARMLESS_RULES = HEADER + (
    "labelTaints:\n"
    "  - name: harmless\n"
    "    match: {labels: {example.com/never: here}}\n"
    "    taint: {key: example.com/never, effect: NoSchedule}\n"
    "    nodeMayLift: true\n"
)
EVERY_READY_NODE = HARMLESS_RULES + (
    "conditionTaints:\n"
    "  - name: ready-bug\n"
    '    conditions: [{type: Ready, status: "True"}]\n'
    "    taint: {key: example.com/ready-bug, effect: NoExecute}\n"
)


def _make_nodes(make_node: Callable[..., str], count: int) -> list[str]:
    return [make_node(f"s{i:02d}") for i in range(count)]


def _storm(core_v1: k8s_client.CoreV1Api, names: list[str], status: str) -> None:
    for name in names:
        set_node_condition(
            core_v1, name, condition_type="NetworkProblem", status=status, reason="HealthCheck"
        )


def _tainted(core_v1: k8s_client.CoreV1Api, names: list[str], key: tuple[str, str]) -> set[str]:
    listed: Any = core_v1.list_node()
    wanted = set(names)
    return {
        node.metadata.name
        for node in listed.items
        if node.metadata.name in wanted
        and any((t.key, t.effect) == key for t in node.spec.taints or [])
    }


def _cluster_nodes(core_v1: k8s_client.CoreV1Api) -> int:
    return len(core_v1.list_node().items)


def test_a_condition_storm_taints_the_budget_per_window_and_never_a_node_that_recovered_first(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    unique_name: str,
) -> None:
    names = _make_nodes(make_node, NODES)
    budget = max(1, int(0.2 * _cluster_nodes(core_v1) + 1e-9))  # the default: 20 % per window
    process = start_reconciler_with(STORM_RULES)

    started = time.monotonic()
    _storm(core_v1, names, "True")
    first = wait_until(lambda: _tainted(core_v1, names, TAINT), 20, "the first taints")
    first_at = time.monotonic() - started
    # The rest of the first window: never more than the budget. A slot frees a window after
    # the first taint, which came after `started`: until then, whatever is seen is the first
    # window's.
    seen = set(first)
    while time.monotonic() - started < WINDOW_SECONDS * 0.6:
        seen = _tainted(core_v1, names, TAINT)
        assert len(seen) <= budget, (len(seen), budget)
        time.sleep(0.1)
    assert len(seen) == budget, (sorted(seen), budget, f"first taint seen at {first_at:.1f}s")
    # The storm clears on some waiting nodes before their turn: they must never be tainted.
    recovered = sorted(set(names) - seen)[:6]
    _storm(core_v1, recovered, "False")
    cleared_at = time.monotonic() - started
    assert cleared_at < WINDOW_SECONDS, f"recoveries written {cleared_at:.1f}s in: not before"
    held = wait_for_event(core_v1, f"rules-{unique_name}"[:63], "EvictionBudgetSpent")
    assert "rule network-problem" in (held[0].message or "")
    assert f"{budget} of {_cluster_nodes(core_v1)} nodes" in (held[0].message or "")
    assert len(held) == 1 and (held[0].count or 1) == 1
    assert process.metric("nodegate_evictions_waiting", rule="network-problem") > 0

    rest = set(names) - set(recovered)
    timeline: dict[str, float] = dict.fromkeys(seen, first_at)
    deadline = time.monotonic() + 10 * WINDOW_SECONDS
    while not rest <= set(timeline) and time.monotonic() < deadline:
        for name in _tainted(core_v1, names, TAINT) - set(timeline):
            timeline[name] = time.monotonic() - started
        time.sleep(0.1)
    assert rest <= set(timeline), sorted(rest - set(timeline))
    assert not set(recovered) & _tainted(core_v1, names, TAINT)
    assert not set(recovered) & set(timeline)
    assert process.metric("nodegate_evictions_waiting", rule="network-problem") == 0
    waited = process.metric("nodegate_eviction_holds_total", rule="network-problem")
    print(
        f"storm figures: budget {budget}/window of {WINDOW_SECONDS}s; tainted at "
        f"{sorted(round(t, 1) for t in timeline.values())}; {int(waited)} waited; "
        f"{len(recovered)} never tainted (recovered first)"
    )


def test_an_unlimited_rule_taints_every_node_at_once(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    names = _make_nodes(make_node, NODES)
    process = start_reconciler_with(UNLIMITED_RULES)

    _storm(core_v1, names, "True")

    wait_until(lambda: _tainted(core_v1, names, TAINT) == set(names), 20, "every node tainted")
    assert process.metric("nodegate_eviction_holds_total") == 0


def test_a_rules_update_that_would_noexecute_every_node_is_held(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    rules_configmap: Callable[..., str],
    unique_name: str,
) -> None:
    names = _make_nodes(make_node, 4)  # Ready=True, as created
    process = start_reconciler_with(HARMLESS_RULES, "--max-untaint-share", "0.5")
    wait_until(lambda: process.metric("nodegate_rules_generation") == 1, 20, "rules in force")

    rules_configmap(EVERY_READY_NODE)

    held = wait_for_event(core_v1, f"rules-{unique_name}"[:63], "RulesHeld")
    assert "would add evicting taints" in (held[0].message or "")
    assert rules_digest(EVERY_READY_NODE) in (held[0].message or "")
    assert process.metric("nodegate_rules_held") == 1
    assert process.metric("nodegate_rules_generation") == 1
    assert all(("example.com/ready-bug", "NoExecute") not in taints_of(core_v1, n) for n in names)
