"""A listed DaemonSet the DaemonSet controller will not run on some nodes is said once per
(rule, DaemonSet, reason), however many nodes and reconciles show it, and counted per node."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from nodegate.core.decisions.node_agents import AgentReadiness, AgentState
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.nodes.reports.agent_reports import CannotRunReports
from tests.unit.core.builders import rules
from tests.unit.reconciler.nodes.test_eviction_breaker import FakeRecorder

RULES = """\
nodeAgents:
  - name: logs
    daemonSets: [{namespace: logging, name: fluent-bit}]
    taint: {key: example.com/agent-not-ready, effect: NoSchedule}
    cannotRun: CANNOT_RUN
"""
DEDICATED = "it does not tolerate taint dedicated=ci:NoSchedule"
GPU = "its nodeSelector wants gpu=true"


def _rules(cannot_run: str = "skip") -> NodeRules:
    return rules(RULES.replace("CANNOT_RUN", cannot_run))


def _refused(why: str | None, action: str = "skip") -> dict[str, AgentReadiness]:
    if why is None:
        return {"logs": AgentReadiness((AgentState("logging/fluent-bit", True, "Ready"),))}
    if action == "wait":
        agent = AgentState("logging/fluent-bit", False, why, "x", refused=why)
    else:
        agent = AgentState("logging/fluent-bit", True, why, refused=why, awaited=False)
    return {"logs": AgentReadiness((agent,))}


class _Scene:
    def __init__(self) -> None:
        self.recorder = FakeRecorder()
        registry = CollectorRegistry()
        self.gauge = Gauge("cannot_run", "", ["rule", "daemonset", "action"], registry=registry)
        self.registry = registry
        self.reports = CannotRunReports(self.recorder.warn, self.gauge)

    def nodes(self, action: str = "skip") -> float:
        value = self.registry.get_sample_value(
            "cannot_run", {"rule": "logs", "daemonset": "logging/fluent-bit", "action": action}
        )
        return value or 0.0


def test_one_report_for_many_nodes_and_reconciles_showing_the_same_reason() -> None:
    scene = _Scene()
    for node in ("ci-1", "ci-2", "ci-3"):
        for _ in range(3):
            scene.reports.saw(node, _rules(), _refused(DEDICATED))

    assert [reason for reason, _ in scene.recorder.events] == ["NodeAgentCannotRun"]
    assert "do not wait for it (cannotRun: skip)" in scene.recorder.events[0][1]
    assert scene.nodes() == 3


def test_another_reason_is_another_report() -> None:
    scene = _Scene()
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))
    scene.reports.saw("cpu-1", _rules(), _refused(GPU))

    assert len(scene.recorder.events) == 2
    assert scene.nodes() == 2


def test_a_waiting_rule_says_the_node_keeps_its_taint_and_counts_as_wait() -> None:
    scene = _Scene()
    scene.reports.saw("ci-1", _rules("wait"), _refused(DEDICATED, "wait"))

    assert "keep example.com/agent-not-ready:NoSchedule" in scene.recorder.events[0][1]
    assert scene.nodes("wait") == 1
    assert scene.nodes("skip") == 0


def test_nodes_that_run_the_agent_again_or_are_deleted_count_no_more() -> None:
    scene = _Scene()
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))
    scene.reports.saw("ci-2", _rules(), _refused(DEDICATED))
    scene.reports.saw("ci-1", _rules(), _refused(None))
    scene.reports.forget("ci-2")

    assert scene.nodes() == 0


def test_a_reason_gone_from_every_node_is_said_again_when_it_comes_back() -> None:
    scene = _Scene()
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))
    scene.reports.saw("ci-1", _rules(), _refused(None))
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))

    assert len(scene.recorder.events) == 2


def test_a_rule_turned_from_skip_to_wait_moves_its_nodes_to_the_wait_series_and_says_so() -> None:
    scene = _Scene()
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))
    scene.reports.saw("ci-1", _rules("wait"), _refused(DEDICATED, "wait"))

    assert (scene.nodes("skip"), scene.nodes("wait")) == (0, 1)
    assert "(cannotRun: wait)" in scene.recorder.events[-1][1]


def test_a_node_seen_after_its_delete_is_dropped_at_the_next_resync() -> None:
    scene = _Scene()
    scene.reports.forget("ci-1")
    scene.reports.saw("ci-1", _rules(), _refused(DEDICATED))  # a worker's late look
    scene.reports.keep_only({"ci-2"})

    assert scene.nodes() == 0
