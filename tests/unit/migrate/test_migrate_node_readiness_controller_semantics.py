"""The converted rules decide what node-readiness-controller decided, checked exhaustively with
nodegate's own planner against a port of its decision (`evaluateRuleForNode` in
internal/controller/nodereadinessrule_controller.go at e5ff8d1: each condition's effective
status is the node's, else the rule's defaultStatus, else Unknown; satisfied when it equals
requiredStatus; allOf removes the taint when all are satisfied, anyOf when one is)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeTaint
from nodegate.core.text.yaml_input import read_yaml_documents
from nodegate.migrate.conversion import YamlFile, to_yaml
from nodegate.migrate.node_readiness_controller import convert_node_readiness_controller
from tests.unit.core.builders import NOW, node

STATUSES = ("True", "False", "Unknown")
REPORTED = (*STATUSES, None)  # None: the node does not report the condition
DEFAULTS = (*STATUSES, None)  # None: the rule gives no defaultStatus
LABELS = {"e2e-test": "x"}
TAINT = NodeTaint("readiness.k8s.io/t", "NoSchedule", "pending")
FACTS = PlanFacts(now=NOW)


def nrc_removes(
    policy: str,
    required: tuple[str, ...],
    defaults: tuple[str | None, ...],
    reported: tuple[str | None, ...],
) -> bool:
    """node-readiness-controller's shouldRemoveTaint."""
    satisfied = [
        (status if status is not None else default or "Unknown") == need
        for need, default, status in zip(required, defaults, reported, strict=True)
    ]
    return any(satisfied) if policy == "anyOf" else all(satisfied)


def converted(
    mode: str, policy: str | None, required: tuple[str, ...], defaults: tuple[str | None, ...]
) -> NodeRules:
    conditions = "".join(
        f'\n    - {{type: C{n}, requiredStatus: "{need}"'
        + (f', defaultStatus: "{default}"' if default else "")
        + "}"
        for n, (need, default) in enumerate(zip(required, defaults, strict=True))
    )
    text = (
        "apiVersion: readiness.node.x-k8s.io/v1alpha1\nkind: NodeReadinessRule\n"
        f"metadata: {{name: r}}\nspec:\n  enforcementMode: {mode}\n"
        + (f"  conditionPolicy: {policy}\n" if policy else "")
        + f"  conditions:{conditions}\n"
        "  taint: {key: readiness.k8s.io/t, effect: NoSchedule, value: pending}\n"
        "  nodeSelector: {matchLabels: {e2e-test: x}}\n"
    )
    files = [YamlFile("in.yaml", tuple(read_yaml_documents(text, "in.yaml")))]
    return parse_rules(to_yaml(convert_node_readiness_controller(files)), "<converted>")


def conditions_of(reported: tuple[str | None, ...]) -> tuple[NodeCondition, ...]:
    return tuple(
        NodeCondition(f"C{n}", status, "", NOW - timedelta(seconds=30))
        for n, status in enumerate(reported)
        if status is not None
    )


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("policy", [None, "allOf", "anyOf"])
def test_a_continuous_rule_taints_exactly_where_node_readiness_controller_did(
    policy: str | None, count: int
) -> None:
    """Every requiredStatus and defaultStatus (or none) of each condition, against every status
    the node reports for it (or none)."""
    for required in itertools.product(STATUSES, repeat=count):
        for defaults in itertools.product(DEFAULTS, repeat=count):
            rules = converted("continuous", policy, required, defaults)
            for reported in itertools.product(REPORTED, repeat=count):
                case = (required, defaults, reported)
                removes = nrc_removes(policy or "allOf", required, defaults, reported)
                conditions = conditions_of(reported)
                untainted = plan(node(LABELS, conditions=conditions), rules, FACTS)
                tainted = plan(node(LABELS, taints=(TAINT,), conditions=conditions), rules, FACTS)
                added = [c.taint.key for c in untainted.add_taints]
                removed = [c.taint.key for c in tainted.remove_taints]
                assert added == ([] if removes else [TAINT.key]), case
                assert removed == ([TAINT.key] if removes else []), case


def _gate_cases() -> list[object]:
    return [
        pytest.param(required, id=str(required))
        for count in (1, 2)
        for required in itertools.product(STATUSES, repeat=count)
    ]


@pytest.mark.parametrize("required", _gate_cases())
def test_a_bootstrap_only_rule_lifts_where_node_readiness_controller_did_on_reported_conditions(
    required: tuple[str, ...],
) -> None:
    """The one difference: NRC counted a condition the node does not report as Unknown, so a
    requiredStatus Unknown was met by silence; a nodegate gate lifts on reported conditions
    only (the converter's notes say so)."""
    rules = converted("bootstrap-only", None, required, (None,) * len(required))
    for reported in itertools.product(REPORTED, repeat=len(required)):
        removes = nrc_removes("allOf", required, (None,) * len(required), reported)
        lifts = removes and None not in reported
        gated = node(
            LABELS,
            taints=(TAINT,),
            conditions=conditions_of(reported),
            created=NOW - timedelta(hours=1),
        )
        removed = [c.taint.key for c in plan(gated, rules, FACTS).remove_taints]
        assert removed == ([TAINT.key] if lifts else []), reported
