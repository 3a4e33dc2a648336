"""Since when each node's conditions hold, as this process saw them: the table behind `for`
and a re-gate's conditions (`nodegate.core.sightings`).

Looked at on every watch event and again when a node is planned (a node that sent no event
since the rules began reading a condition type is sighted then), from several threads. Only
conditions of types some rule reads are kept, so 5,000 nodes cost a few entries each at most.
After a restart the table is rebuilt from the first look, unwitnessed: a sighting can only come
later, and one whose beginning nobody saw is not taken as evidence of a new boot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from nodegate.core.node import NodeState
from nodegate.core.sightings import ConditionKey, Sighting, condition_episodes, track


class ConditionSightings:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[ConditionKey, Sighting]] = {}
        self._lock = threading.Lock()

    def look(
        self, key: str, node: NodeState, read: Callable[[str], bool], now: datetime
    ) -> Mapping[ConditionKey, Sighting]:
        """The node's sightings after one more look at it."""
        episodes = condition_episodes(node.conditions, read)
        with self._lock:
            tracked = track(self._by_node.get(key), episodes, now)
            self._by_node[key] = tracked
        return tracked

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_node.pop(key, None)

    def forget_all(self) -> None:
        """Rules that read other condition types: a type newly read was not watched begin."""
        with self._lock:
            self._by_node.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_node)
