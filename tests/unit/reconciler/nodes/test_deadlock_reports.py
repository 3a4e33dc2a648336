"""Rules seen waiting for each other on nodes are said once per deadlock while any node shows it,
however many nodes and reconciles do, and again if it comes back after it ended."""

from __future__ import annotations

from nodegate.core.decisions.agent_deadlocks import Deadlock, Wait
from nodegate.reconciler.nodes.reports.deadlock_reports import DeadlockReports
from tests.unit.reconciler.nodes.test_eviction_breaker import FakeRecorder


def deadlock(where: str) -> Deadlock:
    waits = (
        (Wait("boot", "agents", True, "boot waits for its pods", "add to boot-init ..."),),
        (Wait("agents", "boot", True, "agents wait for fluent-bit", "add to fluent-bit ..."),),
    )
    labels = ("startupGates 'boot'", "nodeAgents 'agents'")
    return Deadlock(("boot", "agents"), labels, waits, True, where=(where,))


def reports() -> tuple[DeadlockReports, FakeRecorder]:
    recorder = FakeRecorder()
    return DeadlockReports(recorder.warn), recorder


def test_one_report_for_many_nodes_and_reconciles() -> None:
    found, recorder = reports()
    for name in ("n1", "n2", "n3"):
        for _ in range(3):
            found.saw(name, [deadlock(f"node {name}")])
    assert [reason for reason, _ in recorder.events] == ["NodeAgentDeadlock"]
    assert recorder.events[0][1].startswith(
        "startupGates 'boot' and nodeAgents 'agents' wait for each other on node n1"
    )


def test_said_again_once_every_node_was_rid_of_it_and_it_came_back() -> None:
    found, recorder = reports()
    found.saw("n1", [deadlock("node n1")])
    found.saw("n2", [deadlock("node n2")])
    found.saw("n1", [])
    found.saw("n1", [deadlock("node n1")])  # n2 still showed it: nothing new
    found.saw("n1", [])
    found.forget("n2")
    found.saw("n3", [deadlock("node n3")])
    assert [reason for reason, _ in recorder.events] == ["NodeAgentDeadlock"] * 2
