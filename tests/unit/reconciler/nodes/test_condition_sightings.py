"""The reconciler's table of condition sightings: what it keeps for a restart, and how a new
process starts from the record."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from nodegate.core.decisions.sightings import Sighting
from nodegate.core.objects.sightings_record import NodeSightings
from nodegate.core.rules.node import NodeCondition
from nodegate.reconciler.nodes.records.condition_sightings import ConditionSightings
from tests.unit.core.builders import NOW, node, rules

KAPUT = NodeCondition("NetworkInterfaceCard", "Kaput", "", NOW - timedelta(hours=1))
KEY = ("NetworkInterfaceCard", "Kaput")
TOKEN = "NetworkInterfaceCard=Kaput@2026-11-21T11:00:00Z"
NODE = replace(node(conditions=(KAPUT,)), uid="uid-1")


READING = rules(
    """\
    conditionTaints:
      - name: nic
        conditions: [{type: NetworkInterfaceCard, status: Kaput}]
        for: 30s
        taint: {key: example.com/nic, effect: NoExecute}
    """
)


def table_reading() -> ConditionSightings:
    return ConditionSightings()


def test_a_restart_starts_from_the_sighting_the_record_kept_marked_as_restored() -> None:
    """Another process read the server's clock: the sighting is taken with that margin."""
    table = table_reading()
    kept = Sighting(TOKEN, NOW - timedelta(seconds=20), witnessed=True)
    table.restore({NODE.name: NodeSightings("uid-1", {KEY: kept})})

    restored = replace(kept, restored=True)
    assert table.look(NODE.name, NODE, READING, NOW)[KEY] == restored


def test_a_kept_sighting_of_a_condition_without_a_time_is_not_restored() -> None:
    """Gone and back while no process watched looks the same: the hold starts again."""
    bare = replace(NODE, conditions=(NodeCondition("NetworkInterfaceCard", "Kaput"),))
    token = "NetworkInterfaceCard=Kaput@"
    table = table_reading()
    table.restore({bare.name: NodeSightings("uid-1", {KEY: Sighting(token, NOW)})})

    assert table.look(bare.name, bare, READING, NOW + timedelta(seconds=9))[KEY] == Sighting(
        token, NOW + timedelta(seconds=9), False
    )


def test_a_kept_sighting_of_another_node_object_is_not_used() -> None:
    table = table_reading()
    kept = Sighting(TOKEN, NOW - timedelta(seconds=20))
    table.restore({NODE.name: NodeSightings("uid-0", {KEY: kept})})

    assert table.look(NODE.name, NODE, READING, NOW)[KEY] == Sighting(TOKEN, NOW, False)


def test_what_the_first_look_finds_without_a_record_is_unwitnessed_and_seen_now() -> None:
    table = table_reading()

    assert table.look(NODE.name, NODE, READING, NOW)[KEY] == Sighting(TOKEN, NOW, False)


def test_only_what_still_decides_something_is_offered_to_the_record_and_once() -> None:
    table = table_reading()
    table.look(NODE.name, NODE, READING, NOW, keep=frozenset({KEY}))

    assert table.changes() == {
        NODE.name: NodeSightings("uid-1", {KEY: Sighting(TOKEN, NOW, False)})
    }
    table.look(NODE.name, NODE, READING, NOW + timedelta(seconds=1), keep=frozenset({KEY}))
    assert table.changes() is None
    table.look(NODE.name, NODE, READING, NOW + timedelta(seconds=2))
    assert table.changes() == {}


def test_changes_that_could_not_be_written_are_offered_again() -> None:
    table = table_reading()
    table.look(NODE.name, NODE, READING, NOW, keep=frozenset({KEY}))
    offered = table.changes()
    table.changed_again()

    assert table.changes() == offered


def test_a_forgotten_node_leaves_the_record() -> None:
    table = table_reading()
    table.look(NODE.name, NODE, READING, NOW, keep=frozenset({KEY}))
    table.changes()
    table.forget(NODE.name)

    assert table.changes() == {}


def test_a_node_gone_while_no_process_watched_leaves_the_record() -> None:
    table = table_reading()
    table.restore({"gone": NodeSightings("uid-9", {KEY: Sighting(TOKEN, NOW)})})
    table.look(NODE.name, NODE, READING, NOW, keep=frozenset({KEY}))
    table.keep_only({NODE.name})

    assert set(table.changes() or {}) == {NODE.name}


def test_nothing_is_sighted_without_rules_and_a_type_newly_read_starts_unwitnessed() -> None:
    table = ConditionSightings()
    assert table.look(NODE.name, NODE, None, NOW) == {}
    assert table.look(NODE.name, NODE, rules("labelTaints: []"), NOW) == {}

    assert table.look(NODE.name, NODE, READING, NOW)[KEY].witnessed is False


def test_a_look_before_the_rules_are_recovered_loses_no_restored_sighting() -> None:
    """The node cache syncs before the rules in force are put back: those looks must not
    consume what the record kept (the e2e restart test was flaky while the types read were
    set apart from the rules they come from)."""
    table = ConditionSightings()
    kept = Sighting(TOKEN, NOW - timedelta(seconds=20))
    table.restore({NODE.name: NodeSightings("uid-1", {KEY: kept})})
    table.look(NODE.name, NODE, None, NOW)

    assert table.look(NODE.name, NODE, READING, NOW)[KEY] == replace(kept, restored=True)


# --- node agents' not-Ready episodes (nodeAgents, continuous) -----------------------------------

AGENTS = rules(
    """\
    nodeAgents:
      - name: cni
        daemonSets: [{namespace: kube-system, name: cilium}]
        taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    """
)
CNI = ("agents.nodegate.dev/cni", "kube-system/cilium")
CNI_TYPE = frozenset({CNI[0]})


def test_an_agent_not_ready_across_a_pod_replacement_keeps_its_first_sight() -> None:
    """The pod is replaced, the agent never Ready in between: one outage, one `for`."""
    table = ConditionSightings()
    table.look("n", NODE, AGENTS, NOW, others={CNI: "cilium:pod-1:False@t1"})
    later = table.look(
        "n", NODE, AGENTS, NOW + timedelta(seconds=50), others={CNI: "cilium:pod-2:False@t2"}
    )
    assert later[CNI].first_seen == NOW
    assert later[CNI].token == "cilium:pod-2:False@t2"


def test_an_agent_ready_between_two_looks_starts_a_new_episode() -> None:
    table = ConditionSightings()
    table.look("n", NODE, AGENTS, NOW, others={CNI: "cilium:pod-1:False@t1"})
    table.look("n", NODE, AGENTS, NOW + timedelta(seconds=10), others={})
    again = table.look(
        "n", NODE, AGENTS, NOW + timedelta(seconds=20), others={CNI: "cilium:pod-1:False@t3"}
    )
    assert again[CNI].first_seen == NOW + timedelta(seconds=20)


def test_a_look_that_did_not_see_the_agents_carries_their_sightings() -> None:
    """A heartbeat, or informers still syncing after a restart: the `for` under way stays."""
    table = ConditionSightings()
    table.restore({"n": NodeSightings("uid-1", {CNI: Sighting("cilium:pod-1:False@t1", NOW)})})
    keep = frozenset({CNI[0]})
    table.look("n", NODE, AGENTS, NOW + timedelta(seconds=5), keep, unknown=CNI_TYPE)
    seen = table.look(
        "n", NODE, AGENTS, NOW + timedelta(seconds=9), keep, others={CNI: "cilium:pod-1:False@t1"}
    )
    assert seen[CNI].first_seen == NOW
    assert table.changes() is None  # the record still holds it, as restored


def test_a_carried_sighting_of_another_episode_is_not_continued() -> None:
    """Carried without being seen, it is kept only if the next sight shows the same episode:
    the agent may have been Ready while no one looked."""
    table = ConditionSightings()
    table.restore({"n": NodeSightings("uid-1", {CNI: Sighting("cilium:pod-1:False@t1", NOW)})})
    table.look("n", NODE, AGENTS, NOW + timedelta(seconds=5), unknown=CNI_TYPE)
    seen = table.look(
        "n", NODE, AGENTS, NOW + timedelta(seconds=9), others={CNI: "cilium:pod-2:False@t2"}
    )
    assert seen[CNI].first_seen == NOW + timedelta(seconds=9)


def test_a_node_condition_under_the_agents_prefix_is_never_read() -> None:
    """A node may report any condition type: it must not stand in for its agents."""
    forged = NodeCondition(CNI[0], CNI[1], "", NOW - timedelta(days=1))
    every_type = rules(
        """\
        conditionTaints:
          - name: any
            conditions: [{typePattern: ".*", status: ".*"}]
            taint: {key: example.com/any, effect: NoSchedule}
        """
    )
    table = ConditionSightings()
    assert CNI not in table.look("n", replace(NODE, conditions=(forged,)), every_type, NOW)
