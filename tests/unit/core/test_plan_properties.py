"""Properties of the planner that must hold for any node and any rules (hypothesis)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nodegate.core.decisions.dry_run import hands_off
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import (
    ConditionMatch,
    ConditionTaintRule,
    LabelSelector,
    LabelTaintRule,
    NodeRules,
    Taint,
)
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from tests.unit.core.builders import NOW, applied

KEYS = ["example.com/a", "example.com/b", "c", "d.io/e", "readiness.k8s.io/r"]
VALUES = ["", "x", "y"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
FOREIGN_KEYS = ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready", "other.io/f"]
RESERVED_KEYS = ["node.kubernetes.io/unschedulable", "karpenter.sh/disrupted", "CriticalAddonsOnly"]


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
            label_rules.append(
                LabelTaintRule(
                    name=f"l{n}", match=selector, taint=taint, dry_run=draw(st.booleans())
                )
            )
        else:
            conditions = tuple(
                ConditionMatch(
                    type=kind,
                    status=draw(st.sampled_from(["True", "False|Unknown"])),
                    default_status=draw(st.sampled_from([None, "True", "False", "Unknown"])),
                )
                for kind in draw(st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, max_size=2))
            )
            condition_rules.append(
                ConditionTaintRule(
                    name=f"c{n}",
                    conditions=conditions,
                    condition_policy=draw(st.sampled_from(["allOf", "anyOf"])),
                    taint=taint,
                    on_recovery=draw(st.sampled_from(["remove", "keep"])),
                    dry_run=draw(st.booleans()),
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
            st.tuples(
                st.sampled_from(KEYS + FOREIGN_KEYS + RESERVED_KEYS), st.sampled_from(EFFECTS)
            ),
            unique=True,
        )
    )
    taints = tuple(NodeTaint(k, e, draw(st.sampled_from(VALUES))) for k, e in taint_ids)
    # The node writes its own annotations: it may claim any key, its own taints included.
    claimable = KEYS + FOREIGN_KEYS + RESERVED_KEYS
    owned = draw(
        st.lists(st.tuples(st.sampled_from(claimable), st.sampled_from(EFFECTS)), unique=True)
    )
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
    planned = applied(plan(node, rules, FACTS), node)
    assert plan(planned, rules, FACTS).is_empty


@st.composite
def histories(draw: st.DrawFn) -> frozenset[tuple[str, str]]:
    """Taints earlier rules generations owned (never reserved keys: validation refuses them)."""
    return frozenset(
        draw(st.lists(st.tuples(st.sampled_from([*KEYS, "other.io/f"]), st.sampled_from(EFFECTS))))
    )


@settings(max_examples=300)
@given(rule_sets(), nodes(), histories())
def test_only_taints_that_rules_owned_are_ever_removed(
    rules: NodeRules, node: NodeState, history: frozenset[tuple[str, str]]
) -> None:
    """Whatever the node's annotation claims: a removed taint is a current rule's, or one an
    earlier generation owned *and* the annotation claims; never a reserved key."""
    recorded = node.annotations.get(OWNED_TAINTS_ANNOTATION, "")
    claimed = {tuple(i.rsplit(":", 1)) for i in recorded.split(",") if i}
    may_remove = rules.owned_taints() | (claimed & history)
    facts = PlanFacts(now=NOW, previously_owned=history)
    planned = applied(plan(node, rules, facts), node)
    survivors = [t for t in node.taints if t.identity not in may_remove]
    assert all(t in planned.taints for t in survivors)
    assert all(t in planned.taints for t in node.taints if t.key in RESERVED_KEYS)


@settings(max_examples=300)
@given(rule_sets(), nodes(), histories())
def test_taints_only_dry_run_rules_name_are_never_written(
    rules: NodeRules, node: NodeState, history: frozenset[tuple[str, str]]
) -> None:
    """A dry-run rule's taint, named by no live rule, is neither added nor removed, whatever
    the node claims and earlier generations owned."""
    facts = PlanFacts(now=NOW, previously_owned=history)
    planned = applied(plan(node, rules, facts), node)
    for identity in hands_off(rules):
        assert planned.taint(identity) == node.taint(identity)


LEFT_BY_AN_EARLIER_RULE = NodeState(
    name="n",
    taints=(NodeTaint("readiness.k8s.io/r", "NoSchedule"),),
    annotations={OWNED_TAINTS_ANNOTATION: "readiness.k8s.io/r:NoSchedule"},
)


@settings(max_examples=300)
@given(rule_sets(), nodes(), histories())
@example(
    NodeRules(api_version="nodegate.dev/v1", kind="NodeRules"),
    LEFT_BY_AN_EARLIER_RULE,
    frozenset({("readiness.k8s.io/r", "NoSchedule")}),
)
def test_a_readiness_taint_no_live_rule_names_is_never_removed(
    rules: NodeRules, node: NodeState, history: frozenset[tuple[str, str]]
) -> None:
    named = {r.taint.identity for r in rules.label_taints if not r.dry_run}
    named |= {r.taint.identity for r in rules.condition_taints if not r.dry_run}
    # A key some rule names under another effect is nodegate's: its claimed old effect may go.
    named_keys = {key for key, _ in rules.owned_taints() | rules.former_gate_taints()}
    facts = PlanFacts(now=NOW, previously_owned=history)
    planned = applied(plan(node, rules, facts), node)
    for taint in node.taints:
        if (
            taint.key.startswith("readiness.k8s.io/")
            and taint.identity not in named
            and taint.key not in named_keys
        ):
            assert planned.taint(taint.identity) == taint


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
    assert applied(original, node) == applied(reordered, node)
    assert (original.add_taints, original.remove_taints) == (
        reordered.add_taints,
        reordered.remove_taints,
    )
