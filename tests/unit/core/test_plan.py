"""The planner: what a node should carry under the rules, and the smallest change to get there."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from nodegate.core.decisions.node_trust import seal_taint
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.sightings import (
    Sighting,
    condition_key,
    condition_token,
    episode_digest,
)
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import TRUSTED_POOL_LABEL
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint
from nodegate.core.rules.node_marks import GATE_BUSY, GATE_SIGNALS, OWNED_TAINTS_ANNOTATION
from tests.unit.core.builders import NOW, applied, node, ready_pods, rules

CI_RULES = rules(
    """\
    labelTaints:
      - name: ci
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        nodeMayLift: true
    """
)
CI_TAINT = NodeTaint("example.com/dedicated", "NoSchedule", "ci")
FACTS = PlanFacts(now=NOW)


def test_label_rule_adds_its_taint_to_a_matching_node() -> None:
    result = plan(node({"example.com/dedicated": "ci"}), CI_RULES, FACTS)
    assert [c.taint for c in result.add_taints] == [CI_TAINT]
    assert result.add_taints[0].rules == ("ci",)


def test_taint_goes_when_the_label_goes() -> None:
    result = plan(node({}, taints=(CI_TAINT,)), CI_RULES, FACTS)
    assert [c.taint for c in result.remove_taints] == [CI_TAINT]


def test_node_already_matching_needs_no_write() -> None:
    matching = node(
        {"example.com/dedicated": "ci"},
        taints=(CI_TAINT,),
        annotations={OWNED_TAINTS_ANNOTATION: "example.com/dedicated:NoSchedule"},
    )
    assert plan(matching, CI_RULES, FACTS).is_empty


def test_first_visit_records_ownership_of_a_taint_the_node_was_born_with() -> None:
    born_tainted = node({"example.com/dedicated": "ci"}, taints=(CI_TAINT,))
    result = plan(born_tainted, CI_RULES, FACTS)
    assert not result.add_taints and not result.remove_taints
    assert result.owned_annotation == "example.com/dedicated:NoSchedule"


def test_wrong_value_of_an_owned_taint_is_replaced() -> None:
    stale = NodeTaint("example.com/dedicated", "NoSchedule", "old")
    result = plan(node({"example.com/dedicated": "ci"}, taints=(stale,)), CI_RULES, FACTS)
    assert [c.taint for c in result.remove_taints] == [stale]
    assert [c.taint for c in result.add_taints] == [CI_TAINT]


def test_foreign_taints_are_never_removed() -> None:
    foreign = (
        NodeTaint("node.kubernetes.io/unreachable", "NoExecute", time_added="2026-01-01T00:00:00Z"),
        NodeTaint("example.com/dedicated", "NoExecute", "ci"),  # same key, other effect
        NodeTaint("team.example.com/hold", "NoSchedule"),
    )
    result = plan(node({}, taints=foreign), CI_RULES, FACTS)
    assert result.remove_taints == ()


OLD_RULE = NodeTaint("example.com/old-rule", "NoSchedule", "x")
CLAIMS_OLD_RULE = {OWNED_TAINTS_ANNOTATION: "example.com/old-rule:NoSchedule"}


def test_taint_of_a_rule_deleted_from_the_file_is_cleaned_up_via_the_annotation() -> None:
    annotated = node(taints=(OLD_RULE,), annotations=CLAIMS_OLD_RULE)
    history = PlanFacts(now=NOW, previously_owned=frozenset({OLD_RULE.identity}))
    result = plan(annotated, CI_RULES, history)
    assert [c.taint for c in result.remove_taints] == [OLD_RULE]
    assert result.remove_taints[0].why == "no rule in the rules file owns it any more"
    assert result.owned_annotation == ""


def test_an_annotation_claim_no_rule_ever_made_removes_nothing() -> None:
    """A kubelet may write its own Node's annotations: a claim alone is never enough."""
    annotated = node(taints=(OLD_RULE,), annotations=CLAIMS_OLD_RULE)
    assert plan(annotated, CI_RULES, FACTS).remove_taints == ()


@pytest.mark.parametrize(
    "reserved",
    [
        NodeTaint("node.kubernetes.io/unschedulable", "NoSchedule"),
        NodeTaint("karpenter.sh/disrupted", "NoSchedule"),
        NodeTaint("ToBeDeletedByClusterAutoscaler", "NoSchedule", "1700000000"),
        NodeTaint("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true"),
    ],
    ids=lambda t: t.key,
)
def test_a_reserved_taint_is_never_removed_whatever_annotation_and_history_say(
    reserved: NodeTaint,
) -> None:
    forged = node(
        taints=(reserved,),
        annotations={OWNED_TAINTS_ANNOTATION: f"{reserved.key}:{reserved.effect}"},
    )
    history = PlanFacts(now=NOW, previously_owned=frozenset({reserved.identity}))
    assert plan(forged, CI_RULES, history).remove_taints == ()


def test_another_rule_wanting_the_same_taint_keeps_it() -> None:
    two = rules(
        """\
        labelTaints:
          - name: ci
            match: {labels: {pool: ci}}
            taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
            nodeMayLift: true
          - name: ci-team
            match: {labels: {team: ci}}
            taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
            nodeMayLift: true
        """
    )
    result = plan(node({"team": "ci"}, taints=(CI_TAINT,)), two, FACTS)
    assert result.remove_taints == ()


CONDITION_RULES = rules(
    """\
    conditionTaints:
      - name: nic-broken
        conditions: [{type: NetworkInterfaceCard, status: "Kaput|Ruined"}]
        for: 30s
        taint: {key: example.com/nic, value: broken, effect: NoExecute}
      - name: sticky
        conditions: [{typePattern: ".*Pressure", status: "True", reason: "Kubelet.*"}]
        onRecovery: keep
        taint: {key: example.com/pressure, effect: NoSchedule}
    """
)


def nic(status: str, since: timedelta) -> NodeCondition:
    return NodeCondition("NetworkInterfaceCard", status, last_transition_time=NOW - since)


def seen(condition: NodeCondition, ago: timedelta) -> PlanFacts:
    """Facts in which the reconciler first saw `condition`'s episode `ago`."""
    sighting = Sighting(condition_token(condition), NOW - ago)
    return PlanFacts(now=NOW, condition_sightings={condition_key(condition): sighting})


def test_condition_taint_waits_for_the_hold_and_asks_to_be_rechecked() -> None:
    kaput = nic("Kaput", timedelta(seconds=10))
    result = plan(node(conditions=(kaput,)), CONDITION_RULES, seen(kaput, timedelta(seconds=10)))
    assert result.add_taints == ()
    assert result.recheck_after == timedelta(seconds=20)


def test_condition_taint_is_added_after_the_hold_with_time_added() -> None:
    ruined = nic("Ruined", timedelta(minutes=1))
    result = plan(node(conditions=(ruined,)), CONDITION_RULES, seen(ruined, timedelta(minutes=1)))
    [added] = result.add_taints
    assert added.taint == NodeTaint(
        "example.com/nic", "NoExecute", "broken", "2026-11-21T12:00:00Z"
    )


def test_the_hold_counts_from_the_first_sight_whatever_time_the_node_wrote() -> None:
    """A node whose clock is behind writes a transition an hour old: `for` is not skipped."""
    behind = nic("Kaput", timedelta(hours=1))
    result = plan(node(conditions=(behind,)), CONDITION_RULES, seen(behind, timedelta(seconds=5)))
    assert result.add_taints == ()
    assert result.recheck_after == timedelta(seconds=25)


def test_a_condition_not_yet_sighted_holds_from_now() -> None:
    result = plan(node(conditions=(nic("Kaput", timedelta(hours=1)),)), CONDITION_RULES, FACTS)
    assert result.add_taints == ()
    assert result.recheck_after == timedelta(seconds=30)


def test_a_sighting_of_an_earlier_episode_does_not_count_for_a_new_one() -> None:
    """Same status, a new transition time: it went away and came back unseen, so `for` begins
    again."""
    earlier = seen(nic("Kaput", timedelta(hours=1)), timedelta(minutes=10))
    again = nic("Kaput", timedelta(seconds=2))
    result = plan(node(conditions=(again,)), CONDITION_RULES, earlier)
    assert result.add_taints == ()
    assert result.recheck_after == timedelta(seconds=30)


def test_condition_without_transition_time_fires_once_its_hold_has_passed() -> None:
    bare = NodeCondition("NetworkInterfaceCard", "Kaput")
    result = plan(node(conditions=(bare,)), CONDITION_RULES, seen(bare, timedelta(seconds=31)))
    assert [c.taint.key for c in result.add_taints] == ["example.com/nic"]


@pytest.mark.parametrize(
    "status", ["Kaputt", "NotKaput", "Ruined!"], ids=["longer", "prefixed", "suffixed"]
)
def test_a_status_that_only_contains_the_regex_does_not_match(status: str) -> None:
    """`status: "Kaput|Ruined"` is matched in full, never as a substring. Sighted an hour ago,
    past the rule's `for: 30s`, a status that matched would be tainted here (as "Ruined" is
    in test_condition_taint_is_added_after_the_hold_with_time_added): the hold cannot hide a
    substring match."""
    reported = nic(status, timedelta(hours=1))
    result = plan(node(conditions=(reported,)), CONDITION_RULES, seen(reported, timedelta(hours=1)))
    assert result.add_taints == ()
    assert result.recheck_after is None  # not a hold under way: no match at all


def test_a_reason_that_only_contains_the_regex_does_not_match() -> None:
    """`reason: "Kubelet.*"` is matched in full too: a reason with text before it is another
    reason (the rule has no `for`: a match would be tainted at once)."""
    pressure = NodeCondition("MemoryPressure", "True", reason="NotKubeletHasPressure")
    result = plan(node(conditions=(pressure,)), CONDITION_RULES, FACTS)
    assert result.add_taints == ()


def test_recovered_condition_removes_the_taint() -> None:
    tainted = (NodeTaint("example.com/nic", "NoExecute", "broken", "2026-11-21T11:00:00Z"),)
    result = plan(
        node(taints=tainted, conditions=(nic("OK", timedelta(0)),)), CONDITION_RULES, FACTS
    )
    assert [c.taint for c in result.remove_taints] == list(tainted)


def test_on_recovery_keep_leaves_the_taint_for_a_human() -> None:
    tainted = (NodeTaint("example.com/pressure", "NoSchedule"),)
    result = plan(node(taints=tainted), CONDITION_RULES, FACTS)
    assert result.remove_taints == ()


def test_type_pattern_and_reason_regex_select_the_condition() -> None:
    pressure = NodeCondition("MemoryPressure", "True", reason="KubeletHasInsufficientMemory")
    result = plan(node(conditions=(pressure,)), CONDITION_RULES, FACTS)
    assert [c.taint.key for c in result.add_taints] == ["example.com/pressure"]


GATE_RULES = rules(
    """\
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen:
          pods: {namespace: kube-system, selector: {app: init}}
          annotation: example.com/ready=true
        timeout: 10m
        onTimeout: lift
    """
)
GATE = NodeTaint("startup.example.com/init", "NoSchedule", "wait")


def test_startup_gate_is_never_added_by_the_planner() -> None:
    assert plan(node({"pool": "gpu"}), GATE_RULES, FACTS).add_taints == ()


def test_startup_gate_stays_until_ready() -> None:
    result = plan(node({"pool": "gpu"}, taints=(GATE,)), GATE_RULES, FACTS)
    assert result.remove_taints == ()
    assert result.recheck_after == timedelta(minutes=10)


def test_startup_gate_is_lifted_when_the_init_pod_is_ready() -> None:
    facts = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW}))
    result = plan(node({"pool": "gpu"}, taints=(GATE,)), GATE_RULES, facts)
    assert [c.taint for c in result.remove_taints] == [GATE]
    assert result.remove_taints[0].why == "init pod is Ready"


def test_startup_gate_is_lifted_by_the_ready_annotation() -> None:
    ready = node({"pool": "gpu"}, taints=(GATE,), annotations={"example.com/ready": "true"})
    assert [c.taint for c in plan(ready, GATE_RULES, FACTS).remove_taints] == [GATE]


def test_startup_gate_is_lifted_on_timeout_when_on_timeout_is_lift() -> None:
    old = node({"pool": "gpu"}, taints=(GATE,), created=NOW - timedelta(minutes=11))
    assert [c.taint for c in plan(old, GATE_RULES, FACTS).remove_taints] == [GATE]


def test_startup_gate_is_not_lifted_when_the_labels_do_not_match_yet() -> None:
    """Pool labels often arrive after registration; only readiness or timeout lift a gate."""
    unlabelled = node({}, taints=(GATE,))
    result = plan(unlabelled, GATE_RULES, FACTS)
    assert result.remove_taints == ()
    assert result.recheck_after == timedelta(minutes=10)


def test_startup_gate_on_a_node_whose_labels_do_not_match_still_lifts_when_ready() -> None:
    ready = node({}, taints=(GATE,), annotations={"example.com/ready": "true"})
    assert [c.taint for c in plan(ready, GATE_RULES, FACTS).remove_taints] == [GATE]


POOLED_RULES_TEXT = """\
        labelTaints:
          - name: ci
            match: {labels: {node-role.kubernetes.io/ci: ""}}
            taint: {key: example.com/ci, effect: NoSchedule}
        nodePools:
          - name: ci
            provider: oke
            size: 1
            reconcilerLabels: {node-role.kubernetes.io/ci: ""}
          - name: payments
            provider: oke
            size: 1
            reconcilerLabels: {node-restriction.kubernetes.io/tenant: payments}
        """


def test_reconciler_labels_of_the_pool_the_node_registered_in_are_applied() -> None:
    registered = {"nodegate.dev/pool": "ci", TRUSTED_POOL_LABEL: "ci"}
    result = plan(node(registered), rules(POOLED_RULES_TEXT), FACTS)
    assert [(c.key, c.value) for c in result.set_labels] == [("node-role.kubernetes.io/ci", "")]
    assert [c.taint.key for c in result.add_taints] == ["example.com/ci"]


def test_a_pool_the_node_only_claims_with_its_own_label_grants_no_reconciler_labels() -> None:
    claimed = plan(node({"nodegate.dev/pool": "payments"}), rules(POOLED_RULES_TEXT), FACTS)
    assert claimed.set_labels == ()
    assert any("claims pool 'payments'" in warning for warning in claimed.warnings)


def test_a_registration_seal_becomes_the_trusted_label_and_goes_in_one_write() -> None:
    sealed = replace(node({"nodegate.dev/pool": "payments"}), taints=(seal_taint("payments"),))
    result = plan(sealed, rules(POOLED_RULES_TEXT), FACTS)
    assert (TRUSTED_POOL_LABEL, "payments") in [(c.key, c.value) for c in result.set_labels]
    assert ("node-restriction.kubernetes.io/tenant", "payments") in [
        (c.key, c.value) for c in result.set_labels
    ]
    assert [c.taint for c in result.remove_taints] == [seal_taint("payments")]
    after = applied(result, sealed)
    assert plan(after, rules(POOLED_RULES_TEXT), FACTS).is_empty


def test_a_seal_of_a_pool_the_rules_do_not_have_is_lifted_and_not_recorded() -> None:
    sealed = replace(node({}), taints=(seal_taint("later"),))
    result = plan(sealed, rules(POOLED_RULES_TEXT), FACTS)
    assert result.set_labels == ()
    assert [c.taint for c in result.remove_taints] == [seal_taint("later")]
    assert result.remove_taints[0].why.endswith("if the rules have that pool)")


def test_a_claim_of_another_pool_than_the_registered_one_is_ignored() -> None:
    steered = {"nodegate.dev/pool": "payments", TRUSTED_POOL_LABEL: "ci"}
    result = plan(node(steered), rules(POOLED_RULES_TEXT), FACTS)
    assert [(c.key, c.value) for c in result.set_labels] == [("node-role.kubernetes.io/ci", "")]


def test_restored_persistent_label_never_overwrites_a_present_one() -> None:
    facts = PlanFacts(now=NOW, restored_labels={"persist.example.com/team": "old"})
    result = plan(node({"persist.example.com/team": "new"}), CI_RULES, facts)
    assert result.set_labels == ()


def test_applying_the_plan_keeps_foreign_taints_in_place() -> None:
    foreign = NodeTaint("node.kubernetes.io/not-ready", "NoSchedule")
    before = node({"example.com/dedicated": "ci"}, taints=(foreign,))
    after = applied(plan(before, CI_RULES, FACTS), before)
    assert after.taints == (foreign, CI_TAINT)


LIFECYCLE_RULES = rules(
    """\
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen:
          pods: {namespace: kube-system, selector: {app: init}}
        minHold: 2m
        regateOnReboot: true
        backfill: true
    """
)
READY = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW - timedelta(seconds=5)}))
COMPLETED = "completed.gate.nodegate.dev/warmup"
BOOT = "boot.gate.nodegate.dev/warmup"
REGATED = "regated.gate.nodegate.dev/warmup"
AFTER = "rebooted-after.gate.nodegate.dev/warmup"


def gated(created_ago: timedelta, **annotations: str) -> NodeState:
    return replace(
        node({"pool": "gpu"}, taints=(GATE,), annotations=annotations, created=NOW - created_ago),
        boot_id="boot-1",
    )


def test_min_hold_keeps_a_ready_gate_until_it_has_passed() -> None:
    result = plan(gated(timedelta(seconds=30)), LIFECYCLE_RULES, READY)
    assert result.remove_taints == ()
    assert result.recheck_after == timedelta(seconds=90)


def test_lifting_a_gate_records_when_and_on_which_boot() -> None:
    result = plan(gated(timedelta(minutes=5)), LIFECYCLE_RULES, READY)
    assert [c.taint for c in result.remove_taints] == [GATE]
    assert result.lifted_gates == ("warmup",)
    [pod] = READY.gate_pod_signals["warmup"]
    assert dict(result.set_annotations) == {
        COMPLETED: "2026-11-21T12:00:00Z",
        BOOT: "boot-1",
        GATE_SIGNALS + "warmup": episode_digest(pod.token),
    }


def test_a_rebooted_node_gets_its_gate_back_when_regate_on_reboot_is_set() -> None:
    rebooted = replace(
        node({"pool": "gpu"}, annotations={COMPLETED: "2026-11-21T11:00:00Z", BOOT: "boot-1"}),
        boot_id="boot-2",
    )
    result = plan(rebooted, LIFECYCLE_RULES, FACTS)
    assert [c.taint for c in result.add_taints] == [GATE]
    assert result.gates_put_back == ("warmup",)
    assert dict(result.set_annotations) == {
        COMPLETED: None,
        REGATED: "2026-11-21T12:00:00Z",
        AFTER: "2026-11-21T11:00:00Z",
        GATE_SIGNALS + "warmup": "",  # nothing shown: no episode to hold against this boot
    }


def test_without_regate_on_reboot_a_lifted_gate_never_comes_back() -> None:
    rebooted = replace(
        node({"pool": "gpu"}, annotations={COMPLETED: "2026-11-21T11:00:00Z", BOOT: "boot-1"}),
        boot_id="boot-2",
    )
    assert plan(rebooted, GATE_RULES, FACTS).add_taints == ()


def test_readiness_from_before_the_reboot_does_not_lift_a_re_gated_node() -> None:
    records = {REGATED: "2026-11-21T11:50:00Z", AFTER: "2026-11-21T11:59:55Z"}
    regated = gated(timedelta(hours=1), **records)
    assert plan(regated, LIFECYCLE_RULES, READY).remove_taints == ()  # ready since 11:59:55
    fresh = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW}))
    result = plan(regated, LIFECYCLE_RULES, fresh)
    assert [c.taint for c in result.remove_taints] == [GATE]
    assert (REGATED, None) in result.set_annotations
    assert (AFTER, None) in result.set_annotations


@pytest.mark.parametrize(
    ("workload_pods", "backfilled"),
    [(0, True), (1, False), (None, False)],
    ids=["idle", "busy", "unknown"],
)
def test_backfill_gates_only_an_idle_node(workload_pods: int | None, backfilled: bool) -> None:
    facts = PlanFacts(now=NOW, workload_pods=workload_pods)
    result = plan(node({"pool": "gpu"}), LIFECYCLE_RULES, facts)
    assert bool(result.add_taints) == backfilled


def test_backfill_never_gates_a_node_that_was_gated_before() -> None:
    done = node({"pool": "gpu"}, annotations={COMPLETED: "2026-11-21T11:00:00Z"})
    assert plan(done, LIFECYCLE_RULES, PlanFacts(now=NOW, workload_pods=0)).add_taints == ()


def test_a_busy_node_is_recorded_as_such_and_never_backfilled_even_once_idle() -> None:
    """The record is on the Node, not in a process's memory: a restart does not forget it."""
    busy = plan(node({"pool": "gpu"}), LIFECYCLE_RULES, PlanFacts(now=NOW, workload_pods=3))
    assert busy.add_taints == ()
    assert dict(busy.set_annotations) == {GATE_BUSY + "warmup": "2026-11-21T12:00:00Z"}

    idle_later = applied(busy, node({"pool": "gpu"}))
    result = plan(idle_later, LIFECYCLE_RULES, PlanFacts(now=NOW, workload_pods=0))
    assert result.is_empty


def test_a_timed_out_gate_is_reported() -> None:
    old = node({"pool": "gpu"}, taints=(GATE,), created=NOW - timedelta(minutes=11))
    assert plan(old, GATE_RULES, FACTS).timed_out_gates == ("warmup",)


CA_GATE_RULES = rules(
    """\
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup-taint.cluster-autoscaler.kubernetes.io/init, value: wait,
                effect: NoSchedule}
        readyWhen: {annotation: example.com/ready=true}
    """
)
CA_GATE = NodeTaint("startup-taint.cluster-autoscaler.kubernetes.io/init", "NoSchedule", "wait")


def test_a_gate_in_the_autoscalers_startup_domain_is_lifted_when_ready() -> None:
    """The key is in cluster-autoscaler's reserved domain, but a current gate names it."""
    ready = node({"pool": "gpu"}, taints=(CA_GATE,), annotations={"example.com/ready": "true"})
    result = plan(ready, CA_GATE_RULES, FACTS)
    assert [c.taint for c in result.remove_taints] == [CA_GATE]
    assert result.lifted_gates == ("warmup",)


def test_a_gate_in_the_autoscalers_startup_domain_stays_until_ready() -> None:
    result = plan(node({"pool": "gpu"}, taints=(CA_GATE,)), CA_GATE_RULES, FACTS)
    assert result.remove_taints == ()
    assert result.owned_annotation == f"{CA_GATE.key}:{CA_GATE.effect}"


def test_a_deleted_gate_in_the_autoscalers_domain_is_left_to_its_node() -> None:
    """Once no current rule names it, the reserved key is never removed, history or not."""
    claimed = node(
        {"pool": "gpu"},
        taints=(CA_GATE,),
        annotations={OWNED_TAINTS_ANNOTATION: f"{CA_GATE.key}:{CA_GATE.effect}"},
    )
    history = PlanFacts(now=NOW, previously_owned=frozenset({CA_GATE.identity}))
    assert plan(claimed, CI_RULES, history).remove_taints == ()
