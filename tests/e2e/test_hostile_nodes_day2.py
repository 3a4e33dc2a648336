"""A compromised node against what issues 30 and 32 added (dry-run rules, condition rules and
gates, the day-2 commands), acting with its own kubelet credentials (`as_node`: Node
authorization and NodeRestriction on, as on OKE and AKS). docs/reconciler.md, "Security".
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import STRATEGIC_MERGE_PATCH
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    Start,
    after_a_reconcile,
    patch_labels,
    settled,
    taints_of,
    wait_for_taints,
)

MAINTENANCE = ("example.com/maintenance", "NoSchedule")
LIVE = ("example.com/live-rule", "NoSchedule")
TENANT = "node-restriction.kubernetes.io/tenant"


def forge_claim(own: k8s_client.CoreV1Api, node: str, claim: str) -> None:
    own.patch_node(
        node,
        {"metadata": {"annotations": {OWNED_TAINTS_ANNOTATION: claim}}},
        _content_type="application/merge-patch+json",
    )


def test_a_deleted_dry_run_rule_never_lets_a_node_strip_the_hand_applied_taint_it_named(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    rules_configmap: Callable[..., str],
    records_namespace: str,
    as_node: AsNode,
) -> None:
    """A dry-run rule writes nothing, so nodegate never owned its taint on any node: once the
    rule is deleted, a node's forged ownership claim must not make nodegate remove the taint an
    admin put there by hand (the taint history records only what live rules owned)."""
    labels = {"e2e.nodegate.dev/hostile-dry": "yes"}
    node = make_node("dry", labels=labels, taints=[{"key": MAINTENANCE[0], "effect": "NoSchedule"}])
    previewed = HEADER + (
        "labelTaints:\n"
        "  - name: maintenance-preview\n"
        "    dryRun: true\n"
        '    match: {labels: {e2e.nodegate.dev/hostile-dry: "yes"}}\n'
        f"    taint: {{key: {MAINTENANCE[0]}, effect: NoSchedule}}\n"
        "    nodeMayLift: true\n"
    )
    process = start_reconciler_with(previewed, "--state-namespace", records_namespace)
    settled(process, core_v1, node)
    assert MAINTENANCE in taints_of(core_v1, node), "a dry-run rule wrote"

    rules_configmap(
        HEADER
        + (
            "labelTaints:\n"
            "  - name: live\n"
            '    match: {labels: {e2e.nodegate.dev/hostile-dry: "yes"}}\n'
            f"    taint: {{key: {LIVE[0]}, effect: NoSchedule}}\n"
            "    nodeMayLift: true\n"
        )
    )
    wait_for_taints(core_v1, node, lambda taints: LIVE in taints)

    after_a_reconcile(
        process,
        lambda: forge_claim(
            as_node(node), node, f"{MAINTENANCE[0]}:NoSchedule,{LIVE[0]}:NoSchedule"
        ),
    )
    settled(process, core_v1, node)
    assert MAINTENANCE in taints_of(core_v1, node), "the node's claim stripped an admin's taint"


FUTURE_RULES = HEADER + (
    "labelTaints:\n"
    "  - name: tenant\n"
    f"    match: {{labels: {{{TENANT}: payments}}}}\n"
    f"    taint: {{key: {LIVE[0]}, effect: NoSchedule}}\n"
    "conditionTaints:\n"
    "  - name: disk\n"
    "    conditions:\n"
    '      - {type: E2EDiskBroken, status: "True"}\n'
    "    for: 1m\n"
    "    taint: {key: example.com/disk-broken, effect: NoSchedule}\n"
)


def report_broken_since(own: k8s_client.CoreV1Api, node: str, when: str) -> None:
    condition = {
        "type": "E2EDiskBroken",
        "status": "True",
        "reason": "Forged",
        "message": "",
        "lastHeartbeatTime": when,
        "lastTransitionTime": when,
    }
    own.patch_node_status(
        node, {"status": {"conditions": [condition]}}, _content_type=STRATEGIC_MERGE_PATCH
    )


def test_a_condition_dated_at_the_end_of_time_does_not_let_a_node_escape_its_taints(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    as_node: AsNode,
) -> None:
    """A node may write any lastTransitionTime on its own conditions. Dated 9999-12-31, a `for`
    hold counted from it runs past the last date Python knows: the node must still get the
    taint an admin's label (one a kubelet may not remove) calls for."""
    hostile = make_node("end")
    process = start_reconciler_with(FUTURE_RULES)
    after_a_reconcile(
        process, lambda: report_broken_since(as_node(hostile), hostile, "9999-12-31T23:59:59Z")
    )
    patch_labels(core_v1, hostile, {TENANT: "payments"})
    wait_for_taints(core_v1, hostile, lambda taints: LIVE in taints)


def test_a_condition_dated_centuries_ahead_does_not_stop_the_reconciler(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    as_node: AsNode,
) -> None:
    """Dated in 2500, the `for` hold's recheck is ~500 years out, past what a thread can wait
    for (threading.TIMEOUT_MAX, ~292 years): every worker that goes idle would die waiting for
    it, and /healthz fail (a restart loop). The reconciler must stay healthy and keep
    reconciling the other nodes."""
    hostile = make_node("ahead")
    process = start_reconciler_with(FUTURE_RULES)
    after_a_reconcile(
        process, lambda: report_broken_since(as_node(hostile), hostile, "2500-01-01T00:00:00Z")
    )
    time.sleep(2)  # the workers, idle, now wait for the earliest recheck: the forged one
    honest = make_node("honest")
    patch_labels(core_v1, honest, {TENANT: "payments"})
    wait_for_taints(core_v1, honest, lambda taints: LIVE in taints)
    status, body = process.get("/healthz")
    assert status == 200, body


def test_a_gate_record_forged_without_a_time_zone_does_not_let_a_node_escape_its_taints(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    as_node: AsNode,
) -> None:
    """A node may write its gate records in any form: a re-gate time without a zone (naive in
    Python, which cannot be compared with an aware one) must not fail the node's plan, or it
    escapes the taints an admin's label calls for."""
    rules = HEADER + (
        "labelTaints:\n"
        "  - name: tenant\n"
        f"    match: {{labels: {{{TENANT}: payments}}}}\n"
        f"    taint: {{key: {LIVE[0]}, effect: NoSchedule}}\n"
        "startupGates:\n"
        "  - name: warmup\n"
        '    match: {labels: {e2e.nodegate.dev/hostile-gate: "yes"}}\n'
        "    taint: {key: startup.example.com/warmup, effect: NoSchedule}\n"
        "    readyWhen: {annotation: warmup.example.com/done=true}\n"
        "    timeout: 30m\n"
    )
    gated = [{"key": "startup.example.com/warmup", "effect": "NoSchedule"}]
    hostile = make_node("naive", labels={"e2e.nodegate.dev/hostile-gate": "yes"}, taints=gated)
    process = start_reconciler_with(rules)
    forged = {"regated.gate.nodegate.dev/warmup": "2026-01-01T00:00:00"}
    after_a_reconcile(
        process,
        lambda: as_node(hostile).patch_node(
            hostile,
            {"metadata": {"annotations": forged}},
            _content_type="application/merge-patch+json",
        ),
    )
    patch_labels(core_v1, hostile, {TENANT: "payments"})
    wait_for_taints(core_v1, hostile, lambda taints: LIVE in taints)


def test_a_node_flooding_nodegate_like_warning_events_cannot_hide_the_recent_ones(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    as_node: AsNode,
    unique_name: str,
) -> None:
    """A kubelet may create Events (the Node authorizer grants it), with any reporting
    component and name: 501 Warning Events named to sort first, dated an hour ago, filled the
    one page `nodegate status` read, and the most recent one, named to sort last, was not
    shown. Events are not authenticated (docs/reconciler.md); the recent ones must still be
    found."""
    hostile = make_node("flood")
    own = as_node(hostile)
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    for i in range(501):
        own.create_namespaced_event(
            "default", nodegate_like_event(f"0000-{unique_name}-{i}", hostile, "E2EFlood", hour_ago)
        )
    core_v1.create_namespaced_event(
        "default",
        nodegate_like_event(f"zzzz-{unique_name}", hostile, "E2ERecent", datetime.now(UTC)),
    )

    shown = subprocess.run(
        [
            str(Path(sys.executable).parent / "nodegate"),
            "status",
            "-o",
            "json",
            "-n",
            unique_name[:63],
            "--kubeconfig",
            str(control_plane.kubeconfig_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert "E2ERecent" in shown.stdout, shown.stdout + shown.stderr


def nodegate_like_event(
    name: str, node: str, reason: str, when: datetime
) -> k8s_client.CoreV1Event:
    stamp = when.replace(microsecond=0)
    return k8s_client.CoreV1Event(
        metadata=k8s_client.V1ObjectMeta(name=name, namespace="default"),
        involved_object=k8s_client.V1ObjectReference(kind="Node", name=node, api_version="v1"),
        reason=reason,
        message="forged",
        type="Warning",
        count=1,
        first_timestamp=stamp,
        last_timestamp=stamp,
        reporting_component="nodegate.dev/reconciler",
        reporting_instance="forged",
        source=k8s_client.V1EventSource(component="nodegate.dev/reconciler"),
    )
