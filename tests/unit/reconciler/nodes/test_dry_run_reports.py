"""What the node writer says about dry-run rules: each would-be change once per node while it
stays pending (an Event and a count), and a gauge of the nodes each rule would change."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from nodegate.core.decisions.dry_run import DryRunChange
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.ratelimit import TokenBucket
from nodegate.reconciler.nodes.decide.node_writer import NodeWriter
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.node_view import CachedNode
from tests.unit.reconciler.kit.fakes import FakeApi
from tests.unit.reconciler.nodes.test_eviction_breaker import FakeRecorder

ADD = DryRunChange("ci", "add_taint", "example.com/ci:NoSchedule", "node labels match")
LIFT = DryRunChange("cni", "lift_gate", "cni", "condition NetworkReady=True")


def writer() -> tuple[NodeWriter, FakeRecorder, Metrics]:
    recorder = FakeRecorder()
    metrics = Metrics(registry=CollectorRegistry())
    made = NodeWriter(
        FakeApi(), recorder, metrics.writer, LeaderFence(None), TokenBucket(100, 10), dry_run=False
    )
    return made, recorder, metrics


def node(name: str) -> CachedNode:
    return CachedNode(NodeState(name=name, uid=f"uid-{name}"), ())


def sample(metrics: Metrics, name: str, change: DryRunChange) -> float:
    labels = {"rule": change.rule, "action": change.action}
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_would_be_change_is_said_once_while_it_stays_pending() -> None:
    made, recorder, metrics = writer()
    for _ in range(3):
        made.say_would(node("a"), (ADD,))
    assert recorder.events == [
        (
            "DryRunTaintWouldAdd",
            "dry run: rule ci would add taint example.com/ci:NoSchedule (node labels match); "
            "not written",
        )
    ]
    assert sample(metrics, "nodegate_dry_run_changes_total", ADD) == 1.0


def test_the_gauge_counts_the_nodes_a_rule_would_change_now() -> None:
    made, _, metrics = writer()
    made.say_would(node("a"), (ADD, LIFT))
    made.say_would(node("b"), (ADD,))
    assert sample(metrics, "nodegate_dry_run_nodes", ADD) == 2.0
    made.say_would(node("a"), (LIFT,))
    assert sample(metrics, "nodegate_dry_run_nodes", ADD) == 1.0
    made.forget("b")
    assert sample(metrics, "nodegate_dry_run_nodes", ADD) == 0.0
    assert sample(metrics, "nodegate_dry_run_nodes", LIFT) == 1.0


def test_a_change_pending_again_after_it_went_is_said_again() -> None:
    made, recorder, _ = writer()
    made.say_would(node("a"), (ADD,))
    made.say_would(node("a"), ())
    made.say_would(node("a"), (ADD,))
    assert [reason for reason, _ in recorder.events] == ["DryRunTaintWouldAdd"] * 2
