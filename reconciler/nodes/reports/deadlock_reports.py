"""Rules seen waiting for each other on nodes (`agent_deadlocks`): each deadlock said as a
`ShownOnNodes` report is (a log line and a `NodeAgentDeadlock` Warning Event on the rules'
source, naming both rules and the tolerations that end it).

No reconcile can end such a wait: a gate's init pod kept away by an agent taint, the agent rule
waiting for a DaemonSet the gate keeps away. So it is reported as `NodeAgentCannotRun` is, as a
decision the rules and the DaemonSets made, not left for someone to find in `nodegate explain`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from nodegate.core.decisions.agent_deadlocks import Deadlock
from nodegate.reconciler.nodes.reports.shown_on_nodes import ShownOnNodes

log = logging.getLogger(__name__)


class DeadlockReports(ShownOnNodes[tuple[object, ...]]):
    def __init__(self, warn: Callable[[str, str], None]) -> None:
        super().__init__()
        self._warn = warn

    def saw(self, node: str, found: Iterable[Deadlock]) -> None:
        """One reconcile's look at the node (`NodeAgents.deadlocks`)."""
        by_key = {d.key: d for d in found}
        for key in self.show(node, frozenset(by_key)):
            message = by_key[key].message()
            log.warning(message, extra={"rules": ",".join(by_key[key].rules)})
            self._warn("NodeAgentDeadlock", message)
