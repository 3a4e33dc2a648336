"""The reconciler at a glance, from what the cluster shows: `nodegate status`. Pure.

The shell (`cli/live`) reads the Lease, the status record (`status_record`), the rules
ConfigMap, the nodes, the label records and the Warning Events; this turns them into one report
with the same functions the reconciler decides with: the gate census (`gate_census`), the
eviction budget (`eviction_budget`), and the one decision (`node_decision.decide`) for the nodes
that want an evicting taint they do not have yet (which the budget keeps waiting, or the
reconciler is about to write).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic.alias_generators import to_camel

from nodegate.core.decisions.eviction_budget import (
    SHARED,
    Charge,
    Grant,
    budget_of,
    charged_rules,
    ledger_of,
    limit,
)
from nodegate.core.decisions.node_decision import decide, plan_facts
from nodegate.core.objects.eviction_ledger import spent as spent_now
from nodegate.core.objects.status_record import HeldUpdate, ReconcilerStatus
from nodegate.core.reports.gate_census import GatedGroup, gate_census
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, format_time

_NEVER = datetime.min.replace(tzinfo=UTC)
SHARED_BUDGET = "(shared)"
"""How the top-level evictionBudget's ledger is named in the report."""


@dataclass(frozen=True)
class LeaseView:
    """The leader Lease as status shows it."""

    holder: str
    renewed: datetime | None
    duration_seconds: int


@dataclass(frozen=True)
class RulesSourceView:
    """The rules ConfigMap as read now."""

    reference: str
    digest: str | None
    """Digest of its rules text (None: the ConfigMap or its key is missing)."""
    problems: tuple[str, ...] = ()
    """Why its text is not valid rules (the reconciler refuses it and keeps the rules in force)."""


@dataclass(frozen=True)
class RecordsView:
    records: int = 0
    gone: int = 0
    """Records whose node is deleted (kept until forgetAfter)."""
    unreadable: tuple[str, ...] = ()
    """Records the reconciler will quarantine."""
    quarantined: tuple[tuple[str, str], ...] = ()
    """(ConfigMap name, reason) of the quarantined copies."""


@dataclass(frozen=True)
class EventView:
    reason: str
    involved: str
    """kind/name of the object the Event is about."""
    message: str
    count: int
    last_seen: datetime | None


@dataclass(frozen=True)
class LeaderRow:
    holder: str
    renewed_seconds_ago: float | None
    version: str
    """The version the status record's writer runs, if it is the Lease holder ('' otherwise)."""
    expired: bool


@dataclass(frozen=True)
class RulesRow:
    generation: int
    digest: str | None
    source: str
    applied_at: datetime | None
    configmap: str
    configmap_digest: str | None
    configmap_problems: tuple[str, ...]
    in_sync: bool
    """The ConfigMap's text is the rules in force."""


@dataclass(frozen=True)
class TaintRow:
    rule: str
    taint: str
    nodes: int


@dataclass(frozen=True)
class BudgetRow:
    budget: str
    window_seconds: float
    spent: int
    """Nodes that got an evicting taint of this budget within the window (their timeAdded)."""
    limit: int
    """Cluster-wide limit for the current node count."""
    waiting: int
    """Nodes that want an evicting taint of this budget and do not have it yet."""


@dataclass(frozen=True)
class StatusReport:
    at: datetime
    nodes: int
    leader: LeaderRow | None
    rules: RulesRow | None
    held: HeldUpdate | None
    gates: tuple[GatedGroup, ...]
    taints: tuple[TaintRow, ...]
    budgets: tuple[BudgetRow, ...]
    records: RecordsView
    events: tuple[EventView, ...]
    notes: tuple[str, ...] = field(default=())
    """What could not be read, and what that means for the report."""

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-able data (`-o json|yaml`), times as RFC 3339."""
        data: dict[str, Any] = _plain(asdict(self))
        return data


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {to_camel(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return format_time(value)
    return value


def status_report(
    now: datetime,
    nodes: Sequence[NodeState],
    rules: NodeRules | None,
    lease: LeaseView | None,
    status: ReconcilerStatus | None,
    source: RulesSourceView | None,
    records: RecordsView,
    events: Iterable[EventView],
    previously_owned: frozenset[tuple[str, str]] = frozenset(),
    notes: Sequence[str] = (),
    recorded: Sequence[Grant] = (),
) -> StatusReport:
    """`recorded`: the eviction ledger's grants (what a node that recovered spent too)."""
    said = list(notes)
    if lease is None:
        said.append("no leader Lease found: is the reconciler running with leader election?")
    if status is None:
        said.append("no status record: the reconciler has not applied any rules yet")
    return StatusReport(
        at=now,
        nodes=len(nodes),
        leader=_leader(lease, status, now),
        rules=_rules_row(status, source),
        held=status.held if status is not None else None,
        gates=gate_census(nodes, rules, now).groups if rules is not None else (),
        taints=_taint_rows(nodes, rules),
        budgets=_budget_rows(nodes, rules, now, previously_owned, recorded),
        records=records,
        events=tuple(sorted(events, key=lambda e: (e.last_seen or _NEVER, e.reason), reverse=True)),
        notes=tuple(said),
    )


def _leader(
    lease: LeaseView | None, status: ReconcilerStatus | None, now: datetime
) -> LeaderRow | None:
    if lease is None:
        return None
    ago = (now - lease.renewed).total_seconds() if lease.renewed is not None else None
    version = status.version if status is not None and status.writer == lease.holder else ""
    expired = not lease.holder or ago is None or ago > lease.duration_seconds
    return LeaderRow(lease.holder, ago, version, expired)


def _rules_row(status: ReconcilerStatus | None, source: RulesSourceView | None) -> RulesRow | None:
    if status is None and source is None:
        return None
    source = source or RulesSourceView("", None)
    digest = status.digest if status is not None else None
    return RulesRow(
        generation=status.generation if status is not None else 0,
        digest=digest,
        source=status.source if status is not None else "",
        applied_at=status.applied_at if status is not None else None,
        configmap=source.reference,
        configmap_digest=source.digest,
        configmap_problems=source.problems,
        in_sync=digest is not None and digest == source.digest,
    )


def _taint_rows(nodes: Sequence[NodeState], rules: NodeRules | None) -> tuple[TaintRow, ...]:
    if rules is None:
        return ()
    return tuple(
        TaintRow(r.name, r.taint.flag(), sum(1 for n in nodes if n.taint(r.taint.identity)))
        for r in rules.taint_rules()
    )


def _budget_rows(
    nodes: Sequence[NodeState],
    rules: NodeRules | None,
    now: datetime,
    previously_owned: frozenset[tuple[str, str]],
    recorded: Sequence[Grant],
) -> tuple[BudgetRow, ...]:
    if rules is None:
        return ()
    names = [r.name for r in charged_rules(rules)]
    ledgers = {ledger for name in names if (ledger := ledger_of(rules, name)) is not None}
    if not ledgers:
        return ()
    granted = {(grant.ledger, grant.node) for grant in spent_now(nodes, rules, recorded, now)}
    spent = Counter(ledger for ledger, _ in granted)
    waiting: Counter[str] = Counter()

    def count(_node: NodeState, wanted: tuple[Charge, ...]) -> Mapping[str, str]:
        waiting.update(charge.ledger for charge in wanted if charge.ledger is not None)
        return {}

    facts = plan_facts(now, previously_owned)
    for node in nodes:
        decide(node, rules, facts, count)
    rows = []
    for ledger in sorted(ledgers):
        budget = budget_of(rules, ledger)
        rows.append(
            BudgetRow(
                SHARED_BUDGET if ledger == SHARED else ledger,
                budget.window.total_seconds(),
                spent[ledger],
                limit(budget.cluster, max(len(nodes), 1)),
                waiting[ledger],
            )
        )
    return tuple(rows)


def age(seconds: float | None) -> str:
    """A short human age: 45s, 12m05s, 3h02m, 2d04h."""
    if seconds is None:
        return "-"
    whole = int(max(seconds, 0))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"
