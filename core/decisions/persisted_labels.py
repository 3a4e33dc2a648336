"""Labels that survive node deletion and re-creation: the record format and who is authoritative.

Pure. The reconciler keeps one record per node key (providerID, or the node name) in a
ConfigMap in its own namespace, and asks `decide` what to do each time it sees a node:

* a node object the record was not synced with yet (created or re-created): the store is the
  authority; stored labels are restored onto it (absent keys only: a label the new node already
  carries is never overwritten), then the record syncs with the new object;
* the node object the record was synced with: the node is the authority; the record follows
  it, removals included (an admin's deletion is remembered);
* node deleted: the record is kept and marked gone;
* gone longer than `forgetAfter`: the record is garbage-collected.

The node-label-operator's authority model, keyed by a stable node identity instead of the name,
with the limits a hostile node calls for (docs/reconciler.md, "Security"): a node may register
with any providerID and any name it holds credentials for, so

* one live node per key: while two live nodes claim a key, neither gets the record's labels and
  neither takes the record over;
* a record goes onto a new node object only if the machine it was kept for is provably this one
  (providerID, else the SMBIOS system UUID the kubelet reports, agree; a name alone never does);
* with `keyBy: providerID`, a node without a providerID has no record yet (never one keyed by a
  name another machine may register under later);
* a record holding a label the API server would refuse is unreadable, so it is quarantined and
  can never block the node's other changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from nodegate.core.rules.model import PersistentLabels
from nodegate.core.rules.node import NodeState, format_time, parse_time
from nodegate.core.text.k8s_names import (
    label_owned_by_platform,
    label_value_problem,
    qualified_name_problem,
)
from nodegate.core.views.raw import RawObject

RECORD_LABEL = "nodegate.dev/record"
RECORD_LABEL_VALUE = "persisted-labels"
QUARANTINE_LABEL = "nodegate.dev/quarantined"
QUARANTINE_REASON_ANNOTATION = "nodegate.dev/quarantine-reason"
RECORD_NAME_PREFIX = "nodegate-labels-"
DATA_KEY = "record.json"
RECORD_VERSION = 1


class RecordError(ValueError):
    """A stored record cannot be read (bad JSON, wrong shape, hand-edited)."""


def persisted_view(labels: Mapping[str, str], config: PersistentLabels) -> dict[str, str]:
    """The labels of `labels` that the rules say to persist (platform-owned ones never)."""
    return {
        k: v
        for k, v in sorted(labels.items())
        if config.persists(k) and not label_owned_by_platform(k)
    }


def record_key(node: NodeState, config: PersistentLabels) -> str:
    """The stable identity a record is kept under: the providerID (`keyBy: providerID`; '' while
    the node has none: no record yet) or the name (`keyBy: nodeName`)."""
    return key_for(node.name, node.provider_id, config)


def key_for(name: str, provider_id: str, config: PersistentLabels) -> str:
    """`record_key` from a node's name and providerID alone: the Node admission webhook's
    lookup, before the node has a uid or a `NodeState`."""
    return provider_id if config.key_by == "providerID" else name


def record_name(key: str) -> str:
    """A valid ConfigMap name for any key (providerIDs hold ':' and '/'), stable across runs."""
    return RECORD_NAME_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def record_configmap(namespace: str, name: str, data: Mapping[str, str]) -> dict[str, object]:
    """A new record's ConfigMap (the reconciler's store and `nodegate labels hand-over` alike)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {RECORD_LABEL: RECORD_LABEL_VALUE},
        },
        "data": dict(data),
    }


@dataclass(frozen=True)
class LabelRecord:
    key: str
    node_uid: str
    """The node object the labels were last synced with; another uid means a new node."""
    labels: Mapping[str, str]
    captured_at: datetime
    node_names: tuple[str, ...] = ()
    node_gone_at: datetime | None = None
    provider_id: str = ""
    """The providerID of the machine the labels were last synced with ('' if unknown)."""
    system_uuid: str = ""
    """Its SMBIOS system UUID as its kubelet reported it ('' if unknown)."""


def encode_record(record: LabelRecord) -> dict[str, str]:
    document = {
        "version": RECORD_VERSION,
        "key": record.key,
        "nodeUID": record.node_uid,
        "nodeNames": list(record.node_names),
        "labels": dict(sorted(record.labels.items())),
        "capturedAt": format_time(record.captured_at),
        "nodeGoneAt": format_time(record.node_gone_at) if record.node_gone_at else None,
        "providerID": record.provider_id,
        "systemUUID": record.system_uuid,
    }
    return {DATA_KEY: json.dumps(document, indent=1, sort_keys=True)}


def decode_record(data: Mapping[str, Any] | None) -> LabelRecord:
    """The record in a ConfigMap's data; RecordError naming what is wrong otherwise."""
    text = (data or {}).get(DATA_KEY)
    if not isinstance(text, str):
        raise RecordError(f"no '{DATA_KEY}' key")
    try:
        document = json.loads(text)
    except ValueError as err:
        raise RecordError(f"'{DATA_KEY}' is not JSON: {err}") from err
    if not isinstance(document, dict) or document.get("version") != RECORD_VERSION:
        raise RecordError(f"not a version-{RECORD_VERSION} record")
    labels = document.get("labels")
    names = document.get("nodeNames") or []
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise RecordError("'labels' must map strings to strings")
    for label, value in labels.items():
        problem = qualified_name_problem(label) or label_value_problem(value)
        if problem:
            raise RecordError(f"label {label!r}={value!r} would be refused: {problem}")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RecordError("'nodeNames' must be a list of strings")
    try:
        captured = parse_time(document.get("capturedAt"))
        gone = parse_time(document.get("nodeGoneAt"))
    except (ValueError, TypeError) as err:
        raise RecordError(f"bad time: {err}") from err
    key, uid = document.get("key"), document.get("nodeUID")
    if not isinstance(key, str) or not key or not isinstance(uid, str) or captured is None:
        raise RecordError("'key', 'nodeUID' and 'capturedAt' are required")
    provider_id, system_uuid = document.get("providerID", ""), document.get("systemUUID", "")
    if not isinstance(provider_id, str) or not isinstance(system_uuid, str):
        raise RecordError("'providerID' and 'systemUUID' must be strings")
    return LabelRecord(
        key, uid, dict(labels), captured, tuple(names), gone, provider_id, system_uuid
    )


@dataclass(frozen=True)
class StoredRecord:
    """A record ConfigMap as cached (by the reconciler's label store, and read by `nodegate
    status|explain|labels` alike): decoded, or the reason it cannot be."""

    name: str
    resource_version: str
    record: LabelRecord | None
    error: str | None
    raw: RawObject


def stored_record(raw: RawObject) -> StoredRecord:
    meta = raw.get("metadata") or {}
    try:
        record, error = decode_record(raw.get("data")), None
    except RecordError as err:
        record, error = None, str(err)
    return StoredRecord(
        str(meta.get("name")), str(meta.get("resourceVersion") or ""), record, error, raw
    )


@dataclass(frozen=True)
class LabelDecision:
    restore: Mapping[str, str]
    """Labels to put back on the node (keys it does not have)."""
    record: LabelRecord | None
    """The record as it must be stored after the node write; None: unchanged."""
    refusal: str | None = None
    """Why the record's labels are not restored onto this node (a Warning Event), if so."""
    rivals: tuple[str, ...] = ()
    """Other live nodes claiming the same key (the record is left alone while there are any)."""
    withheld: Mapping[str, str] = field(default_factory=dict)
    """Labels of another machine's record that this node does not get (the record is kept)."""
    other_machine: bool = False
    """The node shows another machine's identity than the record's: evidence of a forged
    claim, or of a new machine an admin has not handed the record to."""


def same_machine(record: LabelRecord, node: NodeState, config: PersistentLabels) -> bool | None:
    """Whether `node` is the machine `record` was kept for: True, False, or None (no evidence).

    Every identity the record holds (providerID, system UUID) must be shown by the node and
    agree: a node that hides its UUID does not match on the providerID alone. A name is never
    evidence (OKE names nodes by private IP, and IPs are reused).
    """
    recorded_provider = record.provider_id or (record.key if config.key_by == "providerID" else "")
    pairs = ((recorded_provider, node.provider_id), (record.system_uuid, node.system_uuid))
    held = [(kept, seen) for kept, seen in pairs if kept]
    if any(seen and kept != seen for kept, seen in held):
        return False
    if not held or any(not seen for _, seen in held):
        return None  # an identity the record holds and the node does not show is no evidence
    return True


def restore_refusal(
    record: LabelRecord, node: NodeState, config: PersistentLabels, rivals: tuple[str, ...]
) -> str | None:
    """Why `record` must not be restored onto `node`, a node object it was not synced with."""
    if rivals:
        return (
            f"node(s) {', '.join(rivals)} claim the same key {record.key!r}; no labels are "
            "restored and the record is left alone until one node holds the key"
        )
    same = same_machine(record, node, config)
    if same is None:
        return (
            f"record {record.key!r} was kept for {', '.join(record.node_names) or 'a node'}, and "
            "nothing (providerID, system UUID) shows this node is that machine; its labels are "
            "not restored (delete the record to start afresh)"
        )
    if not same:
        return (
            f"record {record.key!r} was kept for another machine (providerID or system UUID "
            "differ); its labels are not restored and the record stays that machine's (a "
            "node's word never takes a record over). If this node is a new machine that should "
            f"have it: nodegate labels hand-over {record.key} --to {node.name}"
        )
    return None


def decide(
    node: NodeState,
    record: LabelRecord | None,
    config: PersistentLabels,
    now: datetime,
    rivals: tuple[str, ...] = (),
) -> LabelDecision:
    """The labels to restore and the record to store, for a node whose key `rivals` (other live
    nodes) may claim too."""
    current = persisted_view(node.labels, config)
    names = node_names(record, node.name)
    machine = {"provider_id": node.provider_id, "system_uuid": node.system_uuid}
    if rivals:
        refusal = (
            restore_refusal(record, node, config, rivals)
            if record is not None
            else f"node(s) {', '.join(rivals)} claim the same key; no record is kept"
        )
        return LabelDecision({}, None, refusal, rivals)
    if record is None:
        key = record_key(node, config)
        fresh = LabelRecord(key, node.uid, current, now, names, None, **machine)
        return LabelDecision({}, fresh if current else None)
    stored = persisted_view(record.labels, config)
    if record.node_uid != node.uid:
        refusal = restore_refusal(record, node, config, ())
        if refusal is None:
            restore = {k: v for k, v in stored.items() if k not in node.labels}
            synced = replace(
                record,
                node_uid=node.uid,
                labels={**stored, **current},
                captured_at=now,
                node_names=names,
                node_gone_at=None,
                **machine,
            )
            return LabelDecision(restore, synced)
        if same_machine(record, node, config) is None:
            return LabelDecision({}, None, refusal)
        return LabelDecision({}, None, refusal, withheld=stored, other_machine=True)
    followed = replace(
        record, labels=current, captured_at=now, node_names=names, node_gone_at=None, **machine
    )
    if replace(followed, captured_at=record.captured_at) == record:
        return LabelDecision({}, None)
    return LabelDecision({}, followed)


@dataclass(frozen=True)
class HandOver:
    """What `nodegate labels hand-over` does with one record (`hand_over`)."""

    record: LabelRecord | None
    """The record to store, under `record.key`; None: refused, nothing changes."""
    from_key: str = ""
    """The key the record is kept under now, when it moves (re-keyed): written under its new
    key first, then removed from this one."""
    refusal: str | None = None
    """Why nothing changes (said to the admin, exit 1)."""


def hand_over(
    record: LabelRecord, node: NodeState, config: PersistentLabels, node_has_own: bool
) -> HandOver:
    """The record as an admin hands it to `node`, a new machine that should have its labels, or
    why it cannot be: a hand-over that does not refuse is restored at the node's next plan.

    The reconciler looks a node's record up by the node's own key (`record_key`), never by a
    record's history, so a record kept under another key is never found there: it moves to the
    node's key (re-keyed), unless that key already holds a record of the node's own
    (`node_has_own`), which a hand-over never overwrites: then nothing changes and the refusal
    says which record to forget. Under the same key the record stays where it is, now this
    machine's. Refused too: a node without a key yet (`keyBy: providerID`, none reported), the
    node object the record already follows (nothing to restore), and a node that shows no
    identity at all (no providerID, no system UUID: `decide` would not restore onto it).
    """
    key = record_key(node, config)
    if not key:
        return _refused(
            f"node {node.name} has no providerID yet, and records are kept by providerID "
            "(keyBy): nothing is handed over; run this again once its kubelet reports one"
        )
    if record.node_uid == node.uid:
        return _refused(
            f"record {record.key!r} already follows node {node.name} (this very Node object): "
            "it holds no label the node lacks; nothing to hand over"
        )
    # The machine it is kept for is now this one, so the node's next plan restores its labels
    # and the record follows it.
    moved = replace(
        record,
        key=key,
        provider_id=node.provider_id,
        system_uuid=node.system_uuid,
        node_names=node_names(record, node.name),
    )
    if same_machine(moved, node, config) is not True:
        return _refused(
            f"node {node.name} shows neither a providerID nor a system UUID: nothing would tie "
            "the record to it and its labels would not be restored; nothing changed"
        )
    if key == record.key:
        return HandOver(moved)
    if node_has_own:
        return _refused(
            f"record {record.key!r} cannot go to node {node.name}: the reconciler finds "
            f"{node.name}'s record under its own key {key!r} (keyBy: {config.key_by}), and "
            f"{node.name} already has one there; nothing changed. To give {node.name} the "
            f"labels of {record.key!r} instead of its own: nodegate labels forget {key}, then "
            f"run this again; to keep its own: nodegate labels forget {record.key}"
        )
    return HandOver(moved, from_key=record.key)


def _refused(why: str) -> HandOver:
    return HandOver(None, refusal=why)


def node_names(record: LabelRecord | None, name: str, keep: int = 5) -> tuple[str, ...]:
    """The names a record's node was seen as, newest last, at most `keep`."""
    seen = [n for n in (record.node_names if record else ()) if n != name]
    return (*seen, name)[-keep:]


def mark_gone(record: LabelRecord, node_uid: str, now: datetime) -> LabelRecord | None:
    """The record once its node object is deleted (None if it already follows another node)."""
    if record.node_uid != node_uid or record.node_gone_at is not None:
        return None
    return replace(record, node_gone_at=now)


def forget_due(record: LabelRecord, config: PersistentLabels, now: datetime) -> bool:
    return record.node_gone_at is not None and now - record.node_gone_at > config.forget_after
