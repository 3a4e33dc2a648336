"""The eviction breaker: one lock around the eviction budget, the nodes kept waiting, and the
one Warning that says so.

The decision is `nodegate.core.decisions.eviction_budget`; this keeps what was granted (in memory
and in the eviction ledger, `core.objects.eviction_ledger`, written before a grant is used, so a
restart or a new leader counts what was spent; and as the nodes' own `timeAdded` says), counted in
the API server's time (`kit.server_clock`), which nodes wait for which rule, the metric, and one
Event per hold episode. Concurrent workers admit under one lock, read and record together, so
together they never overspend the budget.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from nodegate.core.decisions.eviction_budget import (
    WAITING,
    Charge,
    Grant,
    Verdict,
    admit,
    budget_of,
    census,
)
from nodegate.core.objects.eviction_ledger import compact, merged, spent
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.server_clock import AnchoredClock
from nodegate.reconciler.nodes.metrics import BreakerMetrics

log = logging.getLogger("nodegate.controller")

REPORT_AFTER = timedelta(seconds=1)
"""A hold is reported this long after it starts, so its one Event names the nodes of the storm,
not only the first one that had to wait."""
EXAMPLES = 10
LEDGER_RETRY_SECONDS = 5.0
"""How soon evicting taints held for an unreadable or unwritable ledger are looked at again."""
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
    verdict: Verdict
    reported: bool = False


class LedgerStore(Protocol):
    """Where the grants are kept between processes (`eviction_ledger_store.LedgerStore`)."""

    def load(self) -> list[Grant]: ...

    def save(
        self, grants: list[Grant], now: datetime, window: Callable[[str], timedelta]
    ) -> None: ...


class EvictionBreaker:
    def __init__(
        self,
        warn: Callable[[str, str], None],
        metrics: BreakerMetrics,
        nodes: Callable[[], Iterable[NodeState]],
        clock: AnchoredClock,
        store: LedgerStore,
    ) -> None:
        self._warn = warn
        self._metrics = metrics
        self._nodes = nodes
        self._clock = clock
        self._store = store
        self._lock = threading.Lock()
        self._grants: list[Grant] = []
        self._loaded = False
        self._next_load = 0.0
        """When (monotonic) a failed read of the ledger may be tried again."""
        self._next_save = 0.0
        """When (monotonic) a grant may be tried again after a failed write of the ledger."""
        self._waiting: dict[str, dict[str, str]] = {}
        """rule -> node -> why."""
        self._episodes: dict[str, _Episode] = {}
        self._ledger_block_said = False
        """Whether the Warning of the ledger being out was said (once per outage)."""

    def load(self) -> bool:
        """Read the API server's time and the stored grants (the leader, before it plans);
        False when they cannot be read yet: until they are, every evicting taint waits."""
        with self._lock:
            return self._load()

    def _load(self) -> bool:
        if self._loaded:
            return True
        try:
            self._clock.anchor()
            stored = self._store.load()
        except KubeError as err:
            log.warning("eviction ledger not read yet", extra={"error": str(err)})
            self._next_load = time.monotonic() + LEDGER_RETRY_SECONDS
            return False
        self._grants = merged(self._grants, stored)
        self._loaded = True
        self._ledger_block_said = False
        return True

    def admit(self, node: NodeState, wanted: Sequence[Charge], rules: NodeRules) -> Hold:
        """Grant what the budget allows of the evicting taints a plan adds (`wanted`, its
        `charges`); the rest wait. A grant is written to the ledger before it is returned: no
        evicting taint without its record."""
        with self._lock:
            budgeted = [c for c in wanted if c.ledger is not None]
            if budgeted and not (
                self._loaded or (time.monotonic() >= self._next_load and self._load())
            ):
                return self._unrecorded(budgeted, "the eviction ledger is not read yet")
            if budgeted and time.monotonic() < self._next_save:
                return self._unrecorded(budgeted, "the eviction ledger cannot be written")
            now = self._clock.now_or_host()
            cached = list(self._nodes())

            def window(ledger: str) -> timedelta:
                return budget_of(rules, ledger).window

            self._grants = compact(self._grants, window, now)
            decided = admit(
                rules, node, wanted, spent(cached, rules, self._grants, now), census(cached), now
            )
            # Reserved before the lock is let go: another worker counts them while the ledger
            # is written, so a slow API server slows this node's admission, not every node's.
            self._grants.extend(decided.granted)
            to_store = compact(list(self._grants), window, now) if decided.granted else None
        if to_store is not None:
            try:
                self._store.save(to_store, now, window)
            except KubeError as err:
                log.warning("eviction ledger not written", extra={"error": str(err)})
                with self._lock:
                    self._grants = [g for g in self._grants if g not in decided.granted]
                    self._next_save = time.monotonic() + LEDGER_RETRY_SECONDS
                # Every budgeted charge waits, the ones the budget held too: the node is
                # planned again as it is, so nothing the budget forbids goes out with it.
                return self._unrecorded(
                    budgeted, f"the eviction ledger could not be written ({err})"
                )
        with self._lock:
            if to_store is not None:
                self._ledger_block_said = False
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

    def _unrecorded(self, charged: list[Charge], why: str) -> Hold:
        """The charges wait, unrecorded and ungranted, and are looked at again shortly: the
        budget may be spent by a grant the ledger holds, so nothing is let through blind."""
        waiting = {c.rule: f"{WAITING}: {why}" for c in charged}
        self._metrics.errors.labels("ledger").inc()
        if not self._ledger_block_said:
            self._ledger_block_said = True
            message = (
                f"evicting taints wait: {why}. nodegate never grants an evicting taint it "
                "cannot record (a restart would forget it was spent); it tries again every "
                f"{LEDGER_RETRY_SECONDS:.0f} s. Check the reconciler's access to its ConfigMap "
                "nodegate-eviction-ledger; an unreadable one must be repaired or deleted."
            )
            self._warn("EvictionLedgerUnavailable", message)
        return Hold(waiting, LEDGER_RETRY_SECONDS)

    def settle(self, name: str) -> None:
        """The node needs no evicting taint now (its condition recovered, or it got it)."""
        with self._lock:
            self._settle(name, keep=set())

    def forget(self, name: str, uid: str | None = None) -> None:
        """The node is gone (`NodeMemory`)."""
        self.settle(name)

    def _wait(
        self, rule: str, name: str, why: str, taint: str, verdict: Verdict, now: datetime
    ) -> None:
        nodes = self._waiting.setdefault(rule, {})
        if name not in nodes:
            self._metrics.eviction_holds.labels(rule).inc()
        nodes[name] = why
        self._metrics.evictions_waiting.labels(rule).set(len(nodes))
        episode = self._episodes.setdefault(rule, _Episode(now, taint, verdict))
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
        self._warn("EvictionBudgetSpent", message)
