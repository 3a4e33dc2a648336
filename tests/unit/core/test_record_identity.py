"""Persisted-label records and a hostile node: one live node per key, only the recorded machine
inherits a record, and a record the API server would refuse is unreadable (docs/reconciler.md,
"Security")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.persisted_labels import (
    LabelRecord,
    RecordError,
    decide,
    decode_record,
    encode_record,
    hand_over,
    key_for,
    same_machine,
)
from nodegate.core.rules.model import PersistentLabels
from nodegate.core.rules.node import NodeState
from tests.unit.core.builders import NOW

BY_PROVIDER = PersistentLabels(prefixes=("persist.example.com/",))
BY_NAME = PersistentLabels(prefixes=("persist.example.com/",), key_by="nodeName")
OKE = "oci://ocid1.instance.oc1.phx.victim"
TEAM = {"persist.example.com/team": "ml"}


def node(
    name: str = "10.0.10.7",
    uid: str = "uid-2",
    provider_id: str = OKE,
    system_uuid: str = "uuid-a",
    **labels: str,
) -> NodeState:
    return NodeState(
        name=name, uid=uid, provider_id=provider_id, system_uuid=system_uuid, labels=labels
    )


def record(key: str = OKE, provider_id: str = OKE, system_uuid: str = "uuid-a") -> LabelRecord:
    yesterday = NOW - timedelta(days=1)
    return LabelRecord(
        key, "uid-1", TEAM, yesterday, ("10.0.10.7",), yesterday, provider_id, system_uuid
    )


def test_a_node_without_a_provider_id_has_no_key_when_records_are_keyed_by_it() -> None:
    assert key_for("10.0.10.7", "", BY_PROVIDER) == ""
    assert key_for("10.0.10.7", "", BY_NAME) == "10.0.10.7"


def test_a_record_is_restored_onto_the_same_machine_registered_again() -> None:
    assert decide(node(), record(), BY_PROVIDER, NOW).restore == TEAM


def test_a_record_keyed_by_name_is_not_inherited_by_another_machine_of_that_name() -> None:
    other = node(provider_id="oci://ocid1.instance.oc1.phx.new", system_uuid="uuid-b")
    decision = decide(other, record(key="10.0.10.7"), BY_NAME, NOW)
    assert decision.restore == {}
    assert decision.refusal is not None and "another machine" in decision.refusal
    assert decision.withheld == TEAM
    assert decision.other_machine
    assert decision.record is None  # the record stays the other machine's


def test_a_forged_provider_id_neither_gets_nor_erases_the_machines_record() -> None:
    """Issue 45: a kubelet that knows another machine's providerID registers with it while that
    machine's Node is gone; its own system UUID gives it away. The record stays the machine's."""
    forged = node(system_uuid="uuid-of-evil-1")
    decision = decide(forged, record(), BY_PROVIDER, NOW)
    assert decision.restore == {}
    assert decision.record is None
    assert decision.other_machine
    assert "nodegate labels hand-over" in (decision.refusal or "")


def test_a_record_handed_over_by_an_admin_is_restored_onto_the_new_machine() -> None:
    new_machine = node(provider_id="oci://ocid1.instance.oc1.phx.new", system_uuid="uuid-b")
    handed = hand_over(record(key="10.0.10.7"), new_machine, BY_NAME, node_has_own=False)
    assert handed.record is not None and handed.from_key == ""  # the same key: kept in place
    assert decide(new_machine, handed.record, BY_NAME, NOW).restore == TEAM


NEW_MACHINE = "oci://ocid1.instance.oc1.phx.replacement"


def test_a_record_handed_to_a_machine_under_another_key_moves_to_that_key() -> None:
    """Issue 56: a replacement machine has another providerID, so another key. The reconciler
    looks its record up under that key: the record moves there, and is restored there."""
    replacement = node(provider_id=NEW_MACHINE, system_uuid="uuid-b")
    handed = hand_over(record(), replacement, BY_PROVIDER, node_has_own=False)

    assert handed.record is not None
    assert (handed.from_key, handed.record.key) == (OKE, NEW_MACHINE)
    assert decide(replacement, handed.record, BY_PROVIDER, NOW).restore == TEAM


def test_a_hand_over_never_overwrites_the_record_a_node_has_of_its_own() -> None:
    replacement = node(provider_id=NEW_MACHINE, system_uuid="uuid-b")
    handed = hand_over(record(), replacement, BY_PROVIDER, node_has_own=True)

    assert handed.record is None
    refusal = handed.refusal or ""
    assert OKE in refusal and NEW_MACHINE in refusal
    assert f"nodegate labels forget {NEW_MACHINE}, then run this again" in refusal


def test_a_node_without_a_provider_id_cannot_take_a_record_kept_by_provider_id() -> None:
    handed = hand_over(record(), node(provider_id=""), BY_PROVIDER, node_has_own=False)
    assert handed.record is None
    assert "no providerID yet" in (handed.refusal or "")


def test_a_node_showing_no_identity_is_not_handed_a_record_it_would_not_get() -> None:
    unknown = node(name="10.0.10.9", provider_id="", system_uuid="")
    handed = hand_over(record(key="10.0.10.7"), unknown, BY_NAME, node_has_own=False)
    assert handed.record is None
    assert "neither a providerID nor a system UUID" in (handed.refusal or "")


def test_a_record_is_not_handed_to_the_node_object_it_already_follows() -> None:
    handed = hand_over(record(), node(uid="uid-1"), BY_PROVIDER, node_has_own=False)
    assert handed.record is None
    assert "already follows" in (handed.refusal or "")


@given(
    key_by=st.sampled_from(["providerID", "nodeName"]),
    kept_under=st.sampled_from(["10.0.10.7", "10.0.10.8", OKE, NEW_MACHINE]),
    name=st.sampled_from(["10.0.10.7", "10.0.10.8"]),
    provider_id=st.sampled_from(["", OKE, NEW_MACHINE]),
    system_uuid=st.sampled_from(["", "uuid-b"]),
    node_has_own=st.booleans(),
)
def test_a_hand_over_that_is_not_refused_is_restored_at_the_nodes_next_plan(
    key_by: str,
    kept_under: str,
    name: str,
    provider_id: str,
    system_uuid: str,
    node_has_own: bool,
) -> None:
    """Whatever the keys: a hand-over is refused, or the record is kept under the node's own
    key (where the reconciler looks) and its labels are restored onto the node."""
    config = BY_PROVIDER if key_by == "providerID" else BY_NAME
    target = node(name=name, provider_id=provider_id, system_uuid=system_uuid)
    kept = record(key=kept_under)

    handed = hand_over(kept, target, config, node_has_own)

    if handed.record is None:
        assert handed.refusal
        return
    assert handed.record.key == key_for(name, provider_id, config)
    assert handed.from_key == ("" if handed.record.key == kept_under else kept_under)
    assert not (handed.from_key and node_has_own)
    assert decide(target, handed.record, config, NOW).restore == TEAM


def test_a_record_keyed_by_name_with_nothing_to_compare_is_neither_restored_nor_taken() -> None:
    unknown = node(provider_id="", system_uuid="")
    decision = decide(unknown, record(key="10.0.10.7"), BY_NAME, NOW)
    assert decision.restore == {} and decision.record is None
    assert decision.refusal is not None and "nothing" in decision.refusal


def test_the_same_provider_id_with_another_system_uuid_is_another_machine() -> None:
    assert same_machine(record(), node(system_uuid="uuid-b"), BY_PROVIDER) is False


def test_a_record_written_before_identities_were_kept_trusts_its_provider_id_key() -> None:
    legacy = record(provider_id="", system_uuid="")
    assert same_machine(legacy, node(), BY_PROVIDER) is True
    assert same_machine(replace(legacy, key="10.0.10.7"), node(), BY_NAME) is None


def test_while_another_live_node_claims_the_key_nothing_is_restored_or_written() -> None:
    decision = decide(node(), record(), BY_PROVIDER, NOW, rivals=("victim",))
    assert decision.restore == {} and decision.record is None
    assert decision.rivals == ("victim",)


def test_the_holder_of_a_contested_key_stops_writing_its_record_too() -> None:
    holder = NodeState(
        name="victim", uid="uid-1", provider_id=OKE, labels={"persist.example.com/x": "1"}
    )
    assert decide(holder, record(), BY_PROVIDER, NOW, rivals=("evil-2",)).record is None


def test_a_record_with_a_label_value_the_api_server_refuses_is_unreadable() -> None:
    bad = replace(record(), labels={"persist.example.com/team": "ml team"})
    with pytest.raises(RecordError, match="would be refused"):
        decode_record(encode_record(bad))


def test_a_record_keeps_the_machine_it_was_synced_with() -> None:
    fresh = decide(node(**TEAM), None, BY_PROVIDER, NOW).record
    assert fresh is not None
    assert (fresh.provider_id, fresh.system_uuid) == (OKE, "uuid-a")
    assert decode_record(encode_record(fresh)) == fresh


@given(
    recorded=st.sampled_from(["", "p1", "p2"]),
    seen=st.sampled_from(["", "p1", "p2"]),
    recorded_uuid=st.sampled_from(["", "u1", "u2"]),
    seen_uuid=st.sampled_from(["", "u1", "u2"]),
)
def test_labels_are_restored_only_when_every_identity_the_record_holds_is_shown_and_agrees(
    recorded: str, seen: str, recorded_uuid: str, seen_uuid: str
) -> None:
    kept = record(key="n1", provider_id=recorded, system_uuid=recorded_uuid)
    newcomer = node(name="n1", provider_id=seen, system_uuid=seen_uuid)
    restored = decide(newcomer, kept, BY_NAME, NOW).restore != {}
    held = [(a, b) for a, b in [(recorded, seen), (recorded_uuid, seen_uuid)] if a]
    assert restored == (bool(held) and all(a == b for a, b in held))


def test_a_node_hiding_the_system_uuid_the_record_holds_does_not_match_on_provider_id() -> None:
    hidden = node(system_uuid="")
    assert same_machine(record(), hidden, BY_PROVIDER) is None
    assert decide(hidden, record(), BY_PROVIDER, NOW).restore == {}
