"""One node's decision, made one way for everyone who makes or tells it: the reconcile
(`reconciler/nodes/decide/reconcile.py`), `nodegate explain`, `status` and `plan`, so what the
CLI says is what the reconciler does. Pure.

The planner's facts are built by `plan_facts` alone. `decide` is the one sequence: plan, the
evicting taints the plan adds (`charges`), the eviction budget's answer, and the plan again with
the taints that wait kept out. The budget is the caller's: the reconciler's breaker (which
grants, and records a grant before it is used), the CLI's from the grants recorded
(`core.reports.node_waits.recorded_budget`), or none (every charge granted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

from nodegate.core.decisions.boot_sight import BootSight
from nodegate.core.decisions.eviction_budget import Charge, charges
from nodegate.core.decisions.node_agents import AgentReadiness
from nodegate.core.decisions.plan import NodePlan, plan
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.sightings import ConditionKey, Sighting
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState

Budget = Callable[[NodeState, tuple[Charge, ...]], Mapping[str, str]]
"""The eviction budget asked about one node's charges (never none): rule -> why its evicting
taint waits; the charges it leaves out are granted."""


def plan_facts(
    now: datetime,
    previously_owned: frozenset[tuple[str, str]] = frozenset(),
    sightings: Mapping[ConditionKey, Sighting] | None = None,
    boot: BootSight | None = None,
    agents: Mapping[str, AgentReadiness] | None = None,
    *,
    gate_pod_signals: Mapping[str, tuple[Sighting, ...]] | None = None,
    csi_drivers: Mapping[str, bool] | None = None,
    workload_pods: int | None = None,
    restored_labels: Mapping[str, str] | None = None,
    departed: Departure | None = None,
) -> PlanFacts:
    """A node's facts from what its reader gathered (None: not read). The budget's waits are
    not facts anyone gathers: `decide` adds them."""
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
        workload_pods=workload_pods,
        departed=departed,
    )


def decide(
    node: NodeState, rules: NodeRules, facts: PlanFacts, budget: Budget | None = None
) -> NodePlan:
    """What nodegate writes on `node` now: its plan, with each evicting taint the plan adds
    asked of `budget` and those that must wait kept out (the rest of the plan goes on)."""
    first = plan(node, rules, facts)
    wanted = charges(node, first, rules) if budget is not None else ()
    if budget is None or not wanted or not (waiting := budget(node, wanted)):
        return first
    return plan(node, rules, replace(facts, budget_waiting=waiting))
