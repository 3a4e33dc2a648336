"""Which init pods on a node signal that its startup gate may be lifted (pure part of
core/decisions/init_pods.py: the slim pod view and the readiness signal), and what the gate
pods' index holds (reconciler/nodes/sources/gate_pods.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from nodegate.core.decisions.init_pods import PodView, sighted, slim_pod, spec_signals
from nodegate.core.decisions.sightings import Sighting
from nodegate.core.rules.model import NodeRules, StartupGate
from nodegate.core.rules.rule_kinds import TaintRule
from nodegate.reconciler.nodes.sources.gate_pods import GatePods
from nodegate.reconciler.nodes.sources.watched import Watching
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
            "uid": "8d1c",
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


def firsts(signals: tuple[Sighting, ...]) -> list[datetime]:
    return [s.first_seen for s in signals]


def test_a_ready_pod_signals_from_when_its_ready_episode_was_first_seen() -> None:
    first = sighted(view(), None, NOW - timedelta(seconds=20))
    again = sighted(view(), first, NOW)

    assert firsts(pod_signals(WARMUP, [again])) == [NOW - timedelta(seconds=20)]


def test_the_time_the_kubelet_wrote_is_only_a_token() -> None:
    """A kubelet whose clock is 3 minutes behind: its transition time is not read as a time."""
    behind = sighted(view(ready_at=NODE_CREATED - timedelta(minutes=3)), None, NOW)

    assert firsts(pod_signals(WARMUP, [behind])) == [NOW]


def test_an_episode_seen_begin_is_witnessed_and_one_found_at_the_first_look_is_not() -> None:
    found = sighted(view(), None, NOW - timedelta(minutes=1))
    not_ready = sighted(view(ready_at=None), found, NOW - timedelta(seconds=30))
    seen_begin = sighted(view(ready_at=NODE_CREATED + timedelta(seconds=90)), not_ready, NOW)

    assert found.ready is not None and not found.ready.witnessed
    assert seen_begin.ready is not None and seen_begin.ready.witnessed
    assert seen_begin.ready.first_seen == NOW


def test_a_pod_that_is_not_ready_has_no_sighting() -> None:
    assert sighted(view(ready_at=None), None, NOW).ready is None


def test_a_pod_with_a_container_not_ready_does_not_signal() -> None:
    pod = sighted(view(containers_ready=(True, False)), None, NOW)
    assert pod_signals(WARMUP, [pod]) == ()


def test_the_ready_annotation_signals_from_the_pods_creation_before_readiness() -> None:
    pod = view(ready_at=None, annotations={"startup.k8s.io/ready": "true"})

    assert firsts(pod_signals(WARMUP, [pod])) == [NODE_CREATED + timedelta(seconds=3)]


def test_require_annotation_ignores_readiness_alone() -> None:
    assert pod_signals(STRICT, [sighted(view(), None, NOW)]) == ()


def test_the_status_write_time_is_the_api_servers_stamp_on_the_kubelets_write() -> None:
    raw = raw_pod()
    raw["metadata"]["managedFields"] = [
        {"manager": "kube-controller-manager", "time": _stamp(NOW - timedelta(hours=1))},
        {"manager": "kubelet", "subresource": "status", "time": _stamp(NOW)},
    ]
    pod = sighted(slim_pod(raw, lambda _key: False), None, NOW)

    assert pod.ready is not None and pod.ready.status_written == NOW


def pod_signals(rule: TaintRule, pods: list[PodView]) -> tuple[Sighting, ...]:
    """The ready signals of a rule's pods on the node (`pods`: those of its one pod source)."""
    return tuple(signal for spec in rule.reads().pods for signal in spec_signals(spec, pods))


class RecordedWatching:
    """Starts no informer: keeps each one's event handler, to dispatch as its informer would."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[str, PodView | None, PodView | None], None]] = []

    def start(
        self, _name: str, _selection: object, _slim: object, on_event: Any
    ) -> tuple[object, threading.Event]:
        self.handlers.append(on_event)
        synced = threading.Event()
        synced.set()
        return SimpleNamespace(synced=synced, request_relist=lambda: None), threading.Event()

    def on_node(self, _node: str) -> None:
        pass


def following(*gate_rules: NodeRules) -> tuple[GatePods, RecordedWatching]:
    watching = RecordedWatching()
    gate_pods = GatePods(cast(Watching, watching), lambda: NOW)
    for each in gate_rules:
        gate_pods.follow(each)
    return gate_pods, watching


def test_a_node_without_init_pods_left_holds_no_index_entry() -> None:
    gate_pods, watching = following(GATES)
    (on_pod,) = watching.handlers
    on_pod("kube-system/init-abcde", None, view())
    on_pod("kube-system/init-abcde", view(), None)
    assert gate_pods._by_node[("kube-system", "app=init")].nodes == {}


def test_a_pod_from_an_informer_the_rules_dropped_is_not_indexed_again() -> None:
    gate_pods, watching = following(GATES, rules("labelTaints: []"), GATES)
    stopped_informer, running_informer = watching.handlers
    stopped_informer("kube-system/init-abcde", None, view())
    assert gate_pods.bound("10.0.10.7") == {}
    running_informer("kube-system/init-abcde", None, view())
    assert gate_pods.bound("10.0.10.7") == {"8d1c": view().status_written}


def test_a_pod_from_an_informer_stopped_with_the_controller_is_not_indexed() -> None:
    gate_pods, watching = following(GATES)
    gate_pods.stop()
    (stopped_informer,) = watching.handlers
    stopped_informer("kube-system/init-abcde", None, view())
    assert gate_pods._by_node == {}
