"""Parity with Tainter: conditions flip and the taint appears with timeAdded, replayed on the
real API server with examples/migrate/tainter.yaml (`nodegate migrate tainter` of its README
example plus its out-of-service use case)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.localcluster.nodes import set_node_condition
from tests.e2e.support.reconciler_fixtures import (
    Start,
    after_a_reconcile,
    taints_of,
    wait_for_taints,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migrate" / "tainter.yaml"
PRESSURE = ("pressure", "NoExecute")
OUT_OF_SERVICE = ("node.kubernetes.io/out-of-service", "NoExecute")


def test_the_readme_matcher_taints_once_every_condition_matches_and_keeps_it_as_tainter_did(
    start_reconciler_with: Start, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    reconciler = start_reconciler_with(EXAMPLE.read_text())
    name = make_node()

    def condition(kind: str, status: str) -> Callable[[], object]:
        return lambda: set_node_condition(
            core_v1, name, condition_type=kind, status=status, reason="Test"
        )

    after_a_reconcile(reconciler, condition("NetworkInterfaceCard", "Kaput"))
    assert PRESSURE not in taints_of(core_v1, name)  # one of two conditions: not yet
    condition("PrivateLink", "severed")()
    taint = wait_for_taints(core_v1, name, lambda t: PRESSURE in t)[PRESSURE]
    assert (taint["value"], bool(taint.get("timeAdded"))) == ("memory", True)

    after_a_reconcile(reconciler, condition("NetworkInterfaceCard", "Fine"))
    assert taints_of(core_v1, name)[PRESSURE] == taint  # onRecovery: keep, as Tainter


def test_a_preempted_spot_node_is_taken_out_of_service_only_once_it_is_not_ready(
    start_reconciler_with: Start, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    reconciler = start_reconciler_with(EXAMPLE.read_text())
    name = make_node(labels={"kubernetes.azure.com/scalesetpriority": "spot"})

    # The preemption notice reaches the node (AKS NPD) while its kubelet still reports Ready.
    after_a_reconcile(
        reconciler,
        lambda: set_node_condition(
            core_v1, name, condition_type="VMEventScheduled", status="True", reason="Preempt"
        ),
    )
    assert OUT_OF_SERVICE not in taints_of(core_v1, name)

    # The VM is gone: no more heartbeats, the node lifecycle controller sets Ready Unknown.
    set_node_condition(
        core_v1, name, condition_type="Ready", status="Unknown", reason="NodeStatusUnknown"
    )
    taint = wait_for_taints(core_v1, name, lambda t: OUT_OF_SERVICE in t)[OUT_OF_SERVICE]
    assert (taint["value"], bool(taint.get("timeAdded"))) == ("nodeshutdown", True)
