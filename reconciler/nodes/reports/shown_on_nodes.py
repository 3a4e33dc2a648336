"""Which reports each node shows, for reports said once while any node shows them (a
`NodeAgentCannotRun`, a `NodeAgentDeadlock`): however many nodes and reconciles show one, it is
said when the first node shows it, and again only if it comes back after every node was rid
of it. Not locked: its owner's lock guards it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


class ShownOnNodes(Generic[Key]):
    def __init__(self) -> None:
        self.by_node: dict[str, frozenset[Key]] = {}
        self._nodes: Counter[Key] = Counter()
        """How many nodes show each report."""

    def show(self, node: str, keys: frozenset[Key]) -> tuple[frozenset[Key], list[Key]] | None:
        """The node now shows `keys`: None when it showed them already; else what it showed
        before, and the reports no node showed until now (to be said)."""
        before = self.by_node.get(node, frozenset())
        if keys == before:
            return None
        new = [k for k in keys - before if self._nodes[k] == 0]
        self._move(node, before, keys)
        return before, new

    def forget(self, node: str) -> frozenset[Key]:
        """The node is gone: what it showed."""
        before = self.by_node.get(node, frozenset())
        if before:
            self._move(node, before, frozenset())
        return before

    def _move(self, node: str, before: frozenset[Key], after: frozenset[Key]) -> None:
        self._nodes.subtract(before)
        self._nodes.update(after)
        for key in before - after:
            if self._nodes[key] <= 0:
                del self._nodes[key]
        if after:
            self.by_node[node] = after
        else:
            self.by_node.pop(node, None)
