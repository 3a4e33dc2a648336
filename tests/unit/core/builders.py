"""Small builders for rules and nodes, so each test states only what matters to it."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from nodegate.core.decisions.plan import NodePlan
from nodegate.core.decisions.sightings import Sighting, condition_key, condition_token
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def rules(body: str) -> NodeRules:
    return parse_rules("apiVersion: nodegate.dev/v1\nkind: NodeRules\n" + textwrap.dedent(body))


def node(
    labels: dict[str, str] | None = None,
    taints: tuple[NodeTaint, ...] = (),
    conditions: tuple[NodeCondition, ...] = (),
    annotations: dict[str, str] | None = None,
    created: datetime = NOW,
) -> NodeState:
    return NodeState(
        name="node-a",
        labels=labels or {},
        annotations=annotations or {},
        taints=taints,
        conditions=conditions,
        created=created,
    )


def seen_when_written(
    conditions: Iterable[NodeCondition], facts: PlanFacts | None = None
) -> PlanFacts:
    """`facts` (default: at NOW) in which the reconciler first saw each condition's episode at
    the time the node wrote for it: a node whose clock agrees with the API server's, watched
    without a break (an episode without a time is first seen now)."""
    base = facts if facts is not None else PlanFacts(now=NOW)
    sightings = {
        condition_key(c): Sighting(condition_token(c), c.last_transition_time or base.now)
        for c in conditions
    }
    return replace(base, condition_sightings=sightings)


def ready_pods(since: Mapping[str, datetime]) -> dict[str, tuple[Sighting, ...]]:
    """Gate name -> its init pod's Ready episode, seen to begin at the given time, its status
    written then."""
    return {gate: (Sighting(f"pod-of-{gate}@{at}", at, True, at),) for gate, at in since.items()}


def applied(result: NodePlan, node: NodeState) -> NodeState:
    """The node as it will be once the plan is written."""
    labels = {**node.labels, **{c.key: c.value for c in result.set_labels}}
    annotations = dict(node.annotations)
    for key, value in result.set_annotations:
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    if result.owned_annotation == "":
        annotations.pop(OWNED_TAINTS_ANNOTATION, None)
    elif result.owned_annotation is not None:
        annotations[OWNED_TAINTS_ANNOTATION] = result.owned_annotation
    removed = {c.taint.identity for c in result.remove_taints}
    kept = tuple(t for t in node.taints if t.identity not in removed)
    taints = kept + tuple(c.taint for c in result.add_taints)
    return replace(node, labels=labels, annotations=annotations, taints=taints)
