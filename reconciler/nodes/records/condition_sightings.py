"""Since when each node's conditions hold, as this leader saw them: the table behind `for` and
a re-gate's conditions (`nodegate.core.decisions.sightings`), and the part of it that must outlive
the process (`nodegate.core.objects.sightings_record`).

Looked at on every watch event and again when a node is planned (a node that sent no event
since the rules began reading a condition type is sighted then), from several threads. Only
conditions of types some rule reads are kept, so 5,000 nodes cost a few entries each at most.
After a restart, a node's first look starts from what the record kept of it (same Node object,
same episode); anything else is first seen then, unwitnessed: later, never earlier. Beside
them, the record keeps the Node objects seen go (`Departures`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Generic, TypeVar

from nodegate.core.decisions.node_agents import AGENT_EPISODE_PREFIX, continues
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.sightings import (
    ConditionKey,
    Kept,
    Sighting,
    condition_episodes,
    is_kept,
    track,
)
from nodegate.core.objects.sightings_record import NodeSightings, restored
from nodegate.core.rules.conditions import condition_types_read
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState

V = TypeVar("V")


class KeptTable(Generic[V]):
    """What the sightings record keeps of each node, by name, and whether it changed since the
    record was last offered it (`changes`): read and written under `_lock`, by any thread."""

    def __init__(self) -> None:
        self._kept: dict[str, V] = {}
        self._changed = False
        self._lock = threading.Lock()

    def changes(self) -> dict[str, V] | None:
        """What the record should now hold, if that changed since the last call."""
        with self._lock:
            if not self._changed:
                return None
            self._changed = False
            return dict(self._kept)

    def kept(self) -> dict[str, V]:
        """What the record holds now (written with a change of the other table)."""
        with self._lock:
            return dict(self._kept)

    def changed_again(self) -> None:
        """The last `changes` could not be written: offer them again."""
        with self._lock:
            self._changed = True

    def _keep(self, key: str, value: V | None) -> None:
        """Under `_lock`: keep `value` for `key` (None: nothing)."""
        if self._kept.get(key) == value:
            return
        if value is None:
            del self._kept[key]
        else:
            self._kept[key] = value
        self._changed = True


class ConditionSightings(KeptTable[NodeSightings]):
    def __init__(self) -> None:
        super().__init__()
        self._rules: NodeRules | None = None
        self._read = condition_types_read(None)
        self._by_node: dict[str, dict[ConditionKey, Sighting]] = {}
        self._stored: dict[str, NodeSightings] = {}
        """What the record held when this process started, until each node's first look."""
        self._unconfirmed: dict[str, set[ConditionKey]] = {}
        """Agent sightings carried through looks that did not see the agent (restored, or
        unknown at the time): their next sight must show the same episode to keep them."""

    def restore(self, stored: Mapping[str, NodeSightings]) -> None:
        """The record as read at start: each node's first look begins from it
        (`sightings_record.restored`)."""
        later = {name: restored(sighted) for name, sighted in stored.items()}
        with self._lock:
            self._stored = dict(later)
            self._kept = dict(later)

    def _read_for(self, rules: NodeRules | None) -> None:
        """Sight the condition types `rules` read; if that changes them, every node's next look
        is a first look (a type newly read was not watched before). What the record keeps
        stays, for that look. Called under the lock, by the look that first sees the rules."""
        self._rules = rules
        read = condition_types_read(rules)
        if read == self._read:
            return
        self._read = read
        self._by_node.clear()
        self._unconfirmed.clear()
        self._stored = {**self._stored, **self._kept}

    def look(
        self,
        key: str,
        node: NodeState,
        rules: NodeRules | None,
        now: datetime,
        keep: Kept = frozenset(),
        others: Mapping[ConditionKey, str] | None = None,
        unknown: frozenset[str] = frozenset(),
    ) -> Mapping[ConditionKey, Sighting]:
        """The node's sightings after one more look at it under `rules` (the types they read,
        set by the first look that sees them, so no look mixes rules with another's table);
        those `keep` names (still deciding something: `sightings_record.worth_keeping`) are what
        the record keeps of it. `others`: the node agents' not-Ready episodes
        (`node_agents.agent_episodes`), seen on other objects than the Node, sighted alike
        except that one lasts while its agent stays not Ready at every look, whatever pod
        shows it (a pod replaced is the same outage); `unknown`: the types of the agents not
        looked up this time, whose sightings are carried as they were. Nothing is sighted
        while no rules are in force."""
        with self._lock:
            if rules is not self._rules:
                self._read_for(rules)
            if rules is None:
                return {}
            episodes = {**condition_episodes(node.conditions, self._read_by_node), **(others or {})}
            previous = self._by_node.get(key)
            unconfirmed = self._unconfirmed.pop(key, set())
            if previous is None:
                stored = self._stored.pop(key, None)
                restored = stored.conditions if stored and stored.uid == node.uid else None
                tracked = track(restored, episodes, now, witnessing=False)
                carried = {k: s for k, s in (restored or {}).items() if k[0] in unknown}
            else:
                tracked = track(previous, episodes, now)
                for agent, token in (others or {}).items():
                    seen = previous.get(agent)
                    if (
                        seen is not None
                        and agent not in unconfirmed
                        and continues(seen.token, token)
                    ):
                        tracked[agent] = replace(seen, token=token)
                carried = {k: s for k, s in previous.items() if k[0] in unknown}
            tracked.update(carried)
            # Carried without being seen: only a restored sighting (or one not seen since) must
            # show the same episode at its next sight; one this process saw stays confirmed.
            doubtful = {k for k in carried if previous is None or k in unconfirmed}
            if doubtful:
                self._unconfirmed[key] = doubtful
            self._by_node[key] = tracked
            kept = {k: s for k, s in tracked.items() if is_kept(k, keep)}
            self._keep(key, NodeSightings(node.uid, kept) if kept else None)
        return tracked

    def _read_by_node(self, condition_type: str) -> bool:
        """A type the rules read, and not one nodegate keeps its agents' episodes under (a node
        reporting such a condition must not stand in for its agents)."""
        return self._read(condition_type) and not condition_type.startswith(AGENT_EPISODE_PREFIX)

    def forget(self, key: str) -> None:
        with self._lock:
            self._by_node.pop(key, None)
            self._unconfirmed.pop(key, None)
            self._stored.pop(key, None)
            self._keep(key, None)

    def keep_only(self, live: set[str]) -> None:
        """Forget every node not in `live` (names in the synced cache): one deleted while no
        process watched, or whose delete a watch gap hid, leaves the record."""
        with self._lock:
            for key in [k for k in {*self._by_node, *self._stored, *self._kept} if k not in live]:
                self._by_node.pop(key, None)
                self._unconfirmed.pop(key, None)
                self._stored.pop(key, None)
                self._keep(key, None)


class Departures(KeptTable[Departure]):
    """The Node objects this leader saw go while pods were Ready for them, by name
    (`re_registration`): kept in the sightings record, so a restart between a Node's delete and
    its name's next registration loses none; dropped once nothing they hold decides anything
    (`still_deciding`). Set by the node informer's thread, read by any."""

    def get(self, key: str) -> Departure | None:
        with self._lock:
            return self._kept.get(key)

    def went(self, key: str, gone: Departure | None) -> None:
        """The Node object of `key` went: what is kept of it (None: nothing) replaces what was
        kept of the one before it."""
        with self._lock:
            self._keep(key, gone)

    def prune(self, kept: Callable[[str, Departure], Departure | None]) -> None:
        """Keep of each departure what `kept` says still decides something."""
        with self._lock:
            for key, gone in list(self._kept.items()):
                self._keep(key, kept(key, gone))

    def restore(self, stored: Mapping[str, Departure]) -> None:
        """The record as read at start (a departure seen by this process since stays)."""
        with self._lock:
            self._kept = {**stored, **self._kept}
