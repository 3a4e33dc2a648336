"""The watched view keeps only the labels the rules read (`core.decisions.plan.labels_read`): a node
changing any other label costs no reconcile. That is safe only if the planner truly never reads
them: for any node, changing labels the rules do not read changes nothing in its plan."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import example, given
from hypothesis import strategies as st

from nodegate.core.decisions.plan import NodePlan, labels_read, plan, relevant_view
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL, ZONE_LABEL, NodeRules
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import ROOT

EXAMPLE_TEXT = (ROOT / "examples" / "rules.yaml").read_text(encoding="utf-8")
EXPRESSIONS_TEXT = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: not-web
    match: {expressions: [{key: app.example.com/tier, operator: NotIn, values: [web]}]}
    taint: {key: example.com/not-web, effect: NoSchedule}
    nodeMayLift: true
  - name: no-owner
    match: {expressions: [{key: owner.example.com/team, operator: DoesNotExist}]}
    taint: {key: example.com/unowned, effect: PreferNoSchedule}
    nodeMayLift: true
conditionTaints:
  - name: nic
    match: {labels: {hw.example.com/nic: broadcom}}
    conditions: [{type: NetworkInterfaceCard, status: Kaput}]
    taint: {key: example.com/nic, value: "true", effect: NoSchedule}
persistentLabels: {keys: [example.com/rack], keyBy: providerID}
"""
RULES = [load_rules(ROOT / "examples" / "rules.yaml"), parse_rules(EXPRESSIONS_TEXT)]
KEY = re.compile(r"\b[a-z0-9.-]+\.[a-z]{2,}/[A-Za-z0-9._-]+")
KEYS = sorted(
    set(KEY.findall(EXAMPLE_TEXT + EXPRESSIONS_TEXT))
    | {POOL_LABEL, TRUSTED_POOL_LABEL, ZONE_LABEL, "kubernetes.io/hostname", "team", "x.io/y"}
)
"""Every label-like key either rules file names anywhere (taint keys too), and a few others."""
VALUES = st.sampled_from(["ci", "gpu", "web", "nvidia", "broadcom", "true", "", "a", "batch"])
LABELS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=len(KEYS))
NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def node(labels: dict[str, str]) -> NodeState:
    return NodeState(
        name="n",
        labels=labels,
        taints=(NodeTaint("example.com/dedicated", "NoSchedule", "ci"),),
        conditions=(NodeCondition("NetworkInterfaceCard", "Kaput"),),
        created=NOW - timedelta(minutes=1),
    )


def written(result: NodePlan) -> tuple[object, ...]:
    return (
        result.add_taints,
        result.remove_taints,
        result.set_labels,
        result.set_annotations,
        result.owned_annotation,
    )


@fuzz
@given(st.sampled_from(RULES), LABELS, LABELS)
# The pools' own labels: a reconcilerLabel already right is not written again.
@example(RULES[0], {TRUSTED_POOL_LABEL: "ci"}, {"node-role.kubernetes.io/ci": ""})
@example(RULES[0], {POOL_LABEL: "ci"}, {TRUSTED_POOL_LABEL: "ci"})
def test_labels_no_rule_reads_change_no_plan(
    rules: NodeRules, labels: dict[str, str], others: dict[str, str]
) -> None:
    reads = labels_read(rules)
    unread = {k: v for k, v in others.items() if not reads(k)}
    before, after = node(labels), node({**labels, **unread})
    facts = PlanFacts(now=NOW)

    assert written(plan(before, rules, facts)) == written(plan(after, rules, facts))
    assert relevant_view(before, rules) == relevant_view(after, rules)


@fuzz
@given(st.sampled_from(RULES), LABELS)
def test_a_label_a_rule_reads_is_in_the_view(rules: NodeRules, labels: dict[str, str]) -> None:
    reads = labels_read(rules)
    view = relevant_view(node(labels), rules)
    assert dict(view[0]) == {k: v for k, v in labels.items() if reads(k)}  # type: ignore[call-overload]
