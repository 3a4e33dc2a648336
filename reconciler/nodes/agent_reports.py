"""Listed DaemonSets the DaemonSet controller will not run on some nodes (`cannotRun`): each
(rule, DaemonSet, reason) said once while any node shows it (a log line and a
`NodeAgentCannotRun` Warning Event on the rules' source, with the fix), and counted per node on
`nodegate_node_agents_cannot_run{rule, daemonset, action}` (the alerts read it).

Waiting for a pod the controller will never make is a decision, not a silence: a rule that skips
such a DaemonSet lifts without it, one that waits holds the node until that changes, and either
way an operator hears of it once, not once per node or per reconcile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from prometheus_client import Gauge

from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    CannotRunKey,
    cannot_run,
    cannot_run_message,
)
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.nodes.rules_source import SourceRef, report_on_source
from nodegate.reconciler.nodes.shown_on_nodes import ShownOnNodes

log = logging.getLogger(__name__)


class CannotRunReports:
    def __init__(
        self, recorder: Recorder, gauge: Gauge, source: Callable[[], SourceRef | None]
    ) -> None:
        self._recorder = recorder
        self._gauge = gauge
        self._source = source
        self._lock = threading.Lock()
        self._shown: ShownOnNodes[CannotRunKey] = ShownOnNodes()
        self._actions: dict[str, str] = {}
        """Each rule's `cannotRun`, as last seen."""

    def saw(self, node: str, rules: NodeRules, agents: Mapping[str, AgentReadiness]) -> None:
        """One reconcile's look at the node's agents (`PlanFacts.agents`)."""
        keys = cannot_run(agents)
        by_name = {r.name: r for r in rules.node_agents}
        with self._lock:
            changed = self._shown.show(node, keys)
            if changed is None:
                return
            before, new = changed
            self._actions.update((name, rule.cannot_run) for name, rule in by_name.items())
            self._show({(r, d) for r, d, _ in keys ^ before})
        for rule_name, daemon_set, refused in sorted(new):
            rule = by_name.get(rule_name)
            if rule is None:
                continue
            message = cannot_run_message(rule, daemon_set, refused, node)
            log.warning(message, extra={"rule": rule_name, "daemon_set": daemon_set})
            report_on_source(self._recorder, self._source(), "NodeAgentCannotRun", message)

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`): it counts no more."""
        with self._lock:
            self._show({(r, d) for r, d, _ in self._shown.forget(name)})

    def _show(self, pairs: set[tuple[str, str]]) -> None:
        """Set the gauge for these (rule, DaemonSet): nodes, whatever the reason (under the
        lock: a count is never overwritten by an older one)."""
        counts = dict.fromkeys(pairs, 0)
        for keys in self._shown.by_node.values():
            for rule, daemon_set in {(r, d) for r, d, _ in keys} & pairs:
                counts[rule, daemon_set] += 1
        for (rule, daemon_set), nodes in counts.items():
            action = self._actions.get(rule, "skip")
            for other in {"skip", "wait"} - {action}:
                self._gauge.labels(rule, daemon_set, other).set(0)
            self._gauge.labels(rule, daemon_set, action).set(nodes)
