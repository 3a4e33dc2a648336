"""Dry-run rules: planned exactly as live ones, their changes reported instead of written.

`plan.plan` plans every node twice when the rules hold a dry-run rule: with every rule live
(what would happen), and with the dry-run rules' verdicts left out and their taints hands-off
(what is written). The difference, as `DryRunChange`s, is what the reconciler reports on the
node (an Event per change, reason from `DRY_RUN_ACTIONS`) and counts
(`nodegate_dry_run_changes_total`, `nodegate_dry_run_nodes`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nodegate.core.rules.model import NodeRules

DryRunAction = Literal[
    "add_taint", "remove_taint", "adopt_taint", "lift_gate", "put_back_gate", "restore_label"
]

DRY_RUN_ACTIONS: dict[DryRunAction, tuple[str, str]] = {
    "add_taint": ("DryRunTaintWouldAdd", "add taint"),
    "remove_taint": ("DryRunTaintWouldRemove", "remove taint"),
    "adopt_taint": ("DryRunTaintWouldAdopt", "adopt taint"),
    "lift_gate": ("DryRunGateWouldLift", "lift startup gate"),
    "put_back_gate": ("DryRunGateWouldPutBack", "put back startup gate"),
    "restore_label": ("DryRunLabelWouldRestore", "restore label"),
}
"""The Event reason of each kind of would-be change (docs/reconciler.md, Events), and what its
message says the rule would do."""

PERSISTENT_LABELS_RULE = "persistentLabels"
"""The `rule` of a would-be label restore (persistentLabels has no name)."""


@dataclass(frozen=True)
class DryRunChange:
    """One change a dry-run rule would make to one node."""

    rule: str
    action: DryRunAction
    subject: str
    """The taint (`key=value:Effect`), the gate's name, or the label (`key=value`)."""
    why: str

    @property
    def reason(self) -> str:
        return DRY_RUN_ACTIONS[self.action][0]

    def message(self) -> str:
        verb = DRY_RUN_ACTIONS[self.action][1]
        return f"dry run: rule {self.rule} would {verb} {self.subject} ({self.why}); not written"


def dry_run_rules(rules: NodeRules) -> frozenset[str]:
    return frozenset(r.name for r in rules.taint_rules() if r.dry_run)


def hands_off(rules: NodeRules) -> frozenset[tuple[str, str]]:
    """(key, effect) that only dry-run rules name: the live plan neither adds, removes nor
    claims them (a claim already on the node stays), whatever an earlier generation owned."""
    named_live: set[tuple[str, str]] = set()
    named_dry: set[tuple[str, str]] = set()
    for rule in rules.taint_rules():
        identities = {rule.taint.identity} | {t.identity for t in rule.former_taints}
        (named_dry if rule.dry_run else named_live).update(identities)
    return frozenset(named_dry - named_live)


def live_owned_taints(rules: NodeRules) -> frozenset[tuple[str, str]]:
    """(key, effect) of the taints live rules own: what the taint history may record. A taint
    only dry-run rules name was never written by nodegate, so a node's ownership claim on it
    must never become removable once the rule is deleted (docs/reconciler.md, Ownership)."""
    return rules.owned_taints() - hands_off(rules)
