"""The sightings record (`core.objects.sightings_record`): which first sights outlive a process, and
how they are stored."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from nodegate.core.decisions.sightings import Sighting
from nodegate.core.objects.sightings_record import (
    SIGHTINGS_KEY,
    SIGHTINGS_LIMIT,
    NodeSightings,
    SightingsRecordError,
    decode_sightings,
    encode_sightings,
    worth_keeping,
)
from nodegate.core.rules.node import NodeCondition, NodeTaint
from nodegate.core.rules.node_marks import GATE_REBOOTED_AFTER
from tests.unit.core.builders import NOW, node, rules

RULES = rules(
    """\
    conditionTaints:
      - name: nic-broken
        conditions: [{type: NetworkInterfaceCard, status: Kaput}]
        for: 30s
        taint: {key: example.com/nic, value: broken, effect: NoExecute}
      - name: at-once
        conditions: [{type: DiskBroken, status: "True"}]
        taint: {key: example.com/disk, effect: NoSchedule}
    startupGates:
      - name: cni
        match: {labels: {pool: gpu}}
        taint: {key: readiness.k8s.io/cni, effect: NoSchedule}
        regateOnReboot: true
        readyWhen:
          conditions: [{type: NetworkReady, status: "True"}]
    """
)
KAPUT = NodeCondition("NetworkInterfaceCard", "Kaput", "", NOW)
DISK = NodeCondition("DiskBroken", "True", "", NOW)
NETWORK = NodeCondition("NetworkReady", "True", "", NOW)


def test_a_hold_under_way_is_kept_and_one_that_fired_is_not() -> None:
    holding = node(conditions=(KAPUT, DISK))
    fired = node(conditions=(KAPUT,), taints=(NodeTaint("example.com/nic", "NoExecute", "broken"),))

    assert worth_keeping(holding, RULES) == {("NetworkInterfaceCard", "Kaput")}
    assert worth_keeping(fired, RULES) == frozenset()


def test_a_re_gated_gates_conditions_are_kept_while_it_is_carried() -> None:
    gate = NodeTaint("readiness.k8s.io/cni", "NoSchedule")
    regated = node(
        {"pool": "gpu"},
        taints=(gate,),
        conditions=(NETWORK,),
        annotations={GATE_REBOOTED_AFTER + "cni": "2026-11-21T11:00:00Z"},
    )
    first_life = node({"pool": "gpu"}, taints=(gate,), conditions=(NETWORK,))

    assert worth_keeping(regated, RULES) == {("NetworkReady", "True")}
    assert worth_keeping(first_life, RULES) == frozenset()


def test_the_record_reads_back_what_was_written() -> None:
    sighted = {
        "node-a": NodeSightings(
            "uid-a",
            {("NetworkInterfaceCard", "Kaput"): Sighting("tok", NOW + timedelta(microseconds=5))},
        ),
        "node-b": NodeSightings("uid-b", {("NetworkReady", "True"): Sighting("t", NOW, False)}),
    }

    assert decode_sightings(encode_sightings(sighted)) == sighted


def test_a_record_too_large_keeps_the_earliest_sightings() -> None:
    many = {
        f"node-{i:05d}": NodeSightings(
            "u" * 36, {("NetworkInterfaceCard", "Kaput"): Sighting("t" * 60, NOW + timedelta(i))}
        )
        for i in range(6_000)
    }

    data = encode_sightings(many)
    kept = decode_sightings(data)

    assert len(data[SIGHTINGS_KEY]) <= SIGHTINGS_LIMIT
    assert 0 < len(kept) < len(many)
    assert sorted(kept) == sorted(many)[: len(kept)]


@pytest.mark.parametrize(
    "text",
    ['{"version": 2, "nodes": {}}', "not json", '{"version": 1, "nodes": {"a": {"uid": "u"}}}'],
)
def test_an_unreadable_record_says_so(text: str) -> None:
    with pytest.raises(SightingsRecordError, match=r"version|not readable"):
        decode_sightings({SIGHTINGS_KEY: text})


def test_no_record_holds_no_sightings() -> None:
    assert decode_sightings(None) == {}
    assert json.loads(encode_sightings({})[SIGHTINGS_KEY])["nodes"] == {}
