"""Persisted labels: the record format and the authority model, as pure functions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodegate.core.decisions.persisted_labels import (
    LabelRecord,
    RecordError,
    decide,
    decode_record,
    encode_record,
    forget_due,
    mark_gone,
    persisted_view,
    record_key,
    record_name,
)
from nodegate.core.rules.model import PersistentLabels
from nodegate.core.rules.node import NodeState
from tests.unit.core.builders import NOW

CONFIG = PersistentLabels(prefixes=("persist.example.com/",), keys=("example.com/rack",))
OKE = "oci://ocid1.instance.oc1.phx.abcdefg"
AKS = (
    "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/"
    "virtualMachineScaleSets/aks-pool-1/virtualMachines/3"
)


def node(name: str = "n1", uid: str = "uid-1", provider_id: str = OKE, **labels: str) -> NodeState:
    return NodeState(name=name, uid=uid, provider_id=provider_id, labels=labels)


def record(uid: str = "uid-1", **labels: str) -> LabelRecord:
    return LabelRecord(OKE, uid, labels, NOW - timedelta(days=1), ("n1",), provider_id=OKE)


TEAM = {"persist.example.com/team": "ml"}


def test_only_persisted_keys_are_kept_and_never_platform_ones() -> None:
    labels = {
        "persist.example.com/team": "ml",
        "example.com/rack": "r1",
        "example.com/other": "x",
        "kubernetes.io/hostname": "n1",
        "node.kubernetes.io/instance-type": "VM.Standard",
    }
    broad = PersistentLabels(prefixes=("persist.example.com/", "example.com/"))
    assert persisted_view(labels, CONFIG) == {"example.com/rack": "r1", **TEAM}
    assert "kubernetes.io/hostname" not in persisted_view(labels, broad)


@pytest.mark.parametrize("provider_id", [OKE, AKS], ids=["oke", "aks"])
def test_record_names_are_valid_configmap_names_whatever_the_provider_id(provider_id: str) -> None:
    name = record_name(provider_id)
    assert len(name) <= 63 and name.replace("-", "").isalnum() and name == name.lower()
    assert record_name(provider_id) == name


def test_records_are_keyed_by_provider_id_and_a_node_without_one_has_no_key_yet() -> None:
    assert record_key(node(), CONFIG) == OKE
    assert record_key(node(provider_id=""), CONFIG) == ""
    by_name = PersistentLabels(prefixes=("persist.example.com/",), key_by="nodeName")
    assert record_key(node(), by_name) == "n1"


def test_a_record_survives_encoding() -> None:
    stored = LabelRecord(AKS, "u", TEAM, NOW, ("a", "b"), NOW + timedelta(hours=1))
    assert decode_record(encode_record(stored)) == stored


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"record.json": "{not json"},
        {"record.json": "[]"},
        {"record.json": '{"version": 2}'},
        {"record.json": '{"version": 1, "labels": {"a": 1}, "key": "k", "nodeUID": "u"}'},
        {"record.json": '{"version": 1, "labels": {}, "key": "k", "nodeUID": "u"}'},
        {
            "record.json": '{"version": 1, "labels": {}, "key": "k", "nodeUID": "u", '
            '"capturedAt": "yesterday"}'
        },
    ],
    ids=["missing", "bad-json", "list", "version", "label-type", "no-time", "bad-time"],
)
def test_an_unreadable_record_is_a_record_error(data: dict[str, str]) -> None:
    with pytest.raises(RecordError):
        decode_record(data)


def test_a_new_node_with_no_record_gets_a_record_of_its_labels() -> None:
    decision = decide(node(**TEAM), None, CONFIG, NOW)
    assert decision.restore == {}
    assert decision.record is not None and decision.record.labels == TEAM


def test_a_re_created_node_gets_its_stored_labels_back() -> None:
    decision = decide(node(uid="uid-2"), record(**TEAM), CONFIG, NOW)
    assert decision.restore == TEAM
    assert decision.record is not None and decision.record.node_uid == "uid-2"


def test_a_restored_label_never_overwrites_one_the_new_node_carries() -> None:
    new = node(uid="uid-2", **{"persist.example.com/team": "web"})
    decision = decide(new, record(**TEAM), CONFIG, NOW)
    assert decision.restore == {}
    assert decision.record is not None and decision.record.labels == {
        "persist.example.com/team": "web"
    }


def test_on_the_same_node_object_the_record_follows_the_node_including_removals() -> None:
    decision = decide(node(), record(**TEAM), CONFIG, NOW)
    assert decision.restore == {}
    assert decision.record is not None and decision.record.labels == {}


def test_an_unchanged_node_needs_no_record_write() -> None:
    assert decide(node(**TEAM), record(**TEAM), CONFIG, NOW).record is None


def test_a_deleted_node_marks_its_record_gone_and_it_is_forgotten_after_forget_after() -> None:
    gone = mark_gone(record(**TEAM), "uid-1", NOW)
    assert gone is not None and gone.node_gone_at == NOW
    assert not forget_due(gone, CONFIG, NOW + timedelta(days=29))
    assert forget_due(gone, CONFIG, NOW + timedelta(days=31))
    assert mark_gone(record(**TEAM), "another-uid", NOW) is None


def test_a_returning_node_clears_the_gone_mark() -> None:
    gone = mark_gone(record(**TEAM), "uid-1", NOW)
    assert gone is not None
    decision = decide(node(uid="uid-2"), gone, CONFIG, NOW)
    assert decision.record is not None and decision.record.node_gone_at is None
