"""Which init pods on a node signal that its startup gate may be lifted (pure part of
reconciler/nodes/gate_pods.py: the slim pod view and the readiness signal)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from nodegate.core.model import StartupGate
from nodegate.reconciler.nodes.gate_pods import PodView, signal_since, slim_pod
from tests.unit.core.builders import NOW, rules

GATES = rules(
    """
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen:
          pods: {namespace: kube-system, selector: {app: init},
                 readyAnnotation: startup.k8s.io/ready=true}
      - name: strict
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/strict, value: wait, effect: NoSchedule}
        readyWhen:
          pods: {namespace: kube-system, selector: {app: init},
                 readyAnnotation: startup.k8s.io/ready=true, requireAnnotation: true}
    """
)
WARMUP: StartupGate = GATES.startup_gates[0]
STRICT: StartupGate = GATES.startup_gates[1]
NODE_CREATED = NOW - timedelta(minutes=5)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_pod(
    *,
    created: datetime = NODE_CREATED + timedelta(seconds=3),
    ready_at: datetime | None = NODE_CREATED + timedelta(seconds=40),
    containers_ready: tuple[bool, ...] = (True,),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    ready = {"type": "Ready", "status": "True" if ready_at else "False"}
    if ready_at:
        ready["lastTransitionTime"] = _stamp(ready_at)
    return {
        "metadata": {
            "name": "init-abcde",
            "creationTimestamp": _stamp(created),
            "annotations": annotations or {},
        },
        "spec": {"nodeName": "10.0.10.7"},
        "status": {
            "conditions": [ready],
            "containerStatuses": [{"ready": r} for r in containers_ready],
        },
    }


def view(**kwargs: Any) -> PodView:
    return slim_pod(raw_pod(**kwargs), lambda key: key.startswith("startup.k8s.io/"))


def test_a_ready_pod_signals_from_its_ready_transition() -> None:
    since = signal_since(WARMUP, [view()])

    assert since == NODE_CREATED + timedelta(seconds=40)


def test_a_pod_with_a_container_not_ready_does_not_signal() -> None:
    assert signal_since(WARMUP, [view(containers_ready=(True, False))]) is None


def test_the_ready_annotation_signals_from_the_pods_creation_before_readiness() -> None:
    pod = view(ready_at=None, annotations={"startup.k8s.io/ready": "true"})

    assert signal_since(WARMUP, [pod]) == NODE_CREATED + timedelta(seconds=3)


def test_require_annotation_ignores_readiness_alone() -> None:
    assert signal_since(STRICT, [view()]) is None


def test_a_pod_from_before_its_node_object_still_reports_when_it_turned_ready() -> None:
    # The pod says when it turned Ready; whether that is evidence for this Node object is the
    # planner's call (`core.gate_plan`: readiness from before the Node existed never counts,
    # a transition the kubelet reports afterwards, on an adopted pod, does).
    running = view(
        created=NODE_CREATED - timedelta(hours=2),
        ready_at=NODE_CREATED - timedelta(hours=2) + timedelta(seconds=30),
    )

    assert signal_since(WARMUP, [running]) == NODE_CREATED - timedelta(hours=2) + timedelta(
        seconds=30
    )
