"""Node conditions against a rule's condition list: which match, and whether the list holds.

One home for condition matching, used by condition taint rules (`rule_outcomes.py`) and by
startup gates that lift on conditions (`gate_plan.py`). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from nodegate.core.rules.model import ConditionMatch, ConditionPolicy, NodeRules
from nodegate.core.rules.node import NodeCondition


def matching_condition(
    conditions: Iterable[NodeCondition], match: ConditionMatch, created: datetime | None = None
) -> NodeCondition | None:
    """The reported condition `match` matches; for an exact type the node does not report, its
    `defaultStatus` as a condition (reason empty, transition time the node's creation,
    `created`) if that matches; else None. Gates give no defaultStatus (the model refuses it),
    so a gate lifts only on what the node reported."""
    reported = tuple(conditions)
    for condition in reported:
        if match.matches_type(condition.type) and _status_matches(condition, match):
            return condition
    if match.default_status is None or match.type is None:
        return None
    if any(c.type == match.type for c in reported):
        return None
    assumed = NodeCondition(match.type, match.default_status, "", created)
    return assumed if _status_matches(assumed, match) else None


def _status_matches(condition: NodeCondition, match: ConditionMatch) -> bool:
    if re.fullmatch(match.status, condition.status) is None:
        return False
    return match.reason is None or re.fullmatch(match.reason, condition.reason) is not None


def conditions_hold(
    found: Sequence[NodeCondition | None], policy: ConditionPolicy
) -> tuple[NodeCondition, ...] | None:
    """The matched conditions if the list holds under `policy` (allOf: every one matched;
    anyOf: at least one), else None."""
    matched = tuple(c for c in found if c is not None)
    if policy == "allOf":
        return matched if len(matched) == len(found) else None
    return matched or None


def is_assumed(condition: NodeCondition, reported: Iterable[NodeCondition]) -> bool:
    """Whether `condition` stands for one the node does not report (its defaultStatus)."""
    return all(c.type != condition.type for c in reported)


@dataclass(frozen=True)
class ConditionTypesRead:
    """The condition types any rule reads (a condition taint rule or a gate): only those are
    worth remembering since when they hold (`sightings`). Equal when the rules read the same."""

    matches: frozenset[ConditionMatch]

    def __call__(self, condition_type: str) -> bool:
        return any(m.matches_type(condition_type) for m in self.matches)

    def reads_reason(self, condition_type: str) -> bool:
        """Whether a rule matches this type's reason too (else a new reason changes nothing)."""
        return any(m.reason is not None and m.matches_type(condition_type) for m in self.matches)


def condition_types_read(rules: NodeRules | None) -> ConditionTypesRead:
    return ConditionTypesRead(frozenset(rules.reads().conditions if rules is not None else ()))
