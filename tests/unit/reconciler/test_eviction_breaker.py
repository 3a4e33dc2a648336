"""The eviction breaker in the node controller: concurrent workers, waiting nodes, one Warning."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from nodegate.core.node import NodeCondition, NodeState
from nodegate.core.plan import PlanFacts, plan
from nodegate.reconciler.nodes.eviction_breaker import REPORT_AFTER, EvictionBreaker, Hold
from nodegate.reconciler.nodes.metrics import Metrics
from tests.unit.core.builders import NOW, rules

STORM = rules(
    """\
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
    """
)
BROKEN = (NodeCondition("NetworkProblem", "True"),)
SOURCE = ("ns", "rules", "uid")


@dataclass
class FakeRecorder:
    """What the breaker reports, kept for the test."""

    events: list[tuple[str, str]] = field(default_factory=list)

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((reason, message))

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        self.events.append((reason, message))


@dataclass
class Clock:
    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


def breaker(
    nodes: list[NodeState], clock: Clock | None = None
) -> tuple[EvictionBreaker, FakeRecorder, Metrics]:
    recorder = FakeRecorder()
    metrics = Metrics(registry=CollectorRegistry())
    made = EvictionBreaker(recorder, metrics, lambda: nodes, lambda: SOURCE, clock or Clock())
    return made, recorder, metrics


def storm_nodes(count: int) -> list[NodeState]:
    return [NodeState(name=f"n{i:02d}", conditions=BROKEN) for i in range(count)]


def ask(made: EvictionBreaker, node: NodeState) -> Hold:
    return made.admit(node, plan(node, STORM, PlanFacts(NOW)), STORM)


def waiting(metrics: Metrics) -> float:
    return (
        metrics.registry.get_sample_value("nodegate_evictions_waiting", {"rule": "network-problem"})
        or 0.0
    )


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(2, 8))
def test_concurrent_workers_never_grant_more_than_the_budget(count: int, workers: int) -> None:
    nodes = storm_nodes(count)
    made, _, _ = breaker(nodes)
    start = threading.Barrier(workers)
    granted: list[str] = []
    lock = threading.Lock()

    def work(mine: list[NodeState]) -> None:
        start.wait()
        for node in mine:
            if not ask(made, node).waiting:
                with lock:
                    granted.append(node.name)

    threads = [threading.Thread(target=work, args=(nodes[i::workers],)) for i in range(workers)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)

    assert len(granted) == max(1, int(0.2 * count + 1e-9))


def test_the_rest_wait_and_are_counted_in_the_metric() -> None:
    nodes = storm_nodes(20)
    made, _, metrics = breaker(nodes)

    holds = [ask(made, node) for node in nodes]

    assert sum(1 for h in holds if h.waiting) == 16
    assert waiting(metrics) == 16


def test_a_waiting_node_is_let_through_once_the_window_has_room() -> None:
    nodes = storm_nodes(20)
    clock = Clock()
    made, _, _ = breaker(nodes, clock)
    holds = [ask(made, node) for node in nodes]
    retry = holds[-1].retry_after
    assert retry is not None and retry <= REPORT_AFTER.total_seconds()

    clock.now = NOW + timedelta(minutes=5)

    assert not ask(made, nodes[-1]).waiting


def test_a_node_whose_condition_recovers_stops_waiting() -> None:
    nodes = storm_nodes(20)
    made, _, metrics = breaker(nodes)
    for node in nodes:
        ask(made, node)

    made.settle(nodes[-1].name)

    assert waiting(metrics) == 15


def test_a_hold_is_reported_once_naming_the_rule_the_share_and_the_nodes() -> None:
    nodes = storm_nodes(20)
    clock = Clock()
    made, recorder, _ = breaker(nodes, clock)
    for node in nodes:
        ask(made, node)
    assert recorder.events == []  # not before the storm has arrived

    clock.now = NOW + REPORT_AFTER
    for node in nodes:
        ask(made, node)

    assert [reason for reason, _ in recorder.events] == ["EvictionBudgetSpent"]
    message = recorder.events[0][1]
    assert "rule network-problem: 4 of 20 nodes of the cluster (20%" in message
    assert "16 node(s) wait for it: n04, n05" in message
