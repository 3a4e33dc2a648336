"""Rules seen waiting for each other on nodes (`agent_deadlocks`): each deadlock said once while
any node shows it, however many nodes and reconciles do (a log line and a `NodeAgentDeadlock`
Warning Event on the rules' source, naming both rules and the tolerations that end it), and
again if it comes back after every node was rid of it.

No reconcile can end such a wait: a gate's init pod kept away by an agent taint, the agent rule
waiting for a DaemonSet the gate keeps away. So it is reported as `NodeAgentCannotRun` is, as a
decision the rules and the DaemonSets made, not left for someone to find in `nodegate explain`.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable

from nodegate.core.decisions.agent_deadlocks import Deadlock
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.nodes.rules_source import SourceRef, report_on_source

log = logging.getLogger(__name__)

DeadlockKey = tuple[object, ...]


class DeadlockReports:
    def __init__(self, recorder: Recorder, source: Callable[[], SourceRef | None]) -> None:
        self._recorder = recorder
        self._source = source
        self._lock = threading.Lock()
        self._by_node: dict[str, frozenset[DeadlockKey]] = {}
        self._nodes: Counter[DeadlockKey] = Counter()
        """How many nodes show each deadlock."""

    def saw(self, node: str, found: Iterable[Deadlock]) -> None:
        """One reconcile's look at the node (`NodeAgents.deadlocks`)."""
        by_key = {d.key: d for d in found}
        keys = frozenset(by_key)
        with self._lock:
            before = self._by_node.get(node, frozenset())
            if keys == before:
                return
            new = [k for k in keys - before if self._nodes[k] == 0]
            self._move(node, before, keys)
        for key in new:
            message = by_key[key].message()
            log.warning(message, extra={"rules": ",".join(by_key[key].rules)})
            report_on_source(self._recorder, self._source(), "NodeAgentDeadlock", message)

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): it shows nothing more."""
        with self._lock:
            before = self._by_node.get(name)
            if before is not None:
                self._move(name, before, frozenset())

    def _move(
        self, node: str, before: frozenset[DeadlockKey], after: frozenset[DeadlockKey]
    ) -> None:
        self._nodes.subtract(before)
        self._nodes.update(after)
        for key in before - after:
            if self._nodes[key] <= 0:
                del self._nodes[key]
        if after:
            self._by_node[node] = after
        else:
            self._by_node.pop(node, None)
