"""The eviction breaker: one lock around the eviction budget, the nodes kept waiting, and the
one Warning that says so.

The decision is `nodegate.core.eviction_budget`; this keeps what was granted (in memory, and as
the nodes' own `timeAdded` says, so a restart or a new leader does not reset the budget), which
nodes wait for which rule, the metric, and one Event per hold episode. Concurrent workers admit
under one lock, read and record together, so together they never overspend the budget.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodegate.core.eviction_budget import Grant, Verdict, admit, census, charges, grants_on_nodes
from nodegate.core.model import NodeRules
from nodegate.core.node import NodeState
from nodegate.core.plan import NodePlan
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.rules_source import SourceRef, report_on_source

log = logging.getLogger("nodegate.controller")

REPORT_AFTER = timedelta(seconds=1)
"""A hold is reported this long after it starts, so its one Event names the nodes of the storm,
not only the first one that had to wait."""
EXAMPLES = 10
KEEP_GRANTS = timedelta(days=1)
"""The longest window a budget may have: older grants are forgotten."""
RELEASE_HOW = (
    "to let them through on purpose, give the rule its own evictionBudget (a larger one, or "
    "'unlimited') in the rules; if the blast-radius guard holds that edit, confirm its digest "
    "(docs/rules.md, 'Eviction budget')"
)


@dataclass(frozen=True)
class Hold:
    """What the breaker decided for one node: rules whose taint waits, and when to look again."""

    waiting: Mapping[str, str] = field(default_factory=dict)
    """rule -> why (for the planner's facts, explain and the dry run)."""
    retry_after: float | None = None


@dataclass
class _Episode:
    """From the first node that waits for a rule until none does."""

    started: datetime
    taint: str
    reported: bool = False
    verdict: Verdict | None = None


class EvictionBreaker:
    def __init__(
        self,
        recorder: Recorder,
        metrics: Metrics,
        nodes: Callable[[], Iterable[NodeState]],
        source: Callable[[], SourceRef | None],
        clock: Callable[[], datetime],
    ) -> None:
        self._recorder = recorder
        self._metrics = metrics
        self._nodes = nodes
        self._source = source
        self._now = clock
        self._lock = threading.Lock()
        self._grants: list[Grant] = []
        self._waiting: dict[str, dict[str, str]] = {}
        """rule -> node -> why."""
        self._episodes: dict[str, _Episode] = {}

    def admit(self, node: NodeState, node_plan: NodePlan, rules: NodeRules) -> Hold:
        """Grant what the budget allows of the plan's evicting taints; the rest wait."""
        wanted = charges(node, node_plan, rules)
        if not wanted:
            self.settle(node.name)
            return Hold()
        with self._lock:
            now = self._now()
            cached = list(self._nodes())
            self._grants = [g for g in self._grants if now - g.at < KEEP_GRANTS]
            spent = [*grants_on_nodes(cached, rules, now), *self._grants]
            decided = admit(rules, node, wanted, spent, census(cached), now)
            self._grants.extend(decided.granted)
            taints = {c.rule: c.taint for c in wanted}
            for rule, why in decided.waiting.items():
                self._wait(rule, node.name, why, taints[rule], decided.verdicts[rule], now)
            self._settle(node.name, keep=set(decided.waiting))
            due = [decided.retry_at] if decided.retry_at is not None else []
            reports = [self._due_report(rule, now) for rule in decided.waiting]
            due += [at for at in reports if at is not None]
        if not decided.waiting:
            return Hold()
        retry = max(0.0, (min(due) - now).total_seconds()) if due else None
        return Hold(decided.waiting, retry)

    def settle(self, name: str) -> None:
        """The node needs no evicting taint now (its condition recovered, or it got it)."""
        with self._lock:
            self._settle(name, keep=set())

    def forget(self, name: str) -> None:
        """The node is gone."""
        self.settle(name)

    def _wait(
        self, rule: str, name: str, why: str, taint: str, verdict: Verdict, now: datetime
    ) -> None:
        nodes = self._waiting.setdefault(rule, {})
        if name not in nodes:
            self._metrics.eviction_holds.labels(rule).inc()
        nodes[name] = why
        self._metrics.evictions_waiting.labels(rule).set(len(nodes))
        episode = self._episodes.setdefault(rule, _Episode(now, taint))
        episode.verdict = verdict

    def _settle(self, name: str, keep: set[str]) -> None:
        for rule in [r for r, nodes in self._waiting.items() if name in nodes and r not in keep]:
            nodes = self._waiting[rule]
            del nodes[name]
            self._metrics.evictions_waiting.labels(rule).set(len(nodes))
            if not nodes:
                del self._waiting[rule]
                episode = self._episodes.pop(rule, None)
                log.info(
                    "eviction budget: no node waits any more",
                    extra={"rule": rule, "since": str(episode.started if episode else "")},
                )

    def _due_report(self, rule: str, now: datetime) -> datetime | None:
        """Report the episode once it is REPORT_AFTER old; else when to come back for it."""
        episode = self._episodes[rule]
        if episode.reported:
            return None
        due = episode.started + REPORT_AFTER
        if now < due:
            return due
        episode.reported = True
        self._report(rule, episode)
        return None

    def _report(self, rule: str, episode: _Episode) -> None:
        waiting = sorted(self._waiting.get(rule, {}))
        verdict = episode.verdict
        share = (
            f"{verdict.spent} of {verdict.scope_nodes} nodes of {verdict.scope} "
            f"({verdict.spent / max(verdict.scope_nodes, 1):.0%}; limit {verdict.limit})"
            if verdict is not None
            else "the budget"
        )
        names = ", ".join(waiting[:EXAMPLES]) + (
            f" and {len(waiting) - EXAMPLES} more" if len(waiting) > EXAMPLES else ""
        )
        message = (
            f"eviction budget spent for rule {rule}: {share} got {episode.taint} within the "
            f"window; {len(waiting)} node(s) wait for it: {names}. They get it as the window "
            f"allows, and none whose condition recovers first; {RELEASE_HOW}."
        )
        log.warning(
            "eviction budget spent; nodes wait",
            extra={"rule": rule, "waiting": len(waiting), "share": share},
        )
        report_on_source(self._recorder, self._source(), "EvictionBudgetSpent", message)
