"""The eviction ledger as stored: every grant of an eviction budget, kept where nodes cannot
write, so that a restart or a new leader counts what was spent. Pure.

A node's own NoExecute taint (its `timeAdded`) says only what is still on it: a node that
recovered within the window, and every `noSchedule: true` grant, would be forgotten. So the
leader writes each grant here before the taint it allows is written (no grant without its
record), in the API server's time, which every replica reads alike (`core.decisions.eviction_budget`
counts windows in it).

Format (`data["grants.json"]`): {"version": 1, "grants": [{"ledger", "node", "pool", "zone",
"at"}]}: the latest grant of each node in each ledger, younger than that ledger's window
(`compact`), and never older than `KEEP`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from nodegate.core.decisions.eviction_budget import Grant, Place, budget_of, grants_on_nodes
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, parse_time
from nodegate.core.text.stored_document import read_document

LEDGER_CONFIGMAP = "nodegate-eviction-ledger"
LEDGER_KEY = "grants.json"
LEDGER_VERSION = 1
KEEP = timedelta(days=1)
"""The longest window a budget may have: older grants count for nothing."""


class LedgerError(ValueError):
    """The stored ledger cannot be read (hand-edited, truncated, a newer format)."""


def encode_ledger(grants: Iterable[Grant], now: datetime) -> dict[str, str]:
    """The ConfigMap's data: the grants younger than KEEP, oldest first, in a stable order."""
    kept = sorted((g for g in grants if now - g.at < KEEP), key=lambda g: (g.at, g.ledger, g.node))
    document = {
        "version": LEDGER_VERSION,
        "grants": [
            {
                "ledger": g.ledger,
                "node": g.node,
                "pool": g.place.pool,
                "zone": g.place.zone,
                "at": g.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
            for g in kept
        ],
    }
    return {LEDGER_KEY: json.dumps(document, separators=(",", ":"))}


def decode_ledger(data: Mapping[str, Any] | None) -> list[Grant]:
    """The grants a ConfigMap's data holds (none when it has no ledger); LedgerError saying why
    it cannot be read."""
    where = (LEDGER_CONFIGMAP, LEDGER_KEY)
    return read_document(data, where, LEDGER_VERSION, _grants, LedgerError) or []


def _grants(document: dict[str, Any]) -> list[Grant]:
    grants = []
    for entry in document["grants"]:
        at = parse_time(entry["at"])
        if at is None:
            raise ValueError("a grant has no time")
        place = Place(_optional(entry.get("pool")), _optional(entry.get("zone")))
        grants.append(Grant(str(entry["ledger"]), str(entry["node"]), place, at))
    return grants


def merged(mine: Iterable[Grant], stored: Iterable[Grant]) -> list[Grant]:
    """Every grant of either, once."""
    return list(dict.fromkeys([*stored, *mine]))


def compact(
    grants: Iterable[Grant], window: Callable[[str], timedelta], now: datetime
) -> list[Grant]:
    """The grants that still count: the latest of each node in each ledger (a node counts once
    per window however often its condition flaps), younger than its ledger's window. So the
    ledger holds at most what the budget let through in one window, not a day of flapping."""
    latest: dict[tuple[str, str], Grant] = {}
    for grant in grants:
        key = (grant.ledger, grant.node)
        if key not in latest or grant.at > latest[key].at:
            latest[key] = grant
    return [g for g in latest.values() if now - min(g.at, now) < window(g.ledger)]


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def spent(
    nodes: Iterable[NodeState], rules: NodeRules, recorded: Iterable[Grant], now: datetime
) -> list[Grant]:
    """What counts as spent now: the ledger's grants still in their window (one dated after
    `now`, by a leader whose clock ran ahead of this one's, counts as made now, never as not
    made yet), and the evicting taints on the nodes (one an admin or another tool added, that
    no grant records). The breaker admits on it, and `nodegate explain` and `status` show it."""
    grants = compact(recorded, lambda ledger: budget_of(rules, ledger).window, now)
    counted = [g if g.at <= now else replace(g, at=now) for g in grants]
    return [*grants_on_nodes(nodes, rules, now), *counted]
