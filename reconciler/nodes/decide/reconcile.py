"""One node: read it from the cache, decide it with the pure core (`node_decision.decide`, the
breaker its eviction budget), write the difference once, and say how it went as an outcome
(`kit.worker`), which the worker alone turns into queue actions.

On a 409 the node is read again and planned again, up to `max_conflict_retries` times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from nodegate.core.decisions.eviction_budget import Charge
from nodegate.core.decisions.fencing import UNFENCED
from nodegate.core.decisions.node_decision import decide
from nodegate.core.decisions.plan import NodePlan
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import (
    INVALID_WRITE_STATUSES,
    ConflictError,
    KubeError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    annotations_too_long,
)
from nodegate.reconciler.kit.kube import NodeApi, RawObject
from nodegate.reconciler.kit.worker import Done, Outcome, Refused, RequeueAfter, Retry, retry
from nodegate.reconciler.nodes.decide.eviction_breaker import EvictionBreaker, Hold
from nodegate.reconciler.nodes.decide.node_facts import NodeFacts
from nodegate.reconciler.nodes.decide.node_writer import NodeWriter
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.records.label_records import LabelRecords, LabelWork
from nodegate.reconciler.nodes.reports.gate_reports import GateReports

log = logging.getLogger("nodegate.controller")

RECHECK_SLACK_SECONDS = 0.05
"""A re-check comes this much after the moment it waits for, so that moment has passed."""
RECORDS_SYNC_WAIT_SECONDS = 1.0
"""How soon a node is looked at again while the label records are not cached yet."""


@dataclass(frozen=True)
class NodeSource:
    """What one node's reconcile reads: the rules in force, the node as cached and, after a
    conflict or when the cached entry is `stale`, the node as the API server has it now,
    slimmed as the cache slims it."""

    rules: Callable[[], NodeRules | None]
    cached: Callable[[str], CachedNode | None]
    api: NodeApi
    slim: Callable[[RawObject], CachedNode]
    stale: Callable[[CachedNode], bool] = lambda _: False
    """Slimmed before the rules in force read more annotations (the relist that replaces it
    may not have reached it): planning it would miss them, e.g. a completion annotation, and
    backfill a gate the node completed."""


class NodeReconciler:
    """`reconcile(key)` for the node controller; handed only what one node's work needs."""

    def __init__(
        self,
        reads: NodeSource,
        facts: NodeFacts,
        labels: LabelRecords,
        gates: GateReports,
        writer: NodeWriter,
        breaker: EvictionBreaker,
        max_conflict_retries: int,
    ) -> None:
        self._reads = reads
        self._facts = facts
        self._labels = labels
        self._gates = gates
        self._writer = writer
        self._breaker = breaker
        self._max_conflict_retries = max_conflict_retries

    def reconcile(self, key: str) -> Outcome:
        """Read, plan, write once; on 409 read again and re-plan. Zero writes if nothing differs."""
        rules = self._reads.rules()
        if rules is None:
            return Done()
        node = self._reads.cached(key)
        if node is None:
            self._labels.node_gone(key, rules.persistent_labels)
            return Done()
        if self._reads.stale(node):
            fresh = self._read_again(key)
            if not isinstance(fresh, CachedNode):
                return fresh
            node = fresh
        if rules.persistent_labels is not None and not self._labels.synced():
            return RequeueAfter(RECORDS_SYNC_WAIT_SECONDS)
        for attempt in range(1, self._max_conflict_retries + 1):
            outcome = self._attempt(key, node, rules)
            if not isinstance(outcome, CachedNode):
                return outcome
            log.info("write conflict; re-reading", extra={"node": key, "attempt": attempt})
            node = outcome
        return Retry(
            ConflictError(f"still conflicting after {self._max_conflict_retries} re-reads"),
            "node write kept conflicting",
            kind=None,  # a race with other writers, counted in nodegate_write_conflicts_total
        )

    def _attempt(self, key: str, node: CachedNode, rules: NodeRules) -> Outcome | CachedNode:
        """One plan and write; the node read again after a conflict (to plan again)."""
        work = (
            self._labels.decide(node, rules.persistent_labels)
            if rules.persistent_labels is not None
            else None
        )
        holds: list[Hold] = []

        def breaker(state: NodeState, wanted: tuple[Charge, ...]) -> Mapping[str, str]:
            if self._writer.leading():  # a follower writes nothing, so is granted nothing
                holds.append(self._breaker.admit(state, wanted, rules))
            return holds[0].waiting if holds else {}

        facts = self._facts.for_plan(key, node, rules, work)
        node_plan = decide(node.state, rules, facts, breaker)
        hold = holds[0] if holds else None
        if self._writer.leading():
            self._writer.say_would(node, node_plan.dry_run)
        self._gates.report_timeouts(node, node_plan)
        for warning in node_plan.warnings:
            log.warning(warning, extra={"node": key})
        if hold is None:
            self._breaker.settle(key)  # no evicting taint to add, or none granted here
        elif hold.waiting:
            self._writer.say_waiting(node, hold.waiting)
        if node_plan.is_empty:
            return self._finish(node, node_plan, work, hold)
        if not self._writer.leading():
            log.warning("not writing: leadership not proven", extra={"node": key})
            return Done()
        try:
            self._writer.write(node, node_plan)
        except ConflictError:
            return self._read_again(key)
        except NotFoundError:
            return Done()
        except TemporaryError as err:
            return retry(err, "node write failed")
        except PermanentError as err:
            self._labels.refused(work)
            return self._taints_alone(node, node_plan, err)
        self._gates.count_written(node, node_plan)
        return self._finish(node, node_plan, work, hold)

    def _taints_alone(self, node: CachedNode, node_plan: NodePlan, err: PermanentError) -> Outcome:
        """A write refused as invalid is tried once more with its taint changes alone
        (`taints_only`), so nothing on the node can keep its taints from being added or its gate
        from lifting. A refusal of permission (403) would refuse that too: not tried."""
        refused = Refused(err, "node write refused", recheck_after(node_plan))
        taints = node_plan.taints_only() if err.status in INVALID_WRITE_STATUSES else None
        if taints is None:
            return refused
        if annotations_too_long(err):
            # Not even the fence's token may grow the node's full annotations
            # (core/decisions/fencing.py).
            taints = replace(taints, set_annotations=UNFENCED)
        try:
            self._writer.write(node, taints)
        except KubeError:
            return refused
        self._gates.count_written(node, taints)
        self._writer.say_written_alone(node, err)
        return Refused(
            err, "node write refused; its taints were written alone", refused.recheck_after
        )

    def _read_again(self, key: str) -> Outcome | CachedNode:
        try:
            fresh = self._reads.api.get_node(key)
        except KubeError as err:
            return retry(err, "re-reading the node failed")
        return Done() if fresh is None else self._reads.slim(fresh)

    def _finish(
        self, node: CachedNode, node_plan: NodePlan, work: LabelWork | None, hold: Hold | None
    ) -> Outcome:
        """The node is as planned: bring its label record up to date, then wait for the next
        moment the plan depends on (a gate's timeout, room in the eviction budget), if any."""
        if work is not None and (failed := self._labels.after_write(node, work)) is not None:
            return failed
        moments = [recheck_after(node_plan)]
        if hold is not None and hold.retry_after is not None:
            moments.append(hold.retry_after + RECHECK_SLACK_SECONDS)
        recheck = min((m for m in moments if m is not None), default=None)
        return Done() if recheck is None else RequeueAfter(recheck)


def recheck_after(node_plan: NodePlan) -> float | None:
    """Seconds until the next moment the plan waits for (a `for`, a gate's timeout), if any."""
    if node_plan.recheck_after is None:
        return None
    return node_plan.recheck_after.total_seconds() + RECHECK_SLACK_SECONDS
