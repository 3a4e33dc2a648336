"""Parity with kubernetes-sigs/node-readiness-controller (NRC) v0.5.0: the scenarios of its own
end-to-end suite (test/e2e/e2e_test.go, rules in test/e2e/testdata/*.yaml) replayed on the real
control plane with a running reconciler.

Each scenario's NodeReadinessRule is NRC's own file (tests/unit/migrate/nrc/test/e2e/, copied
unchanged: testdata/*.yaml, and inline/*.yaml cut out of e2e_test.go) converted by `nodegate
migrate node-readiness-controller` (docs/gates.md, "Coming from node-readiness-controller"):
`enforcementMode: bootstrap-only` becomes a startup gate lifting on the condition; `continuous`
a condition taint rule that taints while any required condition does not hold, a condition the
node does not report counting as NRC's default `Unknown`. Nodes carry the labels and conditions
NRC's scenarios give them, and the rule is put in force after the node exists, as NRC's suite
applies it.

NRC's suite also checks its rule status fields, field selectors on its CRD and its finalizer:
nodegate has no CRD (field selectors and status have no counterpart; `nodegate explain` and the
Events say the same), and a deleted rule's `readiness.k8s.io/` taint is released, not removed
(the last test shows that difference).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.text.yaml_input import read_yaml_documents
from nodegate.localcluster.nodes import set_node_condition, wait_until
from nodegate.migrate.conversion import YamlFile, to_yaml
from nodegate.migrate.node_readiness_controller import convert_node_readiness_controller
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    Start,
    after_a_reconcile,
    node_events,
    patch_labels,
    read_node,
    settled,
    taints_of,
    wait_for_claim_released,
    wait_for_event,
    wait_for_taints,
)

PENDING = "pending"
NRC_E2E = Path(__file__).resolve().parents[1] / "unit" / "migrate" / "nrc" / "test" / "e2e"
NRC_COMPLETED = "readiness.k8s.io/bootstrap-completed-bootstrap-test-rule"
"""NRC's completion annotation, kept by `--keep-completion-annotation`; the rule file has no
uid (NRC keys it by uid on a cluster), so the converter uses the legacy name key NRC still
reads."""


def converted(name: str, keep_completion_annotation: bool = False) -> str:
    """NRC's rule file `name` as `nodegate migrate node-readiness-controller` converts it."""
    path = NRC_E2E / name
    nrc_file = YamlFile(str(path), tuple(read_yaml_documents(path.read_text(), str(path))))
    conversion = convert_node_readiness_controller([nrc_file], keep_completion_annotation)
    assert conversion.problems == ()
    return to_yaml(conversion)


def has(key: str) -> Callable[[dict[tuple[str, str], dict[str, Any]]], bool]:
    return lambda taints: (key, "NoSchedule") in taints


def lacks(key: str) -> Callable[[dict[tuple[str, str], dict[str, Any]]], bool]:
    return lambda taints: (key, "NoSchedule") not in taints


def condition(core: k8s_client.CoreV1Api, node: str, kind: str, status: str) -> None:
    set_node_condition(core, node, condition_type=kind, status=status, reason="E2E")


def pending(key: str) -> list[dict[str, str]]:
    return [{"key": key, "value": PENDING, "effect": "NoSchedule"}]


# --- bootstrap-only-rule.yaml -------------------------------------------------------------------


def test_bootstrap_only_taint_is_kept_while_false_removed_on_true_and_stays_removed(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/TestReady"
    node = make_node("bootstrap", labels={"e2e-test": "bootstrap"}, taints=pending(key))
    condition(core_v1, node, "TestReady", "False")
    process = start_reconciler_with(
        converted("testdata/bootstrap-only-rule.yaml", keep_completion_annotation=True)
    )
    settled(process, core_v1, node)
    assert has(key)(taints_of(core_v1, node))

    condition(core_v1, node, "TestReady", "True")
    wait_for_taints(core_v1, node, lacks(key))
    annotations = read_node(core_v1, node)["metadata"]["annotations"]
    assert NRC_COMPLETED in annotations
    assert "completed.gate.nodegate.dev/bootstrap-test-rule" in annotations

    after_a_reconcile(process, lambda: condition(core_v1, node, "TestReady", "False"))
    settled(process, core_v1, node)
    assert lacks(key)(taints_of(core_v1, node))


# --- continuous-rule.yaml -----------------------------------------------------------------------


def test_continuous_rule_adds_and_removes_its_taint_as_the_condition_flips(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/StorageReady"
    node = make_node("continuous", labels={"e2e-test": "continuous"})
    condition(core_v1, node, "StorageReady", "True")
    process = start_reconciler_with(converted("testdata/continuous-rule.yaml"))
    settled(process, core_v1, node)
    assert lacks(key)(taints_of(core_v1, node))

    condition(core_v1, node, "StorageReady", "False")
    assert wait_for_taints(core_v1, node, has(key))[(key, "NoSchedule")]["value"] == PENDING

    condition(core_v1, node, "StorageReady", "True")
    wait_for_taints(core_v1, node, lacks(key))


# --- multi-condition-rule.yaml ------------------------------------------------------------------


def test_multi_condition_rule_lifts_only_when_all_conditions_hold(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/Ready"
    node = make_node("multi", labels={"e2e-test": "multi-condition"})
    condition(core_v1, node, "NetworkReady", "False")
    condition(core_v1, node, "StorageReady", "False")
    process = start_reconciler_with(converted("testdata/multi-condition-rule.yaml"))
    wait_for_taints(core_v1, node, has(key))

    after_a_reconcile(process, lambda: condition(core_v1, node, "NetworkReady", "True"))
    settled(process, core_v1, node)
    assert has(key)(taints_of(core_v1, node))

    condition(core_v1, node, "StorageReady", "True")
    wait_for_taints(core_v1, node, lacks(key))


# --- node-selector-rule.yaml --------------------------------------------------------------------


def test_node_selector_taints_the_worker_and_leaves_the_control_plane_node_alone(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/test-taint"
    worker = make_node("worker", labels={"node-role.kubernetes.io/worker": ""})
    control = make_node("control-plane", labels={"node-role.kubernetes.io/control-plane": ""})
    process = start_reconciler_with(converted("testdata/node-selector-rule.yaml"))
    wait_for_taints(core_v1, worker, has(key))
    settled(process, core_v1, control)
    assert lacks(key)(taints_of(core_v1, control))


# --- dryrun-rule.yaml ---------------------------------------------------------------------------


def test_dry_run_rule_writes_nothing_and_reports_what_it_would_add(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/test-taint"
    node = make_node("dryrun", labels={"e2e-test": "dryrun"})
    condition(core_v1, node, "TestReady", "False")
    process = start_reconciler_with(converted("testdata/dryrun-rule.yaml"))
    (event,) = wait_for_event(core_v1, node, "DryRunTaintWouldAdd")
    assert event.message == (
        f"dry run: rule dryrun-test-rule would add taint {key}={PENDING}:NoSchedule (a condition "
        "matches); not written"
    )
    settled(process, core_v1, node)
    stored = read_node(core_v1, node)
    assert lacks(key)(taints_of(core_v1, node))
    assert OWNED_TAINTS_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert (
        process.metric("nodegate_dry_run_nodes", rule="dryrun-test-rule", action="add_taint") == 1.0
    )
    assert (
        process.metric(
            "nodegate_dry_run_changes_total", rule="dryrun-test-rule", action="add_taint"
        )
        == 1.0
    )


# --- "should emit events for taint operations" ----------------------------------------------------


def test_a_pre_existing_taint_is_adopted_then_removed_and_added_again_with_events(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/EventTest"
    node = make_node("events", labels={"e2e-test": "events"}, taints=pending(key))
    condition(core_v1, node, "EventTest", "False")
    process = start_reconciler_with(converted("inline/event-test-rule.yaml"))
    (adopted,) = wait_for_event(core_v1, node, "TaintAdopted")
    assert "event-test-rule" in adopted.message
    assert process.metric("nodegate_taints_adopted_total", rule="event-test-rule") == 1.0
    wait_until(
        lambda: (
            (read_node(core_v1, node)["metadata"].get("annotations") or {}).get(
                OWNED_TAINTS_ANNOTATION
            )
            == f"{key}:NoSchedule"
        ),
        TIMEOUT,
        "the adopted taint claimed",
    )

    condition(core_v1, node, "EventTest", "True")
    wait_for_taints(core_v1, node, lacks(key))
    condition(core_v1, node, "EventTest", "False")
    wait_for_taints(core_v1, node, has(key))

    taint = f"{key}={PENDING}:NoSchedule (rule event-test-rule"

    def said(change: str) -> bool:
        """Events are sent after the write they tell of (node writes go first): wait for them."""
        return any(
            (e.message or "").startswith(f"{change} taint {taint}")
            for e in node_events(core_v1, node)
            if e.reason == "NodegateUpdated"
        )

    wait_until(lambda: said("removed"), TIMEOUT, "the removal's Event")
    wait_until(lambda: said("added"), TIMEOUT, "the addition's Event")


# --- "should taint a node when a required condition is completely missing" ----------------------


def test_a_node_not_reporting_the_condition_is_tainted_until_it_reports_it_true(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    key = "readiness.k8s.io/MissingConditionTest"
    node = make_node("missing", labels={"e2e-test": "missing-condition"})
    condition(core_v1, node, "Placeholder", "True")
    start_reconciler_with(converted("inline/missing-condition-rule.yaml"))
    wait_for_taints(core_v1, node, has(key))
    condition(core_v1, node, "MissingConditionTest", "True")
    wait_for_taints(core_v1, node, lacks(key))


# --- "should clean up managed taints when the rule is deleted": the one difference -------------


def test_deleting_the_rule_releases_its_readiness_taint_instead_of_removing_it(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    rules_configmap: Callable[..., str],
) -> None:
    key = "readiness.k8s.io/FinalizerTest"
    node = make_node("finalizer", labels={"e2e-test": "finalizer"})
    condition(core_v1, node, "FinalizerTest", "False")
    process = start_reconciler_with(converted("inline/finalizer-test-rule.yaml"))
    wait_for_taints(core_v1, node, has(key))

    other = HEADER + textwrap.dedent(
        """\
        labelTaints:
          - name: unrelated
            match: {labels: {example.com/unrelated: "yes"}}
            taint: {key: example.com/unrelated, effect: NoSchedule}
            nodeMayLift: true
        """
    )
    rules_configmap(other)
    wait_for_claim_released(process, core_v1, node)
    assert has(key)(taints_of(core_v1, node))


# --- NRC's controller unit tests and webhook (internal/controller, internal/webhook) -------------


def converted_text(text: str, keep_completion_annotation: bool = False) -> str:
    """NodeReadinessRule documents as `nodegate migrate node-readiness-controller` converts them."""
    nrc_file = YamlFile("nrr.yaml", tuple(read_yaml_documents(textwrap.dedent(text), "nrr.yaml")))
    conversion = convert_node_readiness_controller([nrc_file], keep_completion_annotation)
    assert conversion.problems == ()
    return to_yaml(conversion)


def nrr(name: str, mode: str, condition_type: str, key: str, selector: str, uid: str = "") -> str:
    metadata = f"{{name: {name}, uid: {uid}}}" if uid else f"{{name: {name}}}"
    return textwrap.dedent(
        f"""\
        ---
        apiVersion: readiness.node.x-k8s.io/v1alpha1
        kind: NodeReadinessRule
        metadata: {metadata}
        spec:
          conditions: [{{type: {condition_type}, requiredStatus: "True"}}]
          taint: {{key: {key}, effect: NoSchedule, value: {PENDING}}}
          enforcementMode: {mode}
          nodeSelector: {{matchLabels: {selector}}}
        """
    )


def test_a_rule_in_force_before_the_node_joins_taints_it_until_its_condition_holds(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    """nodereadinessrule_controller_test "when a new node is added: should trigger
    reconciliation for existing rules": the rule first, then a node reporting nothing."""
    key = "readiness.k8s.io/LateNode"
    start_reconciler_with(converted_text(nrr("late", "continuous", "LateNode", key, "{e2e: late}")))
    node = make_node("late", labels={"e2e": "late"})
    wait_for_taints(core_v1, node, has(key))
    condition(core_v1, node, "LateNode", "Unknown")
    condition(core_v1, node, "LateNode", "True")
    wait_for_taints(core_v1, node, lacks(key))


def test_continuous_rules_sharing_a_taint_on_disjoint_selectors_each_decide_their_own_nodes(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    """nodereadinessgaterule_webhook_test "Taint Conflict Detection": NRC accepts two rules with
    one taint when their selectors cannot overlap; the rule that does not select a node must not
    undo what the one that does decided."""
    key = "readiness.k8s.io/network"
    rules = converted_text(
        nrr("cni-zone-a", "continuous", "NetworkReady", key, "{zone: a}")
        + nrr("cni-zone-b", "continuous", "CalicoReady", key, "{zone: b}")
    )
    a = make_node("zone-a", labels={"zone": "a"})
    b = make_node("zone-b", labels={"zone": "b"})
    condition(core_v1, a, "NetworkReady", "False")
    condition(core_v1, b, "CalicoReady", "True")
    process = start_reconciler_with(rules)
    wait_for_taints(core_v1, a, has(key))
    settled(process, core_v1, b)
    assert lacks(key)(taints_of(core_v1, b)), "zone-a's rule tainted a zone-b node"

    condition(core_v1, a, "NetworkReady", "True")
    wait_for_taints(core_v1, a, lacks(key))
    after_a_reconcile(process, lambda: condition(core_v1, b, "CalicoReady", "False"))
    wait_for_taints(core_v1, b, has(key))
    settled(process, core_v1, a)
    assert lacks(key)(taints_of(core_v1, a)), "zone-b's rule tainted a zone-a node"


def test_a_node_that_stops_matching_the_selector_loses_the_rules_taint(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    """node_controller_test "a rule's node selector does not match: should not remove the
    taint": NRC leaves a taint on a node its rule no longer selects; nodegate removes it
    (documented in docs/migrating.md), as a rule's taint follows its match."""
    key = "readiness.k8s.io/Selector"
    node = make_node("selector", labels={"e2e": "selector"})
    process = start_reconciler_with(
        converted_text(nrr("selector", "continuous", "Selector", key, "{e2e: selector}"))
    )
    wait_for_taints(core_v1, node, has(key))
    after_a_reconcile(process, lambda: patch_labels(core_v1, node, {"e2e": "elsewhere"}))
    wait_for_taints(core_v1, node, lacks(key))


def test_a_node_nrc_completed_is_not_gated_again_after_the_switch(
    core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str], start_reconciler_with: Start
) -> None:
    """node_controller_test "isBootstrapCompleted": a node carrying NRC's completion annotation
    (the uid key `kubectl get nrr -o yaml` gives) is completed; with --keep-completion-annotation
    the converted gate (backfill on) never puts the taint back on it, conditions False, even
    though the reconciler's cache dropped that annotation until the rules named it. (NRC's older
    name key is not read beside the uid key: docs/migrating.md.)"""
    key = "readiness.k8s.io/Completed"
    uid = "6a1f3c2e-0000-4000-8000-000000000001"
    rules = converted_text(
        nrr("completed", "bootstrap-only", "Completed", key, "{e2e: completed}", uid=uid),
        keep_completion_annotation=True,
    )
    done = '{"rule-name":"completed"}'
    by_uid = make_node(
        "by-uid",
        labels={"e2e": "completed"},
        annotations={f"readiness.k8s.io/bootstrap-completed-{uid}": done},
    )
    fresh = make_node("fresh", labels={"e2e": "completed"})
    for node in (by_uid, fresh):
        condition(core_v1, node, "Completed", "False")
    process = start_reconciler_with(rules)
    wait_for_taints(core_v1, fresh, has(key))
    settled(process, core_v1, by_uid)
    assert lacks(key)(taints_of(core_v1, by_uid)), "NRC completed it, and it was gated again"


def test_changing_a_converted_rules_effect_moves_the_taint_instead_of_leaving_the_old_one(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    rules_configmap: Callable[..., str],
) -> None:
    """nodereadinessrule_controller_test "should reject attempts to change taint.effect": NRC's
    way to change it is to delete the rule (its finalizer removes the taint) and create it
    again. nodegate edits the rule in place: the taint it put there under the old effect goes."""
    key = "readiness.k8s.io/Effect"
    rules = converted_text(nrr("effect", "continuous", "Effect", key, "{e2e: effect}"))
    node = make_node("effect", labels={"e2e": "effect"})
    process = start_reconciler_with(rules)
    wait_for_taints(core_v1, node, has(key))

    rules_configmap(rules.replace("effect: NoSchedule", "effect: PreferNoSchedule"))
    wait_for_taints(
        core_v1, node, lambda t: (key, "PreferNoSchedule") in t and (key, "NoSchedule") not in t
    )
    settled(process, core_v1, node)
    assert (key, "NoSchedule") not in taints_of(core_v1, node)
