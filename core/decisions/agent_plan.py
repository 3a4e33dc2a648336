"""What a node-agent rule (`nodeAgents`) decides for one node, from its agents' readiness
(`node_agents.agent_readiness`, in `PlanFacts.agents`). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from nodegate.core.decisions.node_agents import (
    agent_episode_key,
    agent_episode_type,
    agents_matter,
)
from nodegate.core.decisions.sightings import Kept, first_sight
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome
from nodegate.core.rules.model import NodeAgentRule
from nodegate.core.rules.node import NodeState, format_time
from nodegate.core.text.durations import format_duration


def agent_outcome(
    node: NodeState, labels: Mapping[str, str], rule: NodeAgentRule, facts: PlanFacts
) -> RuleOutcome:
    """Lifted while the agents are Ready. Not Ready: a carried taint stays; bootstrapOnly never
    puts it back; continuous puts it back once one agent has not been Ready for `for` (the
    oldest episode counts: another agent's changes never restart it)."""
    if rule.match is not None and not rule.match.matches(dict(labels)):
        return RuleOutcome(
            RuleDecision(rule.name, rule.taint, "release", "node labels do not match")
        )
    carried = node.taint(rule.taint.identity) is not None
    if rule.mode == "bootstrapOnly" and not carried:
        why = "lifted once (bootstrapOnly): never put back"
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "keep", why))
    readiness = facts.agents.get(rule.name)
    if readiness is None:
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "keep", "agents not looked up"))
    said = readiness.summary()
    if readiness.ready:
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "release", said))
    if rule.mode == "bootstrapOnly":
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "keep", said))
    if carried:
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "want", said))
    since = min(
        first_sight(
            facts.condition_sightings, agent_episode_key(rule, agent), agent.episode, facts.now
        )
        for agent in readiness.not_ready
    )
    remaining = since + rule.hold - facts.now
    if remaining > timedelta(0):
        why = (
            f"{said}; waiting {int(remaining.total_seconds())}s more of `for` (not Ready since "
            f"{format_time(since)})"
        )
        return RuleOutcome(RuleDecision(rule.name, rule.taint, "keep", why), recheck=remaining)
    why = f"{said}, for {format_duration(rule.hold)}"
    return RuleOutcome(RuleDecision(rule.name, rule.taint, "want", why))


def agent_sightings_kept(node: NodeState, rule: NodeAgentRule) -> Kept:
    """A continuous rule's agents' not-Ready episodes (every one of its type), while its taint
    is not on the node and the node matches: the `for` they are counting must outlive a
    restart (none to count with `for: 0s`; a dry-run rule's count is its own)."""
    if rule.mode != "continuous" or rule.dry_run or not rule.hold:
        return frozenset()
    if node.taint(rule.taint.identity) is not None or not agents_matter(rule, node):
        return frozenset()
    return frozenset({agent_episode_type(rule)})
