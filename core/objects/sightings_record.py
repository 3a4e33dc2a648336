"""The first sights that must outlive a process, as stored where nodes cannot write. Pure.

A sighting (`core.decisions.sightings`) kept in memory only is rebuilt after a restart from the
first look, later than it was: a `for` hold under way starts again, and a re-gated node's conditions
are seen anew, unwitnessed. Both are safe, but a restart should change nothing, and
`nodegate explain` should say the "since" the reconciler acts on. So the leader keeps here the
sightings that still decide something: of conditions a `for` hold is counting (the rule's taint
not on the node yet) and of the conditions of a re-gated gate the node carries. That is a few
nodes at a time, not the cluster; the record is written when it changes, at most every few
seconds (`reconciler.nodes.records.sightings_store`), and a restart inside that interval only makes
a sighting later.

Format (`data["sightings.json"]`): {"version": 1, "nodes": {name: {"uid", "conditions":
[{"type", "status", "token", "firstSeen", "witnessed"}]}}}.

Beside it, under its own key, the Node objects nodegate saw go while pods were Ready for them
(`re_registration` says why they are kept). A few names at a time (each is dropped once its
pods are gone or written again). Format (`data["departed.json"]`):
{"version": 1, "nodes": {name: {"uid", "bootID", "systemUUID", "left", "pods": {uid:
written or null}}}}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.rule_outcomes import sightings_kept
from nodegate.core.decisions.sightings import ConditionKey, Kept, Sighting, tells_episodes_apart
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, format_precise_time, parse_time
from nodegate.core.text.stored_document import read_document

SIGHTINGS_CONFIGMAP = "nodegate-sightings"
SIGHTINGS_KEY = "sightings.json"
DEPARTED_KEY = "departed.json"
DEPARTED_VERSION = 1
DEPARTED_LIMIT = 128 * 1024
"""Bytes the departures may take: past it, those seen go first are left out (after a restart,
such a name's pods count again only once written for the new Node)."""
SIGHTINGS_VERSION = 1
SIGHTINGS_LIMIT = 512 * 1024
"""Bytes the record may take (a ConfigMap holds 1 MiB): past it, the nodes sighted last are
left out, and after a restart their holds start again (later, never earlier)."""


def restored(sighted: NodeSightings) -> NodeSightings:
    """The sightings as a new process takes them: made on another reading of the server's
    clock (`sightings.RESTORED_MARGIN`), and only of episodes the node wrote a time for (one
    without could have ended and begun again while no process watched)."""
    kept = {
        key: replace(s, restored=True)
        for key, s in sighted.conditions.items()
        if tells_episodes_apart(s.token)
    }
    return NodeSightings(sighted.uid, kept)


class SightingsRecordError(ValueError):
    """The stored record cannot be read (hand-edited, truncated, a newer format)."""


@dataclass(frozen=True)
class NodeSightings:
    uid: str
    """The Node object they were made of: a node re-created under its name starts afresh."""
    conditions: Mapping[ConditionKey, Sighting]


def worth_keeping(node: NodeState, rules: NodeRules) -> Kept:
    """The node's sightings whose first sight still decides something: of the conditions a
    `for` hold is counting (its conditions hold and its taint is not on the node), a re-gated
    gate's, and a continuous node-agent rule's agents (`sightings.is_kept`)."""
    return frozenset(key for rule in rules.taint_rules() for key in sightings_kept(node, rule))


def encode_sightings(nodes: Mapping[str, NodeSightings]) -> dict[str, str]:
    """The ConfigMap's data, within `SIGHTINGS_LIMIT`: the earliest sightings first (a hold
    about to fire is worth more than one just begun), and only those a new process would take
    back (`restored`): one it would drop must not push out one it would keep."""
    kept = {name: s for name, sighted in nodes.items() if (s := restored(sighted)).conditions}
    first = {name: min(s.first_seen for s in k.conditions.values()) for name, k in kept.items()}
    document: dict[str, Any] = {"version": SIGHTINGS_VERSION, "nodes": {}}
    size = len(json.dumps(document))
    for name, sighted in sorted(kept.items(), key=lambda item: (first[item[0]], item[0])):
        entry = {
            "uid": sighted.uid,
            "conditions": [
                {
                    "type": key[0],
                    "status": key[1],
                    "token": s.token,
                    "firstSeen": format_precise_time(s.first_seen),
                    "witnessed": s.witnessed,
                }
                for key, s in sorted(sighted.conditions.items())
            ],
        }
        size += len(json.dumps({name: entry})) + 1
        if size > SIGHTINGS_LIMIT:
            break
        document["nodes"][name] = entry
    return {SIGHTINGS_KEY: json.dumps(document, separators=(",", ":"), sort_keys=True)}


def decode_sightings(data: Mapping[str, Any] | None) -> dict[str, NodeSightings]:
    """The sightings a ConfigMap's data holds (none when it has none); SightingsRecordError
    saying why it cannot be read."""
    where = (SIGHTINGS_CONFIGMAP, SIGHTINGS_KEY)
    return read_document(data, where, SIGHTINGS_VERSION, _nodes, SightingsRecordError) or {}


def _nodes(document: dict[str, Any]) -> dict[str, NodeSightings]:
    nodes = {}
    for name, entry in document["nodes"].items():
        conditions = {}
        for c in entry["conditions"]:
            first_seen = parse_time(c["firstSeen"])
            if first_seen is None:
                raise ValueError("a sighting has no time")
            key = (str(c["type"]), str(c["status"]))
            conditions[key] = Sighting(str(c["token"]), first_seen, bool(c["witnessed"]))
        nodes[str(name)] = NodeSightings(str(entry["uid"]), conditions)
    return nodes


def encode_departures(departed: Mapping[str, Departure]) -> dict[str, str]:
    """The ConfigMap's data for the departures (none when there are none), within
    `DEPARTED_LIMIT`, the latest seen go first."""
    if not departed:
        return {}
    document: dict[str, Any] = {"version": DEPARTED_VERSION, "nodes": {}}
    size = len(json.dumps(document))
    never = datetime.min.replace(tzinfo=UTC)
    latest_first = sorted(departed.items(), key=lambda item: (item[1].left or never, item[0]))
    for name, gone in reversed(latest_first):
        entry = {
            "uid": gone.uid,
            "bootID": gone.boot_id,
            "systemUUID": gone.system_uuid,
            "left": format_precise_time(gone.left) if gone.left is not None else None,
            "pods": {
                uid: format_precise_time(written) if written is not None else None
                for uid, written in sorted(gone.pods.items())
            },
        }
        size += len(json.dumps({name: entry})) + 1
        if size > DEPARTED_LIMIT:
            break
        document["nodes"][name] = entry
    return {DEPARTED_KEY: json.dumps(document, separators=(",", ":"), sort_keys=True)}


def decode_departures(data: Mapping[str, Any] | None) -> dict[str, Departure]:
    """The departures a ConfigMap's data holds (none when it has none); SightingsRecordError
    saying why they cannot be read."""
    where = (SIGHTINGS_CONFIGMAP, DEPARTED_KEY)
    found = read_document(data, where, DEPARTED_VERSION, _departures, SightingsRecordError)
    return found or {}


def _departures(document: dict[str, Any]) -> dict[str, Departure]:
    departed = {}
    for name, entry in document["nodes"].items():
        pods = {str(uid): parse_time(written) for uid, written in entry["pods"].items()}
        departed[str(name)] = Departure(
            str(entry["uid"]),
            str(entry["bootID"]),
            str(entry["systemUUID"]),
            pods,
            parse_time(entry["left"]),
        )
    return departed
