"""Gates that lift on node conditions, dry-run gates and nodegate's hands-off on
`readiness.k8s.io/` taints, on the real API server with a running reconciler (issue 30; NRC's
own scenarios are in test_nrc_parity.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, set_node_condition, wait_until
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    Start,
    after_a_reconcile,
    read_node,
    settled,
    taints_of,
    wait_for_claim_released,
    wait_for_event,
    wait_for_taints,
)
from tests.e2e.support.webhook_fixtures import (
    SELECTED,
    raw_create,
    registered_webhook,
    taints,
    wait_in_force,
)

KEY = "readiness.k8s.io/cni"
GATED = [{"key": KEY, "effect": "NoSchedule"}]
POOL = {"e2e.nodegate.dev/condition-gate": "yes"}


def gate_rules(policy: str = "allOf", extra: str = "") -> str:
    return HEADER + (
        "startupGates:\n"
        "  - name: cni\n"
        '    match: {labels: {e2e.nodegate.dev/condition-gate: "yes"}}\n'
        f"    taint: {{key: {KEY}, effect: NoSchedule}}\n"
        "    readyWhen:\n"
        f"      conditionPolicy: {policy}\n"
        "      conditions:\n"
        '        - {type: NetworkReady, status: "True"}\n'
        '        - {type: StorageReady, status: "True"}\n' + extra
    )


def gated(taints: dict[tuple[str, str], dict[str, Any]]) -> bool:
    return (KEY, "NoSchedule") in taints


def lifted(taints: dict[tuple[str, str], dict[str, Any]]) -> bool:
    return (KEY, "NoSchedule") not in taints


def condition(core: k8s_client.CoreV1Api, node: str, kind: str, status: str) -> None:
    set_node_condition(core, node, condition_type=kind, status=status, reason="E2E")


def test_condition_gate_waits_for_unreported_and_false_conditions_and_lifts_when_all_hold(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    node = make_node("gate", labels=POOL, taints=GATED)
    process = start_reconciler_with(gate_rules())
    settled(process, core_v1, node)
    assert gated(taints_of(core_v1, node)), "lifted on conditions the node never reported"

    after_a_reconcile(process, lambda: condition(core_v1, node, "NetworkReady", "True"))
    settled(process, core_v1, node)
    assert gated(taints_of(core_v1, node)), "lifted while StorageReady is not reported"

    after_a_reconcile(process, lambda: condition(core_v1, node, "StorageReady", "False"))
    settled(process, core_v1, node)
    assert gated(taints_of(core_v1, node)), "lifted while StorageReady is False"

    condition(core_v1, node, "StorageReady", "True")
    wait_for_taints(core_v1, node, lifted)
    annotations = read_node(core_v1, node)["metadata"]["annotations"]
    assert "completed.gate.nodegate.dev/cni" in annotations
    wait_until(  # counted after the write returned: maybe after the test sees the lift
        lambda: process.metric("nodegate_time_to_ungate_seconds_count", gate="cni") == 1.0,
        TIMEOUT,
        "the time to ungate counted once",
    )


def test_any_of_condition_gate_lifts_on_one_condition(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    node = make_node("any", labels=POOL, taints=GATED)
    condition(core_v1, node, "StorageReady", "False")
    start_reconciler_with(gate_rules("anyOf"))
    condition(core_v1, node, "NetworkReady", "True")
    wait_for_taints(core_v1, node, lifted)


def test_a_node_may_lift_its_own_condition_gate_by_reporting_the_condition(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    as_node: AsNode,
) -> None:
    """docs/reconciler.md, Security: a condition signal is node-writable, as the ready
    annotation is; NodeRestriction lets a kubelet write its own status."""
    node = make_node("self", labels=POOL, taints=GATED)
    start_reconciler_with(gate_rules("anyOf"))
    own = as_node(node)
    set_node_condition(own, node, condition_type="NetworkReady", status="True", reason="Self")
    wait_for_taints(core_v1, node, lifted)


def test_dry_run_gate_reports_its_lift_and_leaves_the_taint(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    node = make_node("dry", labels=POOL, taints=GATED)
    process = start_reconciler_with(gate_rules("anyOf", "    dryRun: true\n"))
    condition(core_v1, node, "NetworkReady", "True")
    (event,) = wait_for_event(core_v1, node, "DryRunGateWouldLift")
    assert event.message == (
        "dry run: rule cni would lift startup gate cni (condition NetworkReady=True); not written"
    )
    settled(process, core_v1, node)
    assert gated(taints_of(core_v1, node))
    annotations = read_node(core_v1, node)["metadata"].get("annotations") or {}
    assert "completed.gate.nodegate.dev/cni" not in annotations
    assert OWNED_TAINTS_ANNOTATION not in annotations
    assert process.metric("nodegate_dry_run_nodes", rule="cni", action="lift_gate") == 1.0


def test_a_readiness_taint_no_rule_names_is_left_alone_even_when_claimed(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    rules_configmap: Callable[..., str],
) -> None:
    """node-readiness-controller's taint beside nodegate: the claim an earlier rule of nodegate
    left is released, the taint stays (with a non-readiness key it would be removed)."""
    theirs = "readiness.k8s.io/storage"
    node = make_node("nrc", labels=POOL, taints=[{"key": theirs, "effect": "NoSchedule"}])
    naming = HEADER + (
        "labelTaints:\n"
        "  - name: storage\n"
        '    match: {labels: {e2e.nodegate.dev/condition-gate: "yes"}}\n'
        f"    taint: {{key: {theirs}, effect: NoSchedule}}\n"
        "    nodeMayLift: true\n"
    )
    process = start_reconciler_with(naming)
    wait_for_event(core_v1, node, "TaintAdopted")

    rules_configmap(gate_rules())
    wait_for_claim_released(process, core_v1, node)
    assert (theirs, "NoSchedule") in taints_of(core_v1, node)


def test_a_node_born_gated_by_the_webhook_is_lifted_by_its_condition(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    rules_configmap: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    rules = gate_rules("anyOf").replace(
        'match: {labels: {e2e.nodegate.dev/condition-gate: "yes"}}',
        f'match: {{labels: {{{SELECTED}: "yes"}}}}',
    )
    ref = rules_configmap(rules)
    name = f"{unique_name}-born"[:63]
    with registered_webhook(control_plane, ref, unique_name[:63], tmp_path) as hook:
        hook.start()
        wait_in_force(hook, core_v1, f"{unique_name}-canary"[:63], KEY)
        try:
            born = raw_create(core_v1, SimNode(name=name))
            assert taints(born) == [{"key": KEY, "effect": "NoSchedule"}]
            condition(core_v1, name, "NetworkReady", "True")
            wait_for_taints(core_v1, name, lifted)
        finally:
            core_v1.delete_node(name)
