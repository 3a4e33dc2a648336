"""The seam every taint-making rule kind goes through (labelTaints, conditionTaints,
startupGates, nodeAgents, and the next one).

Consumers never list the kinds by hand: they iterate `NodeRules.taint_rules()` and ask each rule
what the protocol says (its taint, whether it is dry, what it reads from a node, whether nodes
are born with it). What a rule *decides* for a node is registered per kind on the decisions
floor (`core/decisions/rule_outcomes.py`); a unit test checks every kind has one there. Adding a
kind is then its class (implementing `TaintRule`), its field on `NodeRules`, its decision and
its docs (docs/rules.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    from nodegate.core.rules.model import (
        ConditionMatch,
        InitPods,
        LabelSelector,
        RuleEvictionBudget,
        Taint,
    )

AtRegistration = Literal["permanent", "startup", "never"]
"""How a node's bootstrap carries the kind's taint: as a taint it keeps (kubelet
`--register-with-taints`, AKS nodeTaints, Karpenter taints), as one nodegate lifts (Karpenter
startupTaints, AKS nodeInitializationTaints), or not at all (added at run time only)."""


ALL_NAMESPACES = ""
"""`NodeReads.agent_namespaces`: every namespace."""


@dataclass(frozen=True)
class RuleKind:
    """What is the same for every rule of one kind."""

    field: str
    """Its list in the rules file (`labelTaints`)."""
    plural: str
    """How reports count them (`label taints`)."""
    at_registration: AtRegistration


@dataclass(frozen=True)
class NodeReads:
    """What rules read from a Node: the reconciler keeps exactly this in its cache, and a
    change to it (and only to it) costs a reconcile. Missing something here means the rule
    never fires live while `nodegate explain --node FILE` shows it working."""

    selectors: tuple[LabelSelector, ...] = ()
    """Label selectors: every key they name is read."""
    conditions: tuple[ConditionMatch, ...] = ()
    annotations: frozenset[str] = frozenset()
    """Node annotations, nodegate's own records included."""
    pods: tuple[InitPods, ...] = ()
    """The pods on the node whose readiness counts."""
    csi_drivers: frozenset[str] = frozenset()
    """CSI drivers whose registration on the node (its CSINode) counts."""
    agent_namespaces: frozenset[str] = frozenset()
    """Namespaces whose DaemonSets (and their pods) a node-agent rule reads (`ALL_NAMESPACES`:
    every namespace, for discovery)."""
    every_label: bool = False
    """Whether any label may change the verdict (DaemonSet discovery: a DaemonSet may select
    on any label)."""
    boot_id: bool = False
    """Whether a reboot (a new bootID) changes the verdict."""
    workload_pods: bool = False
    """Whether the node's workload pods count (a gate that backfills idle nodes)."""
    label_keys: frozenset[str] = frozenset()
    """Labels read by key, besides the selectors' (pool labels, persisted labels)."""

    def __or__(self, other: NodeReads) -> NodeReads:
        """Both reads: tuples joined, sets and flags united (every field, a new one included)."""
        joined: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            joined[f.name] = mine + theirs if isinstance(mine, tuple) else mine | theirs
        return NodeReads(**joined)

    def labels(self) -> frozenset[str]:
        """Every label key read: named by key or by a selector."""
        keys = set(self.label_keys)
        for selector in self.selectors:
            keys |= set(selector.labels) | {e.key for e in selector.expressions}
        return frozenset(keys)


class TaintRule(Protocol):
    """A rule that puts a taint on nodes and takes it off (see the module docstring)."""

    kind: ClassVar[RuleKind]

    @property
    def name(self) -> str: ...

    @property
    def taint(self) -> Taint: ...

    @property
    def dry_run(self) -> bool: ...

    @property
    def charged(self) -> bool:
        """Whether its taints' additions count against the eviction budget (a startup gate
        goes on a node being born, rebooted or idle, where it evicts nothing a workload would
        miss)."""

    @property
    def former_taints(self) -> tuple[Taint, ...]:
        """Taints it lifts but never adds (a gate's former keys): removable while it exists,
        never claimed."""

    @property
    def eviction_budget(self) -> RuleEvictionBudget | None:
        """Its own eviction budget (None: the rules-wide one, if the kind is charged)."""

    def reads(self) -> NodeReads: ...

    def born_with(self, labels: Mapping[str, str]) -> bool:
        """Whether a node registering with these labels carries the taint from its first
        second (`kind.at_registration` says how); a dry-run rule's never."""
