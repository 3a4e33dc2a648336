"""A Node registered again under its name (`kubectl delete node`, then a kubelet restart inside
the pod GC's grace): the pods Ready for the Node object before it count for the new one when it
reports the same machine in the same boot, never for another machine; a pod written since the
new Node was created counts whatever nodegate kept (`re_registration`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_readiness,
    lifted_taints,
)
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.re_registration import (
    Departure,
    PodWrites,
    departure,
    of_this_node,
    still_deciding,
)
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.sightings_record import (
    DEPARTED_KEY,
    DEPARTED_LIMIT,
    decode_departures,
    encode_departures,
)
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.views.daemon_sets import (
    AgentPod,
)
from tests.unit.core.builders import NOW, node, ready_pods, rules
from tests.unit.core.test_node_agents import WORKER, agent_rules, daemon_set, pod

BOOT, MACHINE = "boot-1", "machine-1"
WRITTEN = NOW - timedelta(hours=1)
"""When the pod's status was last written: while the first Node object existed."""
FIRST = replace(
    node(WORKER, created=NOW - timedelta(days=1)), uid="uid-1", boot_id=BOOT, system_uuid=MACHINE
)
"""The Node object that went."""
AGAIN = replace(FIRST, uid="uid-2", created=NOW)
"""The same machine, in the same boot, registered again under the name."""
OTHER = replace(AGAIN, boot_id="boot-7", system_uuid="machine-7")
"""Another machine given the name."""


def departed(
    gone: NodeState,
    pods: PodWrites,
    before: Departure | None = None,
    at: datetime = NOW,
) -> Departure:
    """What nodegate keeps of `gone` as it goes, with these Ready pods bound to its name."""
    found = departure(gone, pods, before, at)
    assert found is not None
    return found


GONE = departed(FIRST, {"pod-1": WRITTEN}, at=NOW - timedelta(seconds=30))


def test_a_pod_ready_for_the_node_that_went_counts_for_the_same_machine_registered_again() -> None:
    assert of_this_node(AGAIN, "pod-1", WRITTEN, GONE)


def test_it_never_counts_for_another_machine_given_the_name() -> None:
    assert not of_this_node(OTHER, "pod-1", WRITTEN, GONE)


def test_it_never_counts_after_a_reboot_of_the_same_machine() -> None:
    """A new bootID: the pod's containers did not survive it; its kubelet writes it again."""
    assert not of_this_node(replace(AGAIN, boot_id="boot-2"), "pod-1", WRITTEN, GONE)


def test_it_never_counts_for_a_machine_that_reports_only_the_same_boot_id() -> None:
    assert not of_this_node(replace(AGAIN, system_uuid="machine-7"), "pod-1", WRITTEN, GONE)


def test_without_a_departure_a_pod_written_before_the_node_was_created_does_not_count() -> None:
    """nodegate did not see the old Node object go: it cannot tell the machine."""
    assert not of_this_node(AGAIN, "pod-1", WRITTEN, None)


def test_a_pod_written_since_the_node_was_created_counts_whatever_was_kept() -> None:
    """The new machine's kubelet took the pod bound to its name and wrote it."""
    assert of_this_node(OTHER, "pod-1", NOW + timedelta(seconds=5), GONE)


def test_for_another_machine_the_old_pods_write_in_the_creation_second_does_not_count() -> None:
    """Whole-second stamps: the old machine's last write, in the second the new Node was
    created, would count from the creation alone; seen at the departure, it does not."""
    gone = departed(FIRST, {"pod-1": NOW})
    assert of_this_node(OTHER, "pod-1", NOW, None)
    assert not of_this_node(OTHER, "pod-1", NOW, gone)
    assert of_this_node(OTHER, "pod-1", NOW + timedelta(seconds=1), gone)


def test_a_node_that_reported_no_boot_keeps_nothing() -> None:
    assert departure(replace(FIRST, boot_id=""), {"pod-1": WRITTEN}, None, NOW) is None


def test_only_pods_ready_for_the_node_that_went_are_kept() -> None:
    """One written before that Node object existed was not evidence for it either."""
    before_it = NOW - timedelta(days=1, seconds=1)
    assert set(departed(FIRST, {"pod-1": WRITTEN, "pod-0": before_it}).pods) == {"pod-1"}


def test_a_pod_not_written_since_a_reboot_nodegate_saw_is_not_kept() -> None:
    """Its status is the previous boot's, whatever bootID the Node reports now."""
    assert departure(FIRST, {"pod-1": WRITTEN}, None, NOW, rebooted=WRITTEN) is None
    earlier = WRITTEN - timedelta(seconds=1)
    assert departure(FIRST, {"pod-1": WRITTEN}, None, NOW, rebooted=earlier) is not None


def test_a_machine_registered_again_twice_in_one_boot_still_counts_its_pod() -> None:
    again = departed(AGAIN, {"pod-1": WRITTEN}, GONE, NOW + timedelta(minutes=1))
    third = replace(AGAIN, uid="uid-3", created=NOW + timedelta(minutes=2))
    assert of_this_node(third, "pod-1", WRITTEN, again)


def test_a_departure_keeps_its_pods_while_the_name_is_not_registered_again() -> None:
    assert still_deciding(GONE, None, {"pod-1": WRITTEN}) == GONE


def test_a_departure_is_kept_whole_while_the_pods_are_not_listed_yet() -> None:
    assert still_deciding(GONE, AGAIN, None) == GONE


def test_a_departure_goes_with_its_pods() -> None:
    assert still_deciding(GONE, None, {}) is None


def test_a_departure_goes_once_its_pod_is_written_for_the_same_machine() -> None:
    later = NOW + timedelta(seconds=3)
    assert still_deciding(GONE, AGAIN, {"pod-1": later}) is None
    assert still_deciding(GONE, AGAIN, {"pod-1": WRITTEN}) == GONE


def test_for_another_machine_a_departure_goes_once_its_pod_is_written_again() -> None:
    later = WRITTEN + timedelta(seconds=1)
    assert still_deciding(GONE, OTHER, {"pod-1": later}) is None
    assert still_deciding(GONE, OTHER, {"pod-1": WRITTEN}) == GONE


# --- as the node agents and the startup gates judge it ------------------------------------------


def test_the_agent_of_a_machine_registered_again_is_ready() -> None:
    old = pod(written="2026-11-21T11:00:00Z")
    gone = departed(FIRST, {old.uid: old.status_written})
    assert agents_of(AGAIN, [old], gone).ready
    assert not agents_of(OTHER, [old], gone).ready


def test_explain_says_why_the_old_machines_pod_does_not_count_and_what_ends_the_wait() -> None:
    old = pod(written="2026-11-21T11:00:00Z")
    gone = departed(FIRST, {old.uid: old.status_written})
    other = agents_of(OTHER, [old], gone).summary()
    assert "pod Ready on the machine this name had before" in other
    unseen = agents_of(AGAIN, [old], None).summary()
    assert "delete the pod to have it made again" in unseen


def agents_of(on: NodeState, pods: list[AgentPod], gone: Departure | None) -> AgentReadiness:
    found = agent_rules()
    rule, lifted = found.node_agents[0], lifted_taints(found)
    return agent_readiness(rule, on, [daemon_set()], pods, {}, lifted, gone)


GATE = NodeTaint("startup.example.com/init", "NoSchedule", "wait")
GATED = rules(
    """\
    startupGates:
      - name: warmup
        match: {labels: {role: worker}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen:
          pods: {namespace: kube-system, selector: {app: init}}
    """
)


def test_a_gates_init_pod_counts_alike_for_the_same_machine_registered_again() -> None:
    """As a node agent's pod: the gate's work was done in this boot of this machine."""
    signals = ready_pods({"warmup": WRITTEN})
    gone = departed(FIRST, {"pod-of-warmup": WRITTEN})
    for machine, lifted in ((AGAIN, ("warmup",)), (OTHER, ())):
        gated = replace(machine, taints=(GATE,))
        facts = PlanFacts(now=NOW, gate_pod_signals=signals, departed=gone)
        assert plan(gated, GATED, facts).lifted_gates == lifted


# --- kept where nodes cannot write --------------------------------------------------------------


def test_departures_are_read_back_as_written() -> None:
    stored = {"node-a": GONE, "node-b": replace(GONE, pods={"pod-9": None})}
    assert decode_departures(encode_departures(stored)) == stored


def test_no_departure_writes_no_key() -> None:
    assert encode_departures({}) == {}
    assert decode_departures({}) == {}


def test_a_full_record_keeps_the_latest_departures() -> None:
    many = {
        f"node-{i:05d}": replace(GONE, left=NOW + timedelta(seconds=i), pods={f"pod-{i}": None})
        for i in range(5000)
    }
    data = encode_departures(many)
    kept = decode_departures(data)
    assert len(data[DEPARTED_KEY]) <= DEPARTED_LIMIT
    assert "node-04999" in kept and "node-00000" not in kept
