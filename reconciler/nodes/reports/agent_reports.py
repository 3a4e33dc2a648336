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
from collections import Counter
from collections.abc import Callable, Mapping

from prometheus_client import Gauge

from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    CannotRunKey,
    cannot_run,
    cannot_run_message,
)
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.nodes.reports.deadlock_reports import DeadlockReports
from nodegate.reconciler.nodes.reports.shown_on_nodes import ShownOnNodes
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents

log = logging.getLogger(__name__)


Pair = tuple[str, str, str]
"""(rule, DaemonSet, action): one series of the gauge."""


def _pairs(keys: frozenset[CannotRunKey]) -> set[Pair]:
    return {(rule, daemon_set, action) for rule, daemon_set, _, action in keys}


class CannotRunReports(ShownOnNodes[CannotRunKey]):
    def __init__(self, warn: Callable[[str, str], None], gauge: Gauge) -> None:
        super().__init__()
        self._warn = warn
        self._gauge = gauge
        self._series: Counter[Pair] = Counter()
        """Nodes per gauge series, kept as nodes change (a count never walks every node)."""

    def saw(self, node: str, rules: NodeRules, agents: Mapping[str, AgentReadiness]) -> None:
        """One reconcile's look at the node's agents (`PlanFacts.agents`)."""
        new = self.show(node, cannot_run(agents))
        by_name = {r.name: r for r in rules.node_agents}
        for rule_name, daemon_set, refused, action in sorted(new):
            rule = by_name.get(rule_name)
            if rule is None:
                continue
            message = cannot_run_message(rule, daemon_set, refused, node, action)
            log.warning(message, extra={"rule": rule_name, "daemon_set": daemon_set})
            self._warn("NodeAgentCannotRun", message)

    def _move(
        self, node: str, before: frozenset[CannotRunKey], after: frozenset[CannotRunKey]
    ) -> None:
        """Also move the node's gauge series and set the changed ones (under the lock: a count
        is never overwritten by an older one)."""
        super()._move(node, before, after)
        old, new = _pairs(before), _pairs(after)
        self._series.subtract(old)
        self._series.update(new)
        for pair in old ^ new:
            self._gauge.labels(*pair).set(max(self._series[pair], 0))
            if self._series[pair] <= 0:
                del self._series[pair]


class AgentReports:
    """Everything said of the node agents, each once while it lasts: DaemonSets that can never
    run where their rule's taint is, those the DaemonSet controller will not run on a node, and
    rules waiting for each other on a node. One member of the node memory."""

    def __init__(
        self,
        warn: Callable[[str, str], None],
        gauge: Gauge,
        agents: Callable[[], NodeAgents],
        rules: Callable[[], NodeRules | None],
        look_again: Callable[[], None],
    ) -> None:
        """`agents`: the node-agent rules' source, asked at each look; `rules` those in force;
        `look_again` queues every node for a reconcile behind the events."""
        self._warn = warn
        self._problems_said: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.cannot_run = CannotRunReports(warn, gauge)
        self.deadlocks = DeadlockReports(warn)
        self._agents = agents
        self._rules = rules
        self._look_again = look_again

    def daemon_sets_changed(self) -> None:
        """A DaemonSet made, retargeted or deleted (rare), or its informer synced: every node
        is looked at again, and the DaemonSet problems reported. Not when rules are applied:
        their nodes are queued last, once the cache follows them (`Controller`)."""
        if (rules := self._rules()) is not None:
            self._look_again()
            self.report_problems(self._agents().problems(rules))

    def report_problems(self, problems: tuple[str, ...]) -> None:
        """Listed DaemonSets that can never run where their rule's taint is (missing, or not
        tolerating it: `daemon_set_problems`), each said once while it lasts, with the fix (the
        informers' threads and the rules' thread report)."""
        with self._lock:
            new = [p for p in problems if p not in self._problems_said]
            self._problems_said = problems
        for problem in new:
            logging.getLogger("nodegate.controller").warning("node agent cannot run: %s", problem)
            self._warn("NodeAgentCannotRun", problem)

    def saw(
        self, key: str, node: NodeState, rules: NodeRules, agents: Mapping[str, AgentReadiness]
    ) -> None:
        """What one reconcile found of the node's agents (`NodeFacts`' `on_agents`)."""
        self.cannot_run.saw(key, rules, agents)
        self.deadlocks.saw(key, self._agents().deadlocks(rules, node))

    def forget(self, name: str, uid: str | None = None) -> None:
        self.cannot_run.forget(name, uid)
        self.deadlocks.forget(name, uid)

    def keep_only(self, live: set[str]) -> None:
        self.cannot_run.keep_only(live)
        self.deadlocks.keep_only(live)
