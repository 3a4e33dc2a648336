"""One node's decision, made one way by the reconcile and by `nodegate explain`, `status` and
`plan`, so what the CLI says is what the reconciler does. Pure.

`plan_facts` alone builds the planner's facts; `decide` is the one sequence: plan, the evicting
taints it adds (`charges`) asked of the eviction budget, plan again with those that wait kept
out. The budget is the caller's: the reconciler's breaker, the grants recorded
(`core.reports.node_waits.recorded_budget`), or none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

from nodegate.core.decisions.eviction_budget import Charge, charges
from nodegate.core.decisions.node_agents import AgentReadiness
from nodegate.core.decisions.plan import NodePlan, plan
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.sightings import BootSight, ConditionKey, Sighting
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState

Budget = Callable[[NodeState, tuple[Charge, ...]], Mapping[str, str]]
"""The eviction budget asked of a node's charges (never none): rule -> why its taint waits."""


def plan_facts(
    now: datetime,
    previously_owned: frozenset[tuple[str, str]] = frozenset(),
    sightings: Mapping[ConditionKey, Sighting] | None = None,
    boot: BootSight | None = None,
    agents: Mapping[str, AgentReadiness] | None = None,
    *,
    gate_pod_signals: Mapping[str, tuple[Sighting, ...]] | None = None,
    csi_drivers: Mapping[str, bool] | None = None,
    restored_labels: Mapping[str, str] | None = None,
    departed: Departure | None = None,
) -> PlanFacts:
    """A node's facts from what its reader gathered (None: not read); its sources add theirs
    (`core.decisions.sources.Source.facts`), `decide` the budget's."""
    return PlanFacts(
        now=now,
        restored_labels=restored_labels or {},
        previously_owned=previously_owned,
        condition_sightings=sightings or {},
        gate_pod_signals=gate_pod_signals or {},
        csi_drivers=csi_drivers or {},
        agents=agents or {},
        boot_first_seen=boot.first_seen if boot is not None else None,
        previous_boot_seen=boot.previous_last_seen if boot is not None else None,
        departed=departed,
    )


def decide(
    node: NodeState, rules: NodeRules, facts: PlanFacts, budget: Budget | None = None
) -> NodePlan:
    """What nodegate writes on `node` now: its plan, less the evicting taints `budget` holds."""
    first = plan(node, rules, facts)
    wanted = charges(node, first, rules) if budget is not None else ()
    if budget is None or not wanted or not (waiting := budget(node, wanted)):
        return first
    return plan(node, rules, replace(facts, budget_waiting=waiting))
