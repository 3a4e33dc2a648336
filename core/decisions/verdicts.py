"""The planner's vocabulary: the facts it is given beyond the Node, and one rule's verdict.

Shared by each kind's decision (`rule_outcomes.py`, `gate_plan.py`, `agent_plan.py`) and the plan
(`plan.py`), so none has to import another's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from nodegate.core.decisions.node_agents import AgentReadiness
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.sightings import ConditionKey, Sighting
from nodegate.core.rules.model import Taint

Verdict = Literal["want", "keep", "release"]
"""want: the taint must be there; keep: leave it as it is; release: it must go (if present)."""


@dataclass(frozen=True)
class PlanFacts:
    """What the planner needs beyond the Node object itself."""

    now: datetime
    restored_labels: Mapping[str, str] = field(default_factory=dict)
    """Persisted labels to put back on a re-created node (absent keys only)."""
    previously_owned: frozenset[tuple[str, str]] = frozenset()
    """(key, effect) of taints that rules of earlier accepted generations owned, as recorded
    where nodes cannot write. Only these (and the current rules' taints) may be cleaned up."""
    condition_sightings: Mapping[ConditionKey, Sighting] = field(default_factory=dict)
    """When the reconciler first saw each episode of the node's conditions (`sightings`): the
    one "since when" of `for` and of a re-gate's conditions. Empty: none seen (since now)."""
    gate_pod_signals: Mapping[str, tuple[Sighting, ...]] = field(default_factory=dict)
    """Gate name -> the ready signals of its init pods on this node (a Ready episode as first
    seen, or the pod's ready annotation as of the pod's creation), for gates that have any."""
    csi_drivers: Mapping[str, bool] = field(default_factory=dict)
    """Driver -> whether it reports allocatable, as this Node's own CSINode lists them
    (`csi_nodes.registered_drivers`); empty: none registered, or not looked up."""
    agents: Mapping[str, AgentReadiness] = field(default_factory=dict)
    """Node-agent rule -> its agents on this node (`node_agents.agent_readiness`); absent: not
    looked up (its taint is left as it is)."""
    boot_first_seen: datetime | None = None
    """When the reconciler first saw the node's current bootID (None: not tracked): a re-gate's
    life begins then, however late the re-gate is written."""
    previous_boot_seen: datetime | None = None
    """When it last saw the node's bootID before the current one (None: it saw no other)."""
    workload_pods: int | None = None
    """Pods on the node other than DaemonSet and static pods; None: not looked up (no backfill)."""
    budget_waiting: Mapping[str, str] = field(default_factory=dict)
    """Rule -> why its evicting taint waits for the eviction budget on this node
    (`eviction_budget.admit`): the rule's "want" becomes "keep", so the node stays as it is."""
    departed: Departure | None = None
    """What nodegate kept of the Node object of this name before this one, seen go
    (`re_registration`): whether pods Ready before this Node was created count for it."""


@dataclass(frozen=True)
class RuleDecision:
    """One rule's verdict on one node, with the reason in words (for events and explain)."""

    rule: str
    taint: Taint
    verdict: Verdict
    why: str


@dataclass(frozen=True)
class RuleOutcome:
    """One rule's verdict on one node, and what comes with it. Only a startup gate fills in
    more than `decision` and `recheck` today; the plan reads every field of every kind."""

    decision: RuleDecision
    recheck: timedelta | None = None
    warning: str | None = None
    annotations: tuple[tuple[str, str | None], ...] = ()
    lift: bool = False
    put_back: bool = False
    recorded: bool = False
    """Its `annotations` are written whatever the taints do (a skipped backfill's record)."""
    timed_out: bool = False
    carried: frozenset[tuple[str, str]] = frozenset()
    """(key, effect) of the gate's taints on the node: its own and any former key."""
    former: tuple[RuleDecision, ...] = ()
    """The same verdict for each former key the node carries (keep, or release on lift)."""
