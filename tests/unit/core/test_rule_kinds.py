"""The rule-kind seam (core/rules/rule_kinds.py): every consumer takes every kind into account.

A dummy kind, "annotation -> taint", is added the way a real one would be (its class, its field
on the rules, its decision in DECIDERS) and then checked against each consumer: one that lists
the kinds by hand instead of iterating `NodeRules.taint_rules()` ignores it and fails here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import ClassVar

import pytest
from pydantic.alias_generators import to_camel

from nodegate.core.decisions.blast_radius import has_no_rules
from nodegate.core.decisions.dry_run import dry_run_rules, hands_off
from nodegate.core.decisions.eviction_budget import charged_rules, charges, ledger_of
from nodegate.core.decisions.init_pods import pod_source, pods_read
from nodegate.core.decisions.plan import annotations_read, labels_read, plan, relevant_view
from nodegate.core.decisions.rule_outcomes import DECIDERS, KindDecisions, UnknownRuleKindError
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome, Verdict
from nodegate.core.objects.sightings_record import worth_keeping
from nodegate.core.reports.cluster_status import RecordsView, status_report
from nodegate.core.reports.rules_change import rules_change
from nodegate.core.rules.conditions import condition_types_read
from nodegate.core.rules.model import (
    ConditionMatch,
    InitPods,
    LabelSelector,
    NodeRules,
    RuleBudget,
    Taint,
)
from nodegate.core.rules.node import NodeState
from nodegate.core.rules.registration import label_taints_for
from nodegate.core.rules.rule_kinds import NodeReads, RuleKind
from nodegate.core.text.frozen import Frozen
from tests.unit.core.builders import applied

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
QUARANTINE = "example.com/quarantine"


class AnnotationTaintRule(Frozen):
    """The dummy kind: a node annotation implies a taint, on nodes its `match` selects, while
    a condition holds (so it reads each thing a rule can read)."""

    name: str
    annotation: str
    match: LabelSelector
    condition: ConditionMatch
    pods: InitPods
    taint: Taint
    eviction_budget: RuleBudget = None
    dry_run: bool = False

    kind: ClassVar[RuleKind] = RuleKind(
        field="annotationTaints",
        plural="annotation taints",
        at_registration="permanent",
    )
    charged: ClassVar[bool] = True
    former_taints: ClassVar[tuple[Taint, ...]] = ()

    def reads(self) -> NodeReads:
        return NodeReads(
            selectors=(self.match,),
            conditions=(self.condition,),
            annotations=frozenset({self.annotation}),
            pods=(self.pods,),
        )

    def born_with(self, labels: Mapping[str, str]) -> bool:
        return not self.dry_run and self.match.matches(dict(labels))


class RulesWithAnnotations(NodeRules):
    annotation_taints: tuple[AnnotationTaintRule, ...] = ()


def annotation_outcome(
    node: NodeState, labels: Mapping[str, str], rule: AnnotationTaintRule, facts: PlanFacts
) -> RuleOutcome:
    verdict: Verdict = "want" if node.annotations.get(rule.annotation) else "release"
    return RuleOutcome(RuleDecision(rule.name, rule.taint, verdict, "annotation"))


@pytest.fixture
def registered() -> Iterator[None]:
    """The dummy kind's decision, registered as a real kind's is (and unregistered after)."""
    DECIDERS[AnnotationTaintRule] = KindDecisions(annotation_outcome)
    yield
    del DECIDERS[AnnotationTaintRule]


def dummy_rules(dry_run: bool = False) -> RulesWithAnnotations:
    return RulesWithAnnotations.model_validate(
        {
            "apiVersion": "nodegate.dev/v1",
            "kind": "NodeRules",
            "annotationTaints": [
                {
                    "name": "quarantined",
                    "annotation": QUARANTINE,
                    "match": {"labels": {"example.com/role": "worker"}},
                    "condition": {"type": "example.com/Quarantine", "status": "True"},
                    "pods": {"namespace": "kube-system", "selector": {"app": "quarantine-agent"}},
                    "taint": {"key": "example.com/quarantined", "effect": "NoExecute"},
                    "dryRun": dry_run,
                }
            ],
        }
    )


def node(annotations: dict[str, str] | None = None) -> NodeState:
    return NodeState(
        name="node-a",
        labels={"example.com/role": "worker"},
        annotations=annotations or {},
        created=NOW,
    )


QUARANTINED = ("example.com/quarantined", "NoExecute")


def test_every_rule_kind_of_the_rules_file_has_a_decision() -> None:
    kinds = [cls for _, cls in NodeRules.rule_kinds()]
    assert [cls.kind.field for cls in kinds] == [
        "labelTaints",
        "conditionTaints",
        "startupGates",
        "nodeAgents",
    ]
    assert all(cls in DECIDERS for cls in kinds)


def test_each_kind_names_the_field_it_is_listed_under() -> None:
    for attribute, cls in NodeRules.rule_kinds():
        assert cls.kind.field == to_camel(attribute)


def test_a_kind_without_a_registered_decision_is_refused_by_name() -> None:
    with pytest.raises(UnknownRuleKindError, match=r"AnnotationTaintRule.*DECIDERS"):
        plan(node({QUARANTINE: "yes"}), dummy_rules(), PlanFacts(now=NOW))


def test_a_new_kind_is_iterated_with_the_others() -> None:
    rules = dummy_rules()
    assert [r.name for r in rules.taint_rules()] == ["quarantined"]
    assert rules.owned_taints() == {QUARANTINED}
    assert not has_no_rules(rules)


@pytest.mark.usefixtures("registered")
def test_the_planner_adds_and_releases_a_new_kinds_taint() -> None:
    rules = dummy_rules()
    added = plan(node({QUARANTINE: "yes"}), rules, PlanFacts(now=NOW))
    assert [c.taint.identity for c in added.add_taints] == [QUARANTINED]
    tainted = applied(added, node({QUARANTINE: "yes"}))
    cleared = replace(tainted, annotations={**tainted.annotations, QUARANTINE: ""})
    lifted = plan(cleared, rules, PlanFacts(now=NOW))
    assert [c.taint.identity for c in lifted.remove_taints] == [QUARANTINED]


def test_what_a_new_kind_reads_is_kept_and_watched() -> None:
    rules = dummy_rules()
    assert QUARANTINE in annotations_read(rules)
    assert labels_read(rules)("example.com/role")
    assert condition_types_read(rules)("example.com/Quarantine")
    assert [(name, pod_source(spec)) for name, spec in pods_read(rules)] == [
        ("quarantined", ("kube-system", "app=quarantine-agent"))
    ]
    assert relevant_view(node(), rules) != relevant_view(node({QUARANTINE: "yes"}), rules)


def test_a_new_kinds_dry_run_is_reported_not_written() -> None:
    rules = dummy_rules(dry_run=True)
    assert dry_run_rules(rules) == {"quarantined"}
    assert hands_off(rules) == {QUARANTINED}


@pytest.mark.usefixtures("registered")
def test_a_new_charged_kind_counts_against_the_eviction_budget() -> None:
    rules = dummy_rules()
    assert [r.name for r in charged_rules(rules)] == ["quarantined"]
    assert ledger_of(rules, "quarantined") is not None
    before = node({QUARANTINE: "yes"})
    assert [c.rule for c in charges(before, plan(before, rules, PlanFacts(now=NOW)), rules)] == [
        "quarantined"
    ]


def test_nodes_are_born_with_a_new_kinds_permanent_taint() -> None:
    taints = label_taints_for(dummy_rules(), {"example.com/role": "worker"})
    assert [t.identity for t in taints] == [QUARANTINED]


@pytest.mark.usefixtures("registered")
def test_the_day2_reports_show_a_new_kinds_rules() -> None:
    rules = dummy_rules()
    tainted = node({QUARANTINE: "yes"})
    change = rules_change([(tainted, PlanFacts(now=NOW))], rules, None, 0.5)
    assert [row.rule for row in change.summary] == ["quarantined"]
    report = status_report(NOW, [tainted], rules, None, None, None, RecordsView(), ())
    assert [row.rule for row in report.taints] == ["quarantined"]


def test_the_sightings_record_keeps_what_a_new_kind_still_decides_with() -> None:
    kept = frozenset({("example.com/Quarantine", "True")})
    DECIDERS[AnnotationTaintRule] = KindDecisions(annotation_outcome, lambda _node, _rule: kept)
    try:
        assert worth_keeping(node(), dummy_rules()) == kept
    finally:
        del DECIDERS[AnnotationTaintRule]
