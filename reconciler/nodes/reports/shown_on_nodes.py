"""Which reports each node shows, for reports said once while any node shows them (a
`NodeAgentCannotRun`, a `NodeAgentDeadlock`): however many nodes and reconciles show one, it is
said when the first node shows it, and again only if it comes back after every node was rid
of it. The reporters are made of it (any thread: one lock guards it)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


class ShownOnNodes(Generic[Key]):
    def __init__(self) -> None:
        self.by_node: dict[str, frozenset[Key]] = {}
        self._nodes: Counter[Key] = Counter()
        """How many nodes show each report."""
        self._lock = threading.Lock()

    def show(self, node: str, keys: frozenset[Key]) -> list[Key]:
        """The node now shows `keys`: the reports no node showed until now (to be said)."""
        with self._lock:
            before = self.by_node.get(node, frozenset())
            if keys == before:
                return []
            new = [k for k in keys - before if self._nodes[k] == 0]
            self._move(node, before, keys)
        return new

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): it shows nothing more."""
        with self._lock:
            self._move(name, self.by_node.get(name, frozenset()), frozenset())

    def keep_only(self, live: set[str]) -> None:
        """Forget every node not in `live` (names): one a worker saw just after its delete."""
        with self._lock:
            for node in [n for n in self.by_node if n not in live]:
                self._move(node, self.by_node[node], frozenset())

    def _move(self, node: str, before: frozenset[Key], after: frozenset[Key]) -> None:
        """Under the lock: the node showed `before` and now shows `after`."""
        self._nodes.subtract(before)
        self._nodes.update(after)
        for key in before - after:
            if self._nodes[key] <= 0:
                del self._nodes[key]
        if after:
            self.by_node[node] = after
        else:
            self.by_node.pop(node, None)
