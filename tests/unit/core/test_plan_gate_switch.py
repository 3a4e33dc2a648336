"""Switching a gate to a new key (`formerKeys`) and writing another tool's completion
annotation (`completionAnnotation`): nodes born under the old key are gated and lifted with the
gate, the old key is never added, and the old tool's readers keep their annotation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from nodegate.core.decisions.gate_plan import needs_backfill
from nodegate.core.decisions.plan import plan, relevant_view
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from tests.unit.core.builders import NOW, node, ready_pods, rules

NEW_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/initializing"
OLD_KEY = "startup.k8s.io/initializing"
SWITCH = rules(
    f"""\
    startupGates:
      - name: startup
        match:
          expressions: [{{key: kubernetes.azure.com/mode, operator: NotIn, values: [system]}}]
        taint: {{key: {NEW_KEY}, value: wait, effect: NoSchedule}}
        readyWhen:
          pods:
            namespace: kube-system
            selector: {{startup.k8s.io/component: init}}
            readyAnnotation: startup.k8s.io/ready=true
        timeout: 10m
        formerKeys: [{OLD_KEY}]
        completionAnnotation: {{key: startup.k8s.io/completedAt, format: unix}}
        backfill: true
        regateOnReboot: true
    """
)
NEW = NodeTaint(NEW_KEY, "NoSchedule", "wait")
OLD = NodeTaint(OLD_KEY, "NoSchedule", "wait")
FOREIGN = NodeTaint("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true")
WAITING = PlanFacts(now=NOW)
READY = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"startup": NOW}))
COMPLETED = "completed.gate.nodegate.dev/startup"
COMPLETED_AT = "startup.k8s.io/completedAt"
NOW_UNIX = "1795262400"  # 2026-11-21T12:00:00Z


def removed(result_node: NodeState, facts: PlanFacts) -> list[NodeTaint]:
    return [c.taint for c in plan(result_node, SWITCH, facts).remove_taints]


def test_a_node_born_under_the_former_key_stays_gated_until_ready() -> None:
    result = plan(node(taints=(OLD,)), SWITCH, WAITING)
    assert result.remove_taints == () and result.add_taints == ()
    assert result.recheck_after == timedelta(minutes=10)  # its timeout runs as for the gate


def test_a_node_born_under_the_former_key_is_ungated_when_its_init_pod_is_ready() -> None:
    result = plan(node(taints=(OLD, FOREIGN)), SWITCH, READY)
    assert [c.taint for c in result.remove_taints] == [OLD]
    assert result.remove_taints[0].rules == ("startup",)
    assert result.lifted_gates == ("startup",)
    assert dict(result.set_annotations)[COMPLETED] == "2026-11-21T12:00:00Z"


def test_a_node_carrying_both_keys_loses_both_when_ready() -> None:
    assert removed(node(taints=(OLD, NEW)), READY) == [NEW, OLD]


def test_a_node_carrying_both_keys_keeps_both_while_waiting() -> None:
    assert removed(node(taints=(OLD, NEW)), WAITING) == []


def test_the_former_key_is_lifted_on_timeout_like_the_gate() -> None:
    old = node(taints=(OLD,), created=NOW - timedelta(minutes=11))
    assert plan(old, SWITCH, WAITING).timed_out_gates == ("startup",)
    assert removed(old, WAITING) == []  # onTimeout: keep


def test_the_former_key_is_never_added_backfill_adds_the_new_key() -> None:
    result = plan(node(), SWITCH, PlanFacts(now=NOW, workload_pods=0))
    assert [c.taint for c in result.add_taints] == [NEW]


def test_a_node_gated_under_the_former_key_is_not_backfilled() -> None:
    result = plan(node(taints=(OLD,)), SWITCH, PlanFacts(now=NOW, workload_pods=0))
    assert result.add_taints == ()


def test_a_node_gated_under_the_former_key_is_no_backfill_candidate() -> None:
    """Candidates cost the reconciler a LIST of the node's pods: a gated node is none."""
    [gate] = SWITCH.startup_gates
    assert needs_backfill(node(), {}, gate)
    assert not needs_backfill(node(taints=(OLD,)), {}, gate)


def test_a_former_key_is_never_claimed_in_the_ownership_annotation() -> None:
    result = plan(node(taints=(OLD, NEW)), SWITCH, WAITING)
    assert result.owned_annotation == f"{NEW_KEY}:NoSchedule"


def test_a_former_key_dropped_from_the_rules_is_left_on_the_node() -> None:
    """nodegate never claimed it, so a history naming it (it was the gate's key once) is not
    enough: a former key goes only while a current rule names it."""
    without = rules(
        f"""\
        startupGates:
          - name: startup
            match: {{labels: {{pool: gpu}}}}
            taint: {{key: {NEW_KEY}, value: wait, effect: NoSchedule}}
            readyWhen: {{annotation: example.com/ready=true}}
        """
    )
    history = PlanFacts(now=NOW, previously_owned=frozenset({OLD.identity}))
    assert plan(node(taints=(OLD,)), without, history).remove_taints == ()


def switched_back(former_keys: str) -> NodeRules:
    return rules(
        f"""\
        startupGates:
          - name: startup
            match: {{labels: {{pool: gpu}}}}
            taint: {{key: {OLD_KEY}, value: wait, effect: NoSchedule}}
            readyWhen: {{annotation: example.com/ready=true}}
            {former_keys}
        """
    )


def test_a_reserved_former_key_is_lifted_only_while_the_rules_name_it() -> None:
    """Switching back from the autoscaler's prefix: the prefixed key is reserved, so it goes
    with the gate while formerKeys names it, and never once it does not, claimed or not."""
    claim = f"{NEW_KEY}:NoSchedule"
    ready = node(
        taints=(NEW,), annotations={"example.com/ready": "true", OWNED_TAINTS_ANNOTATION: claim}
    )
    history = PlanFacts(now=NOW, previously_owned=frozenset({NEW.identity}))
    named = plan(ready, switched_back(f"formerKeys: [{NEW_KEY}]"), history)
    assert [c.taint for c in named.remove_taints] == [NEW]
    assert plan(ready, switched_back(""), history).remove_taints == ()


def test_lifting_writes_the_completion_annotation_in_unix_seconds() -> None:
    result = plan(node(taints=(NEW,)), SWITCH, READY)
    assert dict(result.set_annotations)[COMPLETED_AT] == NOW_UNIX


def test_the_completion_annotation_is_rfc3339_by_default() -> None:
    rfc = rules(
        f"""\
        startupGates:
          - name: startup
            match: {{labels: {{pool: gpu}}}}
            taint: {{key: {NEW_KEY}, value: wait, effect: NoSchedule}}
            readyWhen: {{annotation: example.com/ready=true}}
            completionAnnotation: {{key: example.com/warm-since}}
        """
    )
    ready = node(taints=(NEW,), annotations={"example.com/ready": "true"})
    annotations = dict(plan(ready, rfc, WAITING).set_annotations)
    assert annotations["example.com/warm-since"] == "2026-11-21T12:00:00Z"


def test_a_node_the_old_tool_completed_is_not_backfilled() -> None:
    """nodetaintshandler skips nodes with its completedAt: so does the gate that writes it."""
    done = node(annotations={COMPLETED_AT: "1795000000"})
    assert plan(done, SWITCH, PlanFacts(now=NOW, workload_pods=0)).add_taints == ()


def test_a_re_gate_after_a_reboot_removes_the_completion_annotation() -> None:
    lifted = {
        COMPLETED: "2026-11-21T11:00:00Z",
        COMPLETED_AT: "1795258800",
        "boot.gate.nodegate.dev/startup": "boot-1",
    }
    rebooted = replace(node(annotations=lifted), boot_id="boot-2")
    result = plan(rebooted, SWITCH, WAITING)
    assert [c.taint for c in result.add_taints] == [NEW]
    assert dict(result.set_annotations)[COMPLETED_AT] is None


def test_the_completion_annotation_is_part_of_what_the_planner_reads() -> None:
    before = node()
    after = replace(before, annotations={COMPLETED_AT: "1795000000"})
    assert relevant_view(before, SWITCH) != relevant_view(after, SWITCH)


TAINTS = st.lists(
    st.sampled_from([NEW, OLD, FOREIGN, NodeTaint(OLD_KEY, "NoExecute", "wait")]),
    unique_by=lambda t: t.identity,
)
FACTS = st.builds(
    PlanFacts,
    now=st.just(NOW),
    gate_pod_signals=st.sampled_from([{}, ready_pods({"startup": NOW})]),
    workload_pods=st.sampled_from([None, 0, 3]),
)


@settings(max_examples=200)
@given(TAINTS, FACTS, st.booleans())
def test_a_former_key_is_never_added_and_goes_only_with_its_gate(
    taints: list[NodeTaint], facts: PlanFacts, claimed: bool
) -> None:
    claim = {OWNED_TAINTS_ANNOTATION: f"{OLD_KEY}:NoSchedule"} if claimed else {}
    before = node(taints=tuple(taints), annotations=claim)
    result = plan(before, SWITCH, replace(facts, previously_owned=frozenset({OLD.identity})))
    assert OLD_KEY not in {c.taint.key for c in result.add_taints}
    gone = {c.taint.identity for c in result.remove_taints}
    if OLD.identity in gone:
        assert result.lifted_gates == ("startup",)
    assert (OLD_KEY, "NoExecute") not in gone  # another effect is not the gate's
