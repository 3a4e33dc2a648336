"""What each kind of taint-making rule decides for one node: one function per kind, looked up
by the rule's class. The plan calls `rule_outcome` for every rule of `NodeRules.taint_rules()`;
a kind with no entry here is refused loudly (a unit test checks every kind of `NodeRules` has
one), never silently skipped. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nodegate.core.decisions.agent_plan import agent_outcome, agent_sightings_kept
from nodegate.core.decisions.gate_plan import gate_outcome, gate_sightings_kept
from nodegate.core.decisions.sightings import (
    ConditionKey,
    Kept,
    condition_key,
    condition_token,
    first_sight,
)
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome, Verdict
from nodegate.core.rules.conditions import conditions_hold, is_assumed, matching_condition
from nodegate.core.rules.model import ConditionTaintRule, LabelTaintRule, NodeAgentRule, StartupGate
from nodegate.core.rules.node import NodeCondition, NodeState, format_time
from nodegate.core.rules.rule_kinds import TaintRule


def label_outcome(
    node: NodeState, labels: Mapping[str, str], rule: LabelTaintRule, facts: PlanFacts
) -> RuleOutcome:
    """Taint while the labels match; release when they do not."""
    if rule.match.matches(dict(labels)):
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "want", "node labels match"))
    return RuleOutcome(RuleDecision(rule.name, rule.taint, "release", "node labels do not match"))


def condition_outcome(
    node: NodeState, labels: Mapping[str, str], rule: ConditionTaintRule, facts: PlanFacts
) -> RuleOutcome:
    """Taint while the conditions match (for `for`), released (or kept) when they stop."""
    not_matching: Verdict = "release" if rule.on_recovery == "remove" else "keep"
    if rule.match is not None and not rule.match.matches(dict(labels)):
        why = "node labels do not match"
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "release", why))
    found = [matching_condition(node.conditions, m, node.created) for m in rule.conditions]
    matched = conditions_hold(found, rule.condition_policy)
    if matched is None:
        why = "conditions do not match" + (" (onRecovery: keep)" if not_matching == "keep" else "")
        return RuleOutcome(RuleDecision(rule.name, rule.taint, not_matching, why))
    assumed = sorted({c.type for c in matched if is_assumed(c, node.conditions)})
    said = "conditions match" if rule.condition_policy == "allOf" else "a condition matches"
    if assumed:
        said += " (not reported, counted as defaultStatus: " + ", ".join(assumed) + ")"
    if rule.hold:
        # allOf: the list holds since its last condition matched; anyOf: since its first.
        times = [_condition_since(c, node, facts) for c in matched]
        held_since = max(times) if rule.condition_policy == "allOf" else min(times)
        remaining = held_since + rule.hold - facts.now
        if remaining > timedelta(0):
            why = (
                f"{said}, waiting {int(remaining.total_seconds())}s more of `for` (holding "
                f"since {format_time(held_since)})"
            )
            return RuleOutcome(RuleDecision(rule.name, rule.taint, "keep", why), remaining)
    return RuleOutcome(RuleDecision(rule.name, rule.taint, "want", said))


def _condition_since(condition: NodeCondition, node: NodeState, facts: PlanFacts) -> datetime:
    """Since when a condition has held, on the API server's clock: when nodegate first saw this
    episode of it (`sightings`); for one the node does not report (its defaultStatus), since
    the Node was created. The time the node wrote is never read: its clock may be anywhere."""
    if is_assumed(condition, node.conditions):
        return min(node.created or facts.now, facts.now)
    return first_sight(
        facts.condition_sightings,
        condition_key(condition),
        condition_token(condition),
        facts.now,
    )


def condition_sightings_kept(node: NodeState, rule: ConditionTaintRule) -> frozenset[ConditionKey]:
    """The conditions a `for` hold is counting (they hold, the taint is not on yet): reported
    ones only (an assumed one counts from the Node's creation, which needs no keeping)."""
    if not rule.hold or node.taint(rule.taint.identity) is not None:
        return frozenset()
    found = [matching_condition(node.conditions, m, node.created) for m in rule.conditions]
    matched = conditions_hold(found, rule.condition_policy) or ()
    reported = {c.type for c in node.conditions}
    return frozenset(condition_key(c) for c in matched if c.type in reported)


@dataclass(frozen=True)
class KindDecisions:
    """What one kind of rule decides about a node."""

    outcome: Callable[[NodeState, Mapping[str, str], Any, PlanFacts], RuleOutcome]
    """(node, its labels after this plan's label changes, the rule, the facts) -> the outcome."""
    sightings_kept: Callable[[NodeState, Any], Kept] = lambda _node, _rule: frozenset()
    """Which of the node's condition sightings this rule still decides with, so they outlive a
    restart (`core.objects.sightings_record`)."""


DECIDERS: dict[type[Any], KindDecisions] = {
    LabelTaintRule: KindDecisions(label_outcome),
    ConditionTaintRule: KindDecisions(condition_outcome, condition_sightings_kept),
    StartupGate: KindDecisions(gate_outcome, gate_sightings_kept),
    NodeAgentRule: KindDecisions(agent_outcome, agent_sightings_kept),
}
"""The one place a rule kind's decisions are registered."""


class UnknownRuleKindError(TypeError):
    pass


def _decisions(rule: TaintRule) -> KindDecisions:
    found = DECIDERS.get(type(rule))
    if found is None:
        raise UnknownRuleKindError(
            f"no decision registered for rule kind {type(rule).__name__} "
            f"({rule.kind.field}): add it to DECIDERS in core/decisions/rule_outcomes.py"
        )
    return found


def rule_outcome(
    node: NodeState, labels: Mapping[str, str], rule: TaintRule, facts: PlanFacts
) -> RuleOutcome:
    return _decisions(rule).outcome(node, labels, rule, facts)


def sightings_kept(node: NodeState, rule: TaintRule) -> Kept:
    return _decisions(rule).sightings_kept(node, rule)
