"""Which live nodes claim each persisted-label record key.

A kubelet may register with any providerID, so two live Node objects can claim one key; the
core's rule is then to restore to neither and take the record over for neither. This index is
what lets a reconcile see the other claimants without scanning every node: kept up to date from
the node watch, rebuilt when the rules (and so the key) change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from nodegate.core.decisions.persisted_labels import record_key
from nodegate.core.rules.model import PersistentLabels
from nodegate.core.rules.node import NodeState


class RecordKeys:
    def __init__(self, alive: Callable[[str], bool] = lambda _name: True) -> None:
        """`alive(name)`: whether the node is still cached (a node dropped from the cache
        without a watch event must not stay a claimant)."""
        self._alive = alive
        self._lock = threading.Lock()
        self._config: PersistentLabels | None = None
        self._key_of: dict[str, str] = {}
        self._claimants: dict[str, set[str]] = {}

    def rebuild(self, nodes: Iterable[NodeState], config: PersistentLabels | None) -> None:
        """Index every live node under `config`'s key (nothing while no labels persist)."""
        with self._lock:
            self._config = config
            self._key_of.clear()
            self._claimants.clear()
            for node in nodes:
                self._put(node.name, node)

    def observe(self, name: str, node: NodeState | None) -> tuple[str, ...]:
        """A node was added, changed (its providerID may appear) or deleted (None); the other
        claimants of the key it no longer claims, who may now be alone with it (to be planned
        again at once: a record withheld from rivals goes to the survivor)."""
        with self._lock:
            before = self._key_of.get(name)
            self._put(name, node)
            if before is None or self._key_of.get(name) == before:
                return ()
            return tuple(sorted(self._claimants.get(before, set())))

    def rivals(self, name: str, key: str) -> tuple[str, ...]:
        """The other live nodes that claim `key`, by name."""
        with self._lock:
            others = sorted(self._claimants.get(key, set()) - {name})
        return tuple(other for other in others if self._alive(other))

    def contested(self) -> int:
        """How many keys more than one live node claims."""
        with self._lock:
            return sum(1 for names in self._claimants.values() if len(names) > 1)

    def _put(self, name: str, node: NodeState | None) -> None:
        previous = self._key_of.pop(name, None)
        if previous is not None:
            holders = self._claimants[previous]
            holders.discard(name)
            if not holders:
                del self._claimants[previous]
        if node is None or self._config is None:
            return
        key = record_key(node, self._config)
        if key:
            self._key_of[name] = key
            self._claimants.setdefault(key, set()).add(name)
