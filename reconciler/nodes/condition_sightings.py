"""Since when each node's conditions hold, as this leader saw them: the table behind `for` and
a re-gate's conditions (`nodegate.core.sightings`), and the part of it that must outlive the
process (`nodegate.core.sightings_record`).

Looked at on every watch event and again when a node is planned (a node that sent no event
since the rules began reading a condition type is sighted then), from several threads. Only
conditions of types some rule reads are kept, so 5,000 nodes cost a few entries each at most.
After a restart, a node's first look starts from what the record kept of it (same Node object,
same episode); anything else is first seen then, unwitnessed: later, never earlier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from nodegate.core.node import NodeState
from nodegate.core.sightings import ConditionKey, Sighting, condition_episodes, track
from nodegate.core.sightings_record import NodeSightings, restored


class ConditionSightings:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[ConditionKey, Sighting]] = {}
        self._stored: dict[str, NodeSightings] = {}
        """What the record held when this process started, until each node's first look."""
        self._kept: dict[str, NodeSightings] = {}
        self._changed = False
        self._lock = threading.Lock()

    def restore(self, stored: Mapping[str, NodeSightings]) -> None:
        """The record as read at start: each node's first look begins from it
        (`sightings_record.restored`)."""
        later = {name: restored(sighted) for name, sighted in stored.items()}
        with self._lock:
            self._stored = dict(later)
            self._kept = dict(later)

    def look(
        self,
        key: str,
        node: NodeState,
        read: Callable[[str], bool],
        now: datetime,
        keep: frozenset[ConditionKey] = frozenset(),
    ) -> Mapping[ConditionKey, Sighting]:
        """The node's sightings after one more look at it; those in `keep` (still deciding
        something: `sightings_record.worth_keeping`) are what the record keeps of it."""
        episodes = condition_episodes(node.conditions, read)
        with self._lock:
            previous = self._by_node.get(key)
            if previous is None:
                stored = self._stored.pop(key, None)
                restored = stored.conditions if stored and stored.uid == node.uid else None
                tracked = track(restored, episodes, now, witnessing=False)
            else:
                tracked = track(previous, episodes, now)
            self._by_node[key] = tracked
            kept = {k: s for k, s in tracked.items() if k in keep}
            self._keep(key, NodeSightings(node.uid, kept) if kept else None)
        return tracked

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_node.pop(key, None)
            self._stored.pop(key, None)
            self._keep(key, None)

    def forget_all(self) -> None:
        """Rules that read other condition types: a type newly read was not watched begin.
        What the record keeps stays, for each node's next (first) look."""
        with self._lock:
            self._by_node.clear()
            self._stored = {**self._stored, **self._kept}

    def keep_only(self, live: set[str]) -> None:
        """Forget every node not in `live` (names in the synced cache): one deleted while no
        process watched, or whose delete a watch gap hid, leaves the record."""
        with self._lock:
            for key in [k for k in {*self._by_node, *self._stored, *self._kept} if k not in live]:
                self._by_node.pop(key, None)
                self._stored.pop(key, None)
                self._keep(key, None)

    def changes(self) -> dict[str, NodeSightings] | None:
        """What the record should now hold, if that changed since the last call."""
        with self._lock:
            if not self._changed:
                return None
            self._changed = False
            return dict(self._kept)

    def changed_again(self) -> None:
        """The last `changes` could not be written: offer them again."""
        with self._lock:
            self._changed = True

    def _keep(self, key: str, sighted: NodeSightings | None) -> None:
        if self._kept.get(key) == sighted:
            return
        if sighted is None:
            del self._kept[key]
        else:
            self._kept[key] = sighted
        self._changed = True
