"""Which taints nodegate's rules have owned, kept where nodes cannot write.

The ownership annotation on a Node lets a deleted rule still clean up its taints, but a kubelet
may edit its own Node's annotations, so the annotation alone must never decide a removal. This
record, a ConfigMap in the reconciler's namespace that only the reconciler (and cluster admins)
may write, lists every (key, effect) some accepted rules generation owned; the planner removes
a taint the annotation claims only if it is listed here (`core.decisions.plan.removable_taints`).

Format (`data["taints.json"]`): {"version": 1, "taints": [{"key", "effect", "lastOwned"}]},
oldest entries dropped past `MAX_ENTRIES`. An unreadable record is reported and treated as
empty: that can only make nodegate remove less, never more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nodegate.core.rules.node import format_time
from nodegate.core.text.stored_document import read_document

HISTORY_CONFIGMAP = "nodegate-taint-history"
DATA_KEY = "taints.json"
MAX_ENTRIES = 2000
"""Far above what a rules file owns (hundreds of taints); keeps the record well under 1 MiB."""

Identity = tuple[str, str]


class HistoryError(ValueError):
    """The stored record cannot be read."""


def decode_history(data: Mapping[str, Any] | None) -> dict[Identity, str]:
    """(key, effect) -> lastOwned from a ConfigMap's data; HistoryError if malformed."""
    where = (HISTORY_CONFIGMAP, DATA_KEY)
    return read_document(data, where, 1, _entries, HistoryError) or {}


def _entries(document: dict[str, Any]) -> dict[Identity, str]:
    return {
        (str(e["key"]), str(e["effect"])): str(e.get("lastOwned", "")) for e in document["taints"]
    }


def encode_history(entries: Mapping[Identity, str]) -> dict[str, str]:
    newest = sorted(entries.items(), key=lambda item: (item[1], item[0]), reverse=True)
    kept = sorted(newest[:MAX_ENTRIES])
    taints = [{"key": k, "effect": e, "lastOwned": t} for (k, e), t in kept]
    return {DATA_KEY: json.dumps({"version": 1, "taints": taints}, indent=1, sort_keys=True)}


def merged(
    entries: Mapping[Identity, str], owned: frozenset[Identity], now: datetime
) -> dict[Identity, str]:
    return {**entries, **dict.fromkeys(owned, format_time(now))}
