"""Dry-run rules, planned: every rule kind planned as if live, its changes reported in
`NodePlan.dry_run` and left out of what is written."""

from __future__ import annotations

from datetime import timedelta

from nodegate.core.decisions.dry_run import DryRunChange, live_owned_taints
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeTaint
from nodegate.core.rules.node_marks import GATE_COMPLETED, OWNED_TAINTS_ANNOTATION
from nodegate.core.rules.registration import registration_taints
from tests.unit.core.builders import NOW, node, rules

FACTS = PlanFacts(now=NOW)
CI = NodeTaint("example.com/ci", "NoSchedule", "yes")
CI_CLAIM = {OWNED_TAINTS_ANNOTATION: "example.com/ci:NoSchedule"}

DRY_LABEL = rules(
    """\
    labelTaints:
      - name: ci
        dryRun: true
        match: {labels: {example.com/ci: "yes"}}
        taint: {key: example.com/ci, value: "yes", effect: NoSchedule}
        nodeMayLift: true
    """
)


def test_dry_run_label_rule_writes_nothing_and_reports_the_add() -> None:
    result = plan(node({"example.com/ci": "yes"}), DRY_LABEL, FACTS)
    assert result.is_empty
    assert result.dry_run == (
        DryRunChange("ci", "add_taint", "example.com/ci=yes:NoSchedule", "node labels match"),
    )


def test_dry_run_add_is_reported_with_its_event_reason() -> None:
    result = plan(node({"example.com/ci": "yes"}), DRY_LABEL, FACTS)
    assert [c.reason for c in result.dry_run] == ["DryRunTaintWouldAdd"]


def test_dry_run_label_rule_reports_the_removal_and_keeps_the_taint() -> None:
    result = plan(node(taints=(CI,), annotations=CI_CLAIM), DRY_LABEL, FACTS)
    assert result.is_empty
    assert [(c.action, c.reason) for c in result.dry_run] == [
        ("remove_taint", "DryRunTaintWouldRemove")
    ]


def test_a_rule_switched_to_dry_run_leaves_the_taint_its_live_self_owned() -> None:
    owned_before = PlanFacts(now=NOW, previously_owned=frozenset({CI.identity}))
    result = plan(node(taints=(CI,), annotations=CI_CLAIM), DRY_LABEL, owned_before)
    assert result.remove_taints == () and result.owned_annotation is None


def test_dry_run_rule_does_not_claim_a_taint_it_matches() -> None:
    result = plan(node({"example.com/ci": "yes"}, taints=(CI,)), DRY_LABEL, FACTS)
    assert result.is_empty
    assert [c.action for c in result.dry_run] == ["adopt_taint"]


def dry_and_live(live_match: str) -> NodeRules:
    """A dry-run rule and a live one naming the same taint; the live one matches `live_match`."""
    return rules(
        f"""\
        labelTaints:
          - name: ci
            dryRun: true
            match: {{labels: {{example.com/ci: "yes"}}}}
            taint: {{key: example.com/ci, value: "yes", effect: NoSchedule}}
            nodeMayLift: true
          - name: ci-live
            match: {{labels: {{{live_match}}}}}
            taint: {{key: example.com/ci, value: "yes", effect: NoSchedule}}
            nodeMayLift: true
        """
    )


def test_the_taint_history_records_no_taint_only_a_dry_run_rule_names() -> None:
    """Recorded, a dry-run rule's taint would become removable through a node's forged claim
    once the rule is deleted, though nodegate never wrote it (e2e:
    test_hostile_nodes_day2.py::test_a_deleted_dry_run_rule_never_lets_a_node_strip_...)."""
    assert live_owned_taints(DRY_LABEL) == frozenset()
    live = dry_and_live('example.com/ci: "live"')
    assert live_owned_taints(live) == {("example.com/ci", "NoSchedule")}


def test_live_rule_naming_the_same_taint_still_acts() -> None:
    both = dry_and_live('example.com/team: "ci"')
    result = plan(node({"example.com/team": "ci"}), both, FACTS)
    assert [c.taint for c in result.add_taints] == [CI]
    assert result.dry_run == ()


def test_dry_run_condition_rule_reports_what_default_status_would_add() -> None:
    dry = rules(
        """\
        conditionTaints:
          - name: network
            dryRun: true
            conditionPolicy: anyOf
            conditions:
              - {type: NetworkReady, status: "False|Unknown", defaultStatus: Unknown}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
        """
    )
    result = plan(node(), dry, FACTS)
    assert result.is_empty
    assert [(c.rule, c.action, c.subject) for c in result.dry_run] == [
        ("network", "add_taint", "readiness.k8s.io/network:NoSchedule")
    ]


DRY_GATE = rules(
    """\
    startupGates:
      - name: cni
        dryRun: true
        match: {labels: {pool: gpu}}
        taint: {key: readiness.k8s.io/cni, effect: NoSchedule}
        readyWhen:
          conditions: [{type: NetworkReady, status: "True"}]
    nodePools:
      - {name: gpu, provider: oke, size: 1, labels: {pool: gpu}}
    """
)
CNI = NodeTaint("readiness.k8s.io/cni", "NoSchedule")
NET_READY = NodeCondition("NetworkReady", "True", "", NOW)


def test_dry_run_gate_is_not_rendered_into_bootstrap() -> None:
    pool = DRY_GATE.node_pools[0]
    assert registration_taints(DRY_GATE, pool) == ()


def test_dry_run_label_rule_is_not_rendered_into_bootstrap() -> None:
    pooled = rules(
        """\
        labelTaints:
          - name: ci
            dryRun: true
            match: {labels: {example.com/ci: "yes"}}
            taint: {key: example.com/ci, value: "yes", effect: NoSchedule}
            nodeMayLift: true
        nodePools:
          - {name: ci, provider: oke, size: 1, labels: {example.com/ci: "yes"}}
        """
    )
    assert registration_taints(pooled, pooled.node_pools[0]) == ()


def test_dry_run_gate_reports_its_lift_once_and_keeps_the_taint() -> None:
    gated = node({"pool": "gpu"}, taints=(CNI,), conditions=(NET_READY,))
    result = plan(gated, DRY_GATE, FACTS)
    assert result.remove_taints == () and result.lifted_gates == ()
    assert all(key != GATE_COMPLETED + "cni" for key, _ in result.set_annotations)
    assert [(c.action, c.reason, c.why) for c in result.dry_run] == [
        ("lift_gate", "DryRunGateWouldLift", "condition NetworkReady=True")
    ]


def test_dry_run_gate_waiting_on_another_tools_taint_reports_only_its_adoption() -> None:
    gated = node({"pool": "gpu"}, taints=(CNI,))
    assert [c.action for c in plan(gated, DRY_GATE, FACTS).dry_run] == ["adopt_taint"]


def test_dry_run_gate_timeout_is_not_reported_as_a_live_timeout() -> None:
    timing = rules(
        """\
        startupGates:
          - name: cni
            dryRun: true
            match: {labels: {pool: gpu}}
            taint: {key: readiness.k8s.io/cni, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
            timeout: 1m
            onTimeout: lift
        """
    )
    old = node({"pool": "gpu"}, taints=(CNI,), created=NOW - timedelta(minutes=5))
    result = plan(old, timing, FACTS)
    assert (result.timed_out_gates, result.warnings, result.remove_taints) == ((), (), ())
    assert [c.action for c in result.dry_run] == ["lift_gate"]  # its claim goes with the lift


def test_dry_run_persistent_labels_report_the_restore_and_do_not_write_it() -> None:
    dry = rules(
        """\
        persistentLabels:
          prefixes: [persist.example.com/]
          dryRun: true
        """
    )
    facts = PlanFacts(now=NOW, restored_labels={"persist.example.com/team": "a"})
    result = plan(node(), dry, facts)
    assert result.set_labels == ()
    assert [(c.rule, c.action, c.subject, c.reason) for c in result.dry_run] == [
        (
            "persistentLabels",
            "restore_label",
            "persist.example.com/team=a",
            "DryRunLabelWouldRestore",
        )
    ]


def test_live_persistent_labels_are_restored_as_before() -> None:
    live = rules("persistentLabels:\n  prefixes: [persist.example.com/]\n")
    facts = PlanFacts(now=NOW, restored_labels={"persist.example.com/team": "a"})
    result = plan(node(), live, facts)
    assert [(c.key, c.value) for c in result.set_labels] == [("persist.example.com/team", "a")]
    assert result.dry_run == ()
