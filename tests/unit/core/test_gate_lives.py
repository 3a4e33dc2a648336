"""Each life of a startup gate counts its times from its own beginning: the node's creation, or
the reboot (first sight of the new bootID) for a re-gate; evidence from an earlier life (the
previous boot, an earlier Node object of the same name) never lifts it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.sightings import BootSight, Sighting, track_boot
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.node_waits import NodeContext, waits
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from tests.unit.core.builders import NOW, applied, node, ready_pods, rules

GATE = NodeTaint("startup.example.com/init", "NoSchedule", "wait")
COMPLETED = "completed.gate.nodegate.dev/warmup"
BOOT = "boot.gate.nodegate.dev/warmup"
REGATED = "regated.gate.nodegate.dev/warmup"
AFTER = "rebooted-after.gate.nodegate.dev/warmup"


def gate_rules(extra: str = "") -> NodeRules:
    return rules(
        """\
        startupGates:
          - name: warmup
            match: {labels: {pool: gpu}}
            taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
            readyWhen:
              pods: {namespace: kube-system, selector: {app: init}}
            regateOnReboot: true
        """.rstrip(" ")
        + "".join(f"            {line}\n" for line in extra.splitlines())
    )


REGATE = gate_rules()
POOL = {"pool": "gpu"}
LIFTED_AT = NOW - timedelta(days=2)


def lifted_then_rebooted(created_ago: timedelta = timedelta(days=3)) -> NodeState:
    """A node whose gate was lifted on boot-1 two days ago, now reporting boot-2."""
    annotations = {COMPLETED: "2026-11-19T12:00:00Z", BOOT: "boot-1"}
    return replace(node(POOL, annotations=annotations, created=NOW - created_ago), boot_id="boot-2")


def regate(state: NodeState, facts: PlanFacts) -> NodeState:
    result = plan(state, REGATE, facts)
    assert result.gates_put_back == ("warmup",)
    return applied(result, state)


def test_readiness_after_the_reboot_lifts_a_re_gate_written_later() -> None:
    # Reboot seen at NOW - 60 s (or nodegate was down); pod Ready 30 s ago; re-gate written NOW.
    rebooted = lifted_then_rebooted()
    facts = PlanFacts(now=NOW, boot_first_seen=NOW - timedelta(seconds=60))
    ready = {"warmup": NOW - timedelta(seconds=30)}
    regated = regate(rebooted, replace(facts, gate_pod_signals=ready_pods(ready)))
    later = PlanFacts(now=NOW + timedelta(seconds=1), gate_pod_signals=ready_pods(ready))
    assert plan(regated, REGATE, later).lifted_gates == ("warmup",)


def test_readiness_after_the_reboot_lifts_the_gate_when_nodegate_was_down_all_along() -> None:
    # No sight of the reboot at all (nodegate started after it): only the lift bounds it.
    ready = {"warmup": NOW - timedelta(seconds=30)}
    regated = regate(lifted_then_rebooted(), PlanFacts(now=NOW, gate_pod_signals=ready_pods(ready)))
    week = PlanFacts(now=NOW + timedelta(days=7), gate_pod_signals=ready_pods(ready))
    assert plan(regated, REGATE, week).lifted_gates == ("warmup",)


def test_readiness_from_before_the_previous_boot_was_last_seen_does_not_lift() -> None:
    seen_up = NOW - timedelta(seconds=20)
    facts = PlanFacts(
        now=NOW, boot_first_seen=NOW - timedelta(seconds=5), previous_boot_seen=seen_up
    )
    regated = regate(lifted_then_rebooted(), facts)
    assert regated.annotations[AFTER] == "2026-11-21T11:59:40Z"
    stale = {"warmup": seen_up}  # the pod's status from the old boot, not yet rewritten
    assert (
        plan(regated, REGATE, replace(facts, gate_pod_signals=ready_pods(stale))).remove_taints
        == ()
    )
    fresh = {"warmup": seen_up + timedelta(seconds=1)}
    lifted = plan(regated, REGATE, replace(facts, gate_pod_signals=ready_pods(fresh)))
    assert lifted.lifted_gates == ("warmup",)


def test_readiness_from_before_the_lift_never_lifts_a_re_gate() -> None:
    regated = regate(lifted_then_rebooted(), PlanFacts(now=NOW))
    stale = {"warmup": LIFTED_AT}
    assert (
        plan(regated, REGATE, PlanFacts(now=NOW, gate_pod_signals=ready_pods(stale))).remove_taints
        == ()
    )


def test_a_re_gates_timeout_counts_from_the_reboot_not_the_nodes_creation() -> None:
    rules_ = gate_rules("timeout: 10m\nonTimeout: lift")
    facts = PlanFacts(now=NOW, boot_first_seen=NOW - timedelta(minutes=2))
    regated = applied(plan(lifted_then_rebooted(), rules_, facts), lifted_then_rebooted())
    assert GATE in regated.taints
    soon = plan(regated, rules_, PlanFacts(now=NOW + timedelta(seconds=1)))
    assert soon.remove_taints == ()
    assert soon.recheck_after == timedelta(minutes=7, seconds=59)
    late = plan(regated, rules_, PlanFacts(now=NOW + timedelta(minutes=8)))
    assert late.timed_out_gates == ("warmup",)
    assert late.lifted_gates == ("warmup",)


def test_a_re_gate_record_forged_at_the_end_of_time_is_planned_and_explained() -> None:
    """A node may write its own gate records: a re-gate dated 9999-12-31 must not overflow the
    timeout arithmetic (the node's plan failed, and explain with it); a life cannot begin
    after now."""
    rules_ = gate_rules("timeout: 10m\nonTimeout: lift")
    forged = node(POOL, (GATE,), annotations={REGATED: "9999-12-31T23:59:59Z"})
    result = plan(forged, rules_, PlanFacts(now=NOW))
    assert result.recheck_after == timedelta(minutes=10)
    lines = waits(forged, rules_, result, NodeContext(), NOW)
    assert any("times out in" in line for line in lines)


def test_gate_records_forged_without_a_time_zone_are_planned() -> None:
    """A node may write its own gate records in any form: a time without a zone (Python reads
    it as naive, and a naive time compared with an aware one raises TypeError) must not make
    the node's plan fail; it is read as UTC."""
    rules_ = gate_rules("timeout: 10m\nonTimeout: lift")
    naive = {REGATED: "2026-11-21T12:00:00", AFTER: "2026-11-21T11:00:00"}
    forged = node(POOL, (GATE,), annotations=naive, created=NOW - timedelta(days=3))
    result = plan(forged, rules_, PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW})))
    assert result.lifted_gates == ("warmup",)


def test_a_completion_record_forged_at_the_first_instant_in_a_far_zone_is_planned() -> None:
    """0001-01-01T00:00:00+14:00 parses, but is before the first instant UTC can show: the
    re-gate's record of it (format_time) overflowed and the node's plan failed. A time that has
    no UTC form is unreadable, as any other garbage the node writes."""
    rebooted = lifted_then_rebooted()
    forged = replace(
        rebooted, annotations={**rebooted.annotations, COMPLETED: "0001-01-01T00:00:00+14:00"}
    )
    result = plan(forged, REGATE, PlanFacts(now=NOW))
    assert result.gates_put_back == ("warmup",)


def test_a_re_gates_min_hold_counts_from_the_reboot() -> None:
    rules_ = gate_rules("minHold: 5m")
    regated = applied(
        plan(lifted_then_rebooted(), rules_, PlanFacts(now=NOW)), lifted_then_rebooted()
    )
    fresh = {"warmup": NOW + timedelta(seconds=10)}
    early = PlanFacts(now=NOW + timedelta(seconds=20), gate_pod_signals=ready_pods(fresh))
    assert plan(regated, rules_, early).remove_taints == ()
    late = PlanFacts(now=NOW + timedelta(minutes=5), gate_pod_signals=ready_pods(fresh))
    assert plan(regated, rules_, late).lifted_gates == ("warmup",)


def test_readiness_written_before_the_node_object_existed_does_not_lift_its_gate() -> None:
    """Both are API-server times in whole seconds: a status written in the Node's creation
    second counts, one the second before does not."""
    fresh_node = node(POOL, taints=(GATE,), created=NOW)
    before = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW - timedelta(seconds=1)}))
    assert plan(fresh_node, REGATE, before).remove_taints == ()
    same_second = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"warmup": NOW}))
    assert plan(fresh_node, REGATE, same_second).lifted_gates == ("warmup",)


def test_a_first_sight_that_reads_before_the_node_object_still_counts() -> None:
    """nodegate's reading of the API server's clock may be half a second off; the pod's status
    write, stamped by the server, decides."""
    fresh_node = node(POOL, taints=(GATE,), created=NOW)
    read_early = Sighting("pod@t", NOW - timedelta(milliseconds=600), True, NOW)
    facts = PlanFacts(now=NOW, gate_pod_signals={"warmup": (read_early,)})
    assert plan(fresh_node, REGATE, facts).lifted_gates == ("warmup",)


def test_a_boot_sight_remembers_when_the_previous_boot_was_last_seen() -> None:
    first = track_boot(None, "boot-1", NOW)
    assert first == BootSight("boot-1", NOW, NOW)
    again = track_boot(first, "boot-1", NOW + timedelta(seconds=10))
    assert again == BootSight("boot-1", NOW, NOW + timedelta(seconds=10))
    rebooted = track_boot(again, "boot-2", NOW + timedelta(seconds=30))
    assert rebooted == BootSight(
        "boot-2", NOW + timedelta(seconds=30), NOW + timedelta(seconds=30), again.last_seen
    )
    assert track_boot(rebooted, "", NOW + timedelta(seconds=40)) == rebooted


def test_a_re_gate_clears_the_nodes_ready_annotation_of_the_previous_boot() -> None:
    rules_ = rules(
        """\
        startupGates:
          - name: warmup
            match: {labels: {pool: gpu}}
            taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
            regateOnReboot: true
        """
    )
    before = lifted_then_rebooted()
    rebooted = replace(before, annotations={**before.annotations, "example.com/ready": "true"})
    regated = applied(plan(rebooted, rules_, PlanFacts(now=NOW)), rebooted)
    assert GATE in regated.taints
    assert "example.com/ready" not in regated.annotations
    assert plan(regated, rules_, PlanFacts(now=NOW)).remove_taints == ()
