"""What a node-agent rule (`nodeAgents`) decides for one node, from its agents' readiness
(`node_agents.agent_readiness`, in `PlanFacts.agents`). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from nodegate.core.decisions.node_agents import agent_episode_key, agent_episode_type, agents_matter
from nodegate.core.decisions.sightings import Kept, first_sight
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome
from nodegate.core.rules.model import NodeAgentRule, NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint, format_time
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


def first_ready_annotations(
    node: NodeState,
    rules: NodeRules,
    decisions: Iterable[RuleDecision],
    after: Iterable[NodeTaint],
    now: datetime,
) -> tuple[tuple[str, str], ...]:
    """Each `firstReadyAnnotation` the node has not got yet and has just earned, with the time
    (nidhogg's `ready-since`, `first-time-ready`): once the node, as the plan leaves it,
    carries none of the taints of the rules naming it, each of which has decided (its agents
    Ready, or the node not matched: `release`; a bootstrapOnly rule lifted once), as nidhogg
    wrote it when the node had none of its taints. A rule with no decision here (dry run) is
    left out; continuous taints held off by `for`, or agents not looked up, are not ready."""
    decided = {d.rule: d for d in decisions}
    on_node = {t.identity for t in after}
    groups: dict[str, list[NodeAgentRule]] = {}
    for rule in rules.node_agents:
        key = rule.first_ready_annotation
        if key is not None and rule.name in decided and key not in node.annotations:
            groups.setdefault(key, []).append(rule)
    return tuple(
        (key, format_time(now))
        for key, group in sorted(groups.items())
        if all(_lifted(rule, decided[rule.name], on_node) for rule in group)
    )


def _lifted(rule: NodeAgentRule, decision: RuleDecision, on_node: set[tuple[str, str]]) -> bool:
    if rule.taint.identity in on_node:
        return False
    return decision.verdict == "release" or rule.mode == "bootstrapOnly"
