"""The index of persisted-label record keys by claimant: kept from the node watch, and rebuilt
from the node cache by a new process (nothing of it lives only in a process's memory)."""

from __future__ import annotations

from dataclasses import replace

from nodegate.core.rules.node import NodeState
from nodegate.reconciler.nodes.records.record_keys import RecordKeys
from tests.unit.core.builders import rules

CONFIG = rules(
    """\
    persistentLabels: {prefixes: ["persist.example.com/"], keyBy: providerID}
    """
).persistent_labels
REAL = NodeState("real", provider_id="oci://instance-1")
CLAIMANT = NodeState("evil-1", provider_id="oci://instance-1")
OTHER = NodeState("other", provider_id="oci://instance-2")


def test_two_live_nodes_claiming_one_key_are_each_others_rivals() -> None:
    keys = RecordKeys()
    keys.rebuild([REAL, CLAIMANT, OTHER], CONFIG)

    assert keys.rivals("real", "oci://instance-1") == ("evil-1",)
    assert keys.contested() == 1


def test_a_new_process_rebuilding_from_the_cache_finds_the_rivals_the_watch_showed() -> None:
    watched = RecordKeys()
    watched.rebuild([], CONFIG)
    for node in (REAL, OTHER, CLAIMANT):
        watched.observe(node.name, node)
    restarted = RecordKeys()
    restarted.rebuild([REAL, OTHER, CLAIMANT], CONFIG)

    for name in ("real", "evil-1", "other"):
        key = {"real": "oci://instance-1", "evil-1": "oci://instance-1"}.get(
            name, "oci://instance-2"
        )
        assert restarted.rivals(name, key) == watched.rivals(name, key)


def test_a_deleted_or_re_keyed_node_is_no_rival_any_more() -> None:
    keys = RecordKeys()
    keys.rebuild([REAL, CLAIMANT], CONFIG)
    keys.observe("evil-1", None)
    assert keys.rivals("real", "oci://instance-1") == ()

    keys.observe("evil-1", CLAIMANT)
    keys.observe("evil-1", replace(CLAIMANT, provider_id="oci://instance-9"))
    assert keys.rivals("real", "oci://instance-1") == ()


def test_a_node_gone_from_the_cache_without_an_event_is_no_rival() -> None:
    keys = RecordKeys(alive=lambda name: name != "evil-1")
    keys.rebuild([REAL, CLAIMANT], CONFIG)

    assert keys.rivals("real", "oci://instance-1") == ()


def test_nothing_is_indexed_while_no_labels_persist() -> None:
    keys = RecordKeys()
    keys.rebuild([REAL, CLAIMANT], None)

    assert keys.contested() == 0


def test_a_claimant_leaving_a_key_names_the_claimants_left_with_it() -> None:
    keys = RecordKeys()
    keys.rebuild([REAL, CLAIMANT, OTHER], CONFIG)

    assert keys.observe("evil-1", None) == ("real",)
    assert keys.observe("other", replace(OTHER, labels={"a": "b"})) == ()  # same key: no one


def test_a_claimant_re_keyed_names_the_claimants_of_its_old_key() -> None:
    keys = RecordKeys()
    keys.rebuild([REAL, CLAIMANT], CONFIG)

    assert keys.observe("evil-1", replace(CLAIMANT, provider_id="oci://instance-9")) == ("real",)
