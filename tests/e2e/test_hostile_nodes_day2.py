"""A compromised node against what issues 30 and 32 added (dry-run rules, condition rules and
gates, the day-2 commands), acting with its own kubelet credentials (`as_node`: Node
authorization and NodeRestriction on, as on OKE and AKS). docs/reconciler.md, "Security".
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client as k8s_client

from nodegate.core.plan import OWNED_TAINTS_ANNOTATION
from tests.e2e.node_identity import AsNode
from tests.e2e.reconciler_fixtures import (
    HEADER,
    Start,
    after_a_reconcile,
    settled,
    taints_of,
    wait_for_taints,
)

MAINTENANCE = ("example.com/maintenance", "NoSchedule")
LIVE = ("example.com/live-rule", "NoSchedule")


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
