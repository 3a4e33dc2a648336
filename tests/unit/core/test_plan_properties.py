"""Properties of the planner that must hold for any node and any rules (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nodegate.core.model import (
    ConditionMatch,
    ConditionTaintRule,
    LabelSelector,
    LabelTaintRule,
    NodeRules,
    Taint,
)
from nodegate.core.node import NodeCondition, NodeState, NodeTaint
from nodegate.core.plan import OWNED_TAINTS_ANNOTATION, PlanFacts, plan
from tests.unit.core.builders import NOW

KEYS = ["example.com/a", "example.com/b", "c", "d.io/e"]
VALUES = ["", "x", "y"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
FOREIGN_KEYS = ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready", "other.io/f"]


@st.composite
def rule_sets(draw: st.DrawFn) -> NodeRules:
    """Valid rules: one value per (key, effect), as validation guarantees."""
    identities = draw(
        st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(EFFECTS)), unique=True)
    )
    value_of = {i: draw(st.sampled_from(VALUES)) for i in identities}
    label_rules = []
    condition_rules = []
    for n, (key, effect) in enumerate(identities):
        taint = Taint(key=key, effect=effect, value=value_of[(key, effect)])
        if draw(st.booleans()):
            selector = LabelSelector(
                labels={draw(st.sampled_from(KEYS)): draw(st.sampled_from(VALUES))}
            )
            label_rules.append(LabelTaintRule(name=f"l{n}", match=selector, taint=taint))
        else:
            condition = ConditionMatch(type=draw(st.sampled_from(["A", "B"])), status="True")
            condition_rules.append(
                ConditionTaintRule(
                    name=f"c{n}",
                    conditions=(condition,),
                    taint=taint,
                    on_recovery=draw(st.sampled_from(["remove", "keep"])),
                )
            )
    return NodeRules(
        api_version="nodegate.dev/v1",
        kind="NodeRules",
        label_taints=tuple(label_rules),
        condition_taints=tuple(condition_rules),
    )


@st.composite
def nodes(draw: st.DrawFn) -> NodeState:
    taint_ids = draw(
        st.lists(
            st.tuples(st.sampled_from(KEYS + FOREIGN_KEYS), st.sampled_from(EFFECTS)), unique=True
        )
    )
    taints = tuple(NodeTaint(k, e, draw(st.sampled_from(VALUES))) for k, e in taint_ids)
    owned = draw(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(EFFECTS)), unique=True))
    annotations = {OWNED_TAINTS_ANNOTATION: ",".join(f"{k}:{e}" for k, e in owned)} if owned else {}
    return NodeState(
        name="n",
        labels=draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES))),
        annotations=annotations,
        taints=taints,
        conditions=tuple(
            NodeCondition(t, draw(st.sampled_from(["True", "False"]))) for t in ("A", "B")
        ),
    )


FACTS = PlanFacts(now=NOW)


@settings(max_examples=300)
@given(rule_sets(), nodes())
def test_plan_of_the_planned_node_is_empty(rules: NodeRules, node: NodeState) -> None:
    planned = plan(node, rules, FACTS).apply(node)
    assert plan(planned, rules, FACTS).is_empty


@settings(max_examples=300)
@given(rule_sets(), nodes())
def test_foreign_taints_always_survive(rules: NodeRules, node: NodeState) -> None:
    recorded = node.annotations.get(OWNED_TAINTS_ANNOTATION, "")
    owned = rules.owned_taints() | {tuple(i.rsplit(":", 1)) for i in recorded.split(",") if i}
    planned = plan(node, rules, FACTS).apply(node)
    foreign = [t for t in node.taints if t.identity not in owned]
    assert all(t in planned.taints for t in foreign)


@settings(max_examples=200)
@given(rule_sets(), nodes(), st.randoms())
def test_order_of_rules_does_not_change_the_result(
    rules: NodeRules, node: NodeState, rng: object
) -> None:
    label_rules = list(rules.label_taints)
    condition_rules = list(rules.condition_taints)
    rng.shuffle(label_rules)  # type: ignore[attr-defined]
    rng.shuffle(condition_rules)  # type: ignore[attr-defined]
    shuffled = rules.model_copy(
        update={"label_taints": tuple(label_rules), "condition_taints": tuple(condition_rules)}
    )
    original = plan(node, rules, FACTS)
    reordered = plan(node, shuffled, FACTS)
    assert original.apply(node) == reordered.apply(node)
    assert (original.add_taints, original.remove_taints) == (
        reordered.add_taints,
        reordered.remove_taints,
    )
