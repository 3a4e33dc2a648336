"""The eviction budget: how many nodes may get an evicting taint per window. Pure.

A `NoExecute` taint evicts every pod that does not tolerate it; a condition storm (a health
check with a bug, rolled out everywhere) or a rules edit could put one on every node at once.
So additions of evicting taints are counted per rule's budget (the shared top-level one, or a
rule's own) in a sliding window, cluster-wide and per pool and zone; an addition over a limit
waits (the planner keeps the node as it is), and is looked at again when the oldest counted
addition leaves the window. Removals are never counted nor held: recovery is always allowed.

The breaker (`reconciler/nodes/decide/eviction_breaker.py`) and `nodegate explain`, both asked by
`node_decision.decide`, and the blast-radius guard use these (docs/rules.md, "Eviction budget").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodegate.core.decisions.node_trust import registered_pool
from nodegate.core.decisions.plan import NodePlan
from nodegate.core.rules.model import ZONE_LABEL, EvictionLimit, NodeRules, RuleEvictionBudget
from nodegate.core.rules.node import NodeState, parse_time
from nodegate.core.rules.rule_kinds import TaintRule

TIME_ADDED_RESOLUTION = timedelta(seconds=1)
WAITING = "waiting for the eviction budget"
"""How a waiting rule's decision starts its `why` (read back by `waiting_rules`)."""
SHARED = ""
"""The ledger of every rule without a budget of its own (the top-level `evictionBudget`)."""


@dataclass(frozen=True)
class Place:
    """The scopes a node counts in besides the cluster (None: not labelled)."""

    pool: str | None = None
    zone: str | None = None


def place_of(node: NodeState) -> Place:
    """The node's pool as it registered (the label it may change is no evidence: a node must
    not spend another pool's budget) and its zone."""
    return Place(registered_pool(node.labels, node.taints), node.labels.get(ZONE_LABEL) or None)


@dataclass(frozen=True)
class Census:
    """How many nodes each scope has: the denominators of the shares."""

    nodes: int = 0
    pools: Mapping[str, int] = field(default_factory=dict)
    zones: Mapping[str, int] = field(default_factory=dict)


def census(nodes: Iterable[NodeState]) -> Census:
    places = [place_of(node) for node in nodes]
    pools = Counter(p.pool for p in places if p.pool is not None)
    zones = Counter(p.zone for p in places if p.zone is not None)
    return Census(len(places), pools, zones)


@dataclass(frozen=True)
class Grant:
    """One node that got (or was allowed) an evicting taint of a ledger's rules at `at`."""

    ledger: str
    node: str
    place: Place
    at: datetime


@dataclass(frozen=True)
class Charge:
    """One evicting taint a plan adds, and the budget it is counted against."""

    rule: str
    taint: str
    ledger: str | None
    """The rule's name (its own budget), SHARED, or None when the rule is unlimited."""


def limit(rule_limit: EvictionLimit, scope_nodes: int) -> int:
    """Nodes a scope of `scope_nodes` may have tainted per window: at least one."""
    bounds = []
    if rule_limit.max_share is not None:
        # A hair under the share's exact product still counts (0.2 * 20 is 4.000000000000001).
        bounds.append(math.floor(rule_limit.max_share * scope_nodes + 1e-9))
    if rule_limit.max_nodes is not None:
        bounds.append(rule_limit.max_nodes)
    return max(1, min(bounds))


def charged_rules(rules: NodeRules) -> tuple[TaintRule, ...]:
    """The rules whose taints' additions count against a budget (`TaintRule.charged`)."""
    return tuple(r for r in rules.taint_rules() if r.charged)


def ledger_of(rules: NodeRules, rule: str) -> str | None:
    """Which budget a rule's additions count against (None: the rule is unlimited)."""
    for each in charged_rules(rules):
        if each.name == rule and each.eviction_budget is not None:
            return None if each.eviction_budget.unlimited else rule
    return None if rules.eviction_budget.unlimited else SHARED


def budget_of(rules: NodeRules, ledger: str) -> RuleEvictionBudget:
    for each in charged_rules(rules):
        if each.name == ledger and each.eviction_budget is not None:
            return each.eviction_budget
    return rules.eviction_budget


def charges(node: NodeState, node_plan: NodePlan, rules: NodeRules) -> tuple[Charge, ...]:
    """The evicting taints the plan puts on the node anew (a value change is not new: the
    taint's key and effect were there already). Startup gates are not charged: a gate goes on
    a node being born, rebooted or idle, where it evicts nothing a workload would miss."""
    effects = {"NoExecute", "NoSchedule"} if rules.eviction_budget.no_schedule else {"NoExecute"}
    uncharged = {r.name for r in rules.taint_rules() if not r.charged}
    found = []
    for change in node_plan.add_taints:
        taint = change.taint
        if taint.effect not in effects or node.taint(taint.identity) is not None:
            continue
        owners = [r for r in change.rules if r not in uncharged]
        if not owners:
            continue
        ledgers = [ledger_of(rules, r) for r in owners]
        # Any rule that must act on every node lets it through; else the first rule's budget.
        ledger = None if None in ledgers else ledgers[0]
        found.append(Charge(owners[0], str(taint), ledger))
    return tuple(found)


AHEAD_TOLERATED = timedelta(minutes=1)
"""How far ahead of now a `timeAdded` may be and still count as made now (another writer's
clock a little ahead); further ahead it is not believed."""


def grants_on_nodes(nodes: Iterable[NodeState], rules: NodeRules, now: datetime) -> list[Grant]:
    """What the nodes themselves say was spent: a NoExecute taint of a budgeted rule whose
    `timeAdded` is within its budget's window. This survives a restart or a new leader."""
    by_taint: dict[tuple[str, str], str] = {}
    for rule in charged_rules(rules):
        ledger = ledger_of(rules, rule.name)
        if ledger is not None and rule.taint.effect == "NoExecute":
            by_taint.setdefault(rule.taint.identity, ledger)
    found = []
    for node in nodes:
        for taint in node.taints:
            ledger = by_taint.get(taint.identity)
            added = parse_time(taint.time_added) if taint.time_added else None
            if ledger is None or added is None:
                continue
            if added > now + AHEAD_TOLERATED:
                # Dated far ahead: a writer's clock, or a kubelet that registered with the
                # taint and any timeAdded it liked. It counts from the Node's creation (the API
                # server's time), so it holds a slot one window at most, not for as long as it
                # stays.
                if node.created is None:
                    continue
                added = node.created
            # timeAdded is in whole seconds: the taint went on within the second after it.
            at = min(added + TIME_ADDED_RESOLUTION, now)
            if now - budget_of(rules, ledger).window < at:
                found.append(Grant(ledger, node.name, place_of(node), at))
    return found


@dataclass(frozen=True)
class Verdict:
    """Whether one node may get one ledger's evicting taint now, and if not, why and until when."""

    allowed: bool
    why: str = ""
    retry_at: datetime | None = None
    spent: int = 0
    limit: int = 0
    scope: str = "cluster"
    scope_nodes: int = 0


def check(
    budget: RuleEvictionBudget,
    ledger: str,
    grants: Iterable[Grant],
    node: str,
    where: Place,
    nodes: Census,
    now: datetime,
) -> Verdict:
    """May `node` (at `where`) get an evicting taint of `ledger` now, given what was granted?

    A node already counted in the window is not counted twice (a retried write, two rules),
    and counts from its latest grant (so its slot frees no earlier than the last one said).
    """
    recent: dict[str, Grant] = {}
    for grant in grants:
        fresh = grant.ledger == ledger and now - budget.window < grant.at <= now
        if fresh and (grant.node not in recent or grant.at > recent[grant.node].at):
            recent[grant.node] = grant
    if node in recent:
        return Verdict(True)
    scopes: list[tuple[str, EvictionLimit, int, Sequence[Grant]]] = [
        ("the cluster", budget.cluster, nodes.nodes, list(recent.values()))
    ]
    pool, zone = where.pool, where.zone
    if budget.per_pool is not None and pool is not None:
        in_pool = [g for g in recent.values() if g.place.pool == pool]
        scopes.append((f"pool {pool}", budget.per_pool, nodes.pools.get(pool, 0), in_pool))
    if budget.per_zone is not None and zone is not None:
        in_zone = [g for g in recent.values() if g.place.zone == zone]
        scopes.append((f"zone {zone}", budget.per_zone, nodes.zones.get(zone, 0), in_zone))
    blocked: Verdict | None = None
    for scope, scope_limit, scope_nodes, counted in scopes:
        allowed = limit(scope_limit, max(scope_nodes, 1))
        if len(counted) < allowed:
            continue
        # A slot frees when the oldest of the last `allowed` grants leaves the window.
        frees = sorted(g.at for g in counted)[len(counted) - allowed] + budget.window
        if blocked is None or blocked.retry_at is None or frees > blocked.retry_at:
            blocked = Verdict(
                False,
                f"{len(counted)} of {scope_nodes} nodes of {scope} got it in the last "
                f"{_duration(budget.window)} (limit {allowed})",
                frees,
                len(counted),
                allowed,
                scope,
                scope_nodes,
            )
    return blocked or Verdict(True)


def _duration(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


@dataclass(frozen=True)
class Admission:
    """A node's charges, decided: the rules whose taint waits (and why), and when to look again."""

    granted: tuple[Grant, ...] = ()
    waiting: Mapping[str, str] = field(default_factory=dict)
    """rule -> why its taint waits for the budget (the planner keeps the node as it is)."""
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)
    retry_at: datetime | None = None


def admit(
    rules: NodeRules,
    node: NodeState,
    wanted: Iterable[Charge],
    grants: Sequence[Grant],
    nodes: Census,
    now: datetime,
) -> Admission:
    """Decide every charge of one node; the grants it returns must be recorded by the caller
    (under the same lock as the `grants` it read, so concurrent callers never overspend)."""
    where = place_of(node)
    granted: list[Grant] = []
    waiting: dict[str, str] = {}
    verdicts: dict[str, Verdict] = {}
    retry: list[datetime] = []
    for charge in wanted:
        if charge.ledger is None:
            continue
        verdict = check(
            budget_of(rules, charge.ledger),
            charge.ledger,
            [*grants, *granted],
            node.name,
            where,
            nodes,
            now,
        )
        if verdict.allowed:
            granted.append(Grant(charge.ledger, node.name, where, now))
            continue
        waiting[charge.rule] = f"{WAITING}: {verdict.why}"
        verdicts[charge.rule] = verdict
        if verdict.retry_at is not None:
            retry.append(verdict.retry_at)
    return Admission(tuple(granted), waiting, verdicts, min(retry) if retry else None)


def waiting_rules(node_plan: NodePlan) -> frozenset[str]:
    """Rules whose evicting taint waits for the budget in this plan (for explain and logs)."""
    return frozenset(d.rule for d in node_plan.decisions if d.why.startswith(WAITING))
