"""The one list of what the node controller remembers per node, forgotten through it when a node
is gone (deleted, or re-created under its name with a new uid while the watch was down).

A collaborator that keeps something per node implements `NodeMemory` and is registered in the
controller's one `NodeMemories.add`, so a delete cannot miss it: the node's facts (its
condition sightings and boots), the writer's dry-run reports, the eviction breaker's waiting
nodes, the gate and agent reports. Not in the list, by design: the work queue (its key is discarded
first), the persisted-label records (a deleted node's last state is kept until its key's last
reconcile marks its record gone), their key index (told of every event, the delete too) and
the node's departure (the machine it reported and the pods Ready for it, kept as it goes for
the next Node of its name: `NodeFacts.went`, `re_registration`).
A unit test deletes a node every collaborator remembered and fails, naming what was kept, if any
of them is left out of the list (tests/unit/reconciler/nodes/test_controller.py).
"""

from __future__ import annotations

from typing import Protocol


class NodeMemory(Protocol):
    def forget(self, name: str, uid: str | None) -> None:
        """The node `name` (of `uid`, when known) is gone: drop what is remembered of it."""


class NodeMemories:
    def __init__(self) -> None:
        self._members: list[NodeMemory] = []

    def add(self, *members: NodeMemory) -> None:
        self._members.extend(members)

    def forget(self, name: str, uid: str | None) -> None:
        for member in self._members:
            member.forget(name, uid)
