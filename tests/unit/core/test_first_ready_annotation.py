"""`firstReadyAnnotation` on node-agent rules: nidhogg's annotation of a node's first time
without its taints (pelotech's `<taintNamePrefix>/ready-since`, uswitch's
`nidhogg.uswitch.com/first-time-ready`), written once in its format, for what reads it.

nidhogg (pelotech/nidhogg a877a4d, pkg/nidhogg/handler.go HandleNode) writes it when the node,
as its update leaves it, carries none of its taints and has no such annotation yet, with
`time.Now().Format("2006-01-02T15:04:05Z")`, and never changes it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from nodegate.core.decisions.node_agents import AgentReadiness, AgentState
from nodegate.core.decisions.plan import NodePlan, plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.text.errors import RulesError
from tests.unit.core.builders import NOW, node, rules

READY_SINCE = "nidhogg.uswitch.com/ready-since"
LOGS = NodeTaint("nidhogg.uswitch.com/logging.fluentd", "NoSchedule")
GPU = NodeTaint("nidhogg.uswitch.com/kube-system.nvidia", "NoSchedule")
GPU_NODE = {"example.com/gpu": "true"}
TWO_RULES = f"""\
nodeAgents:
  - name: logs
    daemonSets: [{{namespace: logging, name: fluentd}}]
    taint: {{key: {LOGS.key}, effect: NoSchedule}}
    for: 0s
    firstReadyAnnotation: {READY_SINCE}
  - name: gpu
    match: {{labels: {{example.com/gpu: "true"}}}}
    daemonSets: [{{namespace: kube-system, name: nvidia}}]
    taint: {{key: {GPU.key}, effect: NoSchedule}}
    for: 0s
    firstReadyAnnotation: {READY_SINCE}
"""
READY = AgentReadiness((AgentState("ns/agent", True, "Ready"),))
NOT_READY = AgentReadiness((AgentState("ns/agent", False, "pod not Ready", "ns/agent:p:x"),))


def planned(
    on: NodeState,
    logs: AgentReadiness | None = READY,
    gpu: AgentReadiness | None = READY,
    found: NodeRules | None = None,
    now: datetime = NOW,
) -> NodePlan:
    agents = {name: r for name, r in (("logs", logs), ("gpu", gpu)) if r is not None}
    return plan(on, found or rules(TWO_RULES), PlanFacts(now=now, agents=agents))


def written(result: NodePlan) -> dict[str, str | None]:
    return dict(result.set_annotations)


def test_written_with_the_time_in_the_write_that_lifts_the_last_of_the_rules_taints() -> None:
    result = planned(node(GPU_NODE, taints=(LOGS, GPU)))
    assert {str(c.taint) for c in result.remove_taints} == {str(LOGS), str(GPU)}
    assert written(result) == {READY_SINCE: "2026-11-21T12:00:00Z"}


def test_not_written_while_another_rule_naming_it_keeps_its_taint() -> None:
    result = planned(node(GPU_NODE, taints=(LOGS, GPU)), gpu=NOT_READY)
    assert [str(c.taint) for c in result.remove_taints] == [str(LOGS)]
    assert READY_SINCE not in written(result)


def test_written_on_a_node_a_rule_does_not_select_as_nidhogg_did() -> None:
    """The GPU rule does not match a CPU node: it decided (release), as nidhogg's selector left
    such a node without its taint and annotated it."""
    assert written(planned(node(), gpu=NOT_READY)) == {READY_SINCE: "2026-11-21T12:00:00Z"}


def test_not_written_on_a_node_that_gets_a_taint_in_the_same_write() -> None:
    result = planned(node(), logs=NOT_READY)
    assert [str(c.taint) for c in result.add_taints] == [str(LOGS)]
    assert READY_SINCE not in written(result)


def test_not_written_while_for_holds_a_missing_taint_off() -> None:
    """Without the taint but not Ready, counting `for`: not ready, just not tainted yet."""
    held = rules(TWO_RULES.replace("for: 0s", "for: 2m"))
    result = planned(node(), logs=NOT_READY, found=held)
    assert not result.add_taints
    assert READY_SINCE not in written(result)


def test_not_written_before_the_agents_are_looked_up() -> None:
    assert READY_SINCE not in written(planned(node(), logs=None))


def test_never_changed_once_written() -> None:
    there = node(GPU_NODE, taints=(LOGS,), annotations={READY_SINCE: "2020-01-01T00:00:00Z"})
    result = planned(there)
    assert [str(c.taint) for c in result.remove_taints] == [str(LOGS)]
    assert READY_SINCE not in written(result)


def test_the_time_is_nidhoggs_go_layout_in_utc() -> None:
    """`2006-01-02T15:04:05Z`: whole seconds and a literal Z (nidhogg's container runs in UTC)."""
    later = datetime(2026, 11, 21, 14, 30, 5, 999, tzinfo=timezone(timedelta(hours=2)))
    value = written(planned(node(), now=later))[READY_SINCE]
    assert value == "2026-11-21T12:30:05Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value or "")
    assert datetime.strptime(value or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) == (
        later.replace(microsecond=0)
    )


def test_a_bootstrap_only_rule_lifted_once_counts_as_ready_whatever_its_agents_do_now() -> None:
    once = rules(
        f"""\
        nodeAgents:
          - name: logs
            daemonSets: [{{namespace: logging, name: fluentd}}]
            taint: {{key: {LOGS.key}, effect: NoSchedule}}
            mode: bootstrapOnly
            firstReadyAnnotation: {READY_SINCE}
        """
    )
    assert READY_SINCE in written(planned(node(), logs=NOT_READY, found=once))


def test_a_dry_run_rule_writes_none() -> None:
    dry = rules(
        f"""\
        nodeAgents:
          - name: logs
            daemonSets: [{{namespace: logging, name: fluentd}}]
            taint: {{key: {LOGS.key}, effect: NoSchedule}}
            dryRun: true
            firstReadyAnnotation: {READY_SINCE}
        """
    )
    assert READY_SINCE not in written(planned(node(), found=dry))


def test_the_rules_read_it_so_a_node_that_lost_it_is_looked_at_again() -> None:
    assert READY_SINCE in rules(TWO_RULES).reads().annotations


def test_a_key_in_nodegates_own_domain_is_refused() -> None:
    with pytest.raises(RulesError, match="in nodegate's own namespace"):
        rules(TWO_RULES.replace(READY_SINCE, "nodegate.dev/ready-since"))


def test_a_key_a_startup_gate_writes_too_is_refused() -> None:
    gate = f"""\
startupGates:
  - name: boot
    match: {{labels: {{role: worker}}}}
    taint: {{key: example.com/booting, effect: NoSchedule}}
    readyWhen: {{annotation: example.com/booted=true}}
    completionAnnotation: {{key: {READY_SINCE}}}
"""
    with pytest.raises(RulesError, match="also the completionAnnotation of startupGates"):
        rules(TWO_RULES + gate)
