"""Adoption, planned: a taint already on a node that a rule wants there is claimed and
reported as adopted; `readiness.k8s.io/` taints no current rule names are never touched, so
node-readiness-controller can run beside nodegate."""

from __future__ import annotations

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.node import NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from tests.unit.core.builders import NOW, node, rules

FACTS = PlanFacts(now=NOW)
NET = NodeTaint("readiness.k8s.io/network", "NoSchedule")

NETWORK_RULE = rules(
    """\
    conditionTaints:
      - name: network
        conditionPolicy: anyOf
        conditions:
          - {type: NetworkReady, status: "False|Unknown", defaultStatus: Unknown}
        taint: {key: readiness.k8s.io/network, effect: NoSchedule}
    """
)


def test_a_wanted_taint_already_on_the_node_is_adopted() -> None:
    result = plan(node(taints=(NET,)), NETWORK_RULE, FACTS)
    assert result.owned_annotation == "readiness.k8s.io/network:NoSchedule"
    assert [(c.taint, c.rules) for c in result.adopted_taints] == [(NET, ("network",))]


def test_a_claimed_taint_is_not_adopted_again() -> None:
    claimed = node(
        taints=(NET,), annotations={OWNED_TAINTS_ANNOTATION: "readiness.k8s.io/network:NoSchedule"}
    )
    result = plan(claimed, NETWORK_RULE, FACTS)
    assert result.is_empty and result.adopted_taints == ()


def test_a_taint_nodegate_adds_is_not_adoption() -> None:
    result = plan(node(), NETWORK_RULE, FACTS)
    assert [c.taint for c in result.add_taints] == [NET]
    assert result.adopted_taints == ()


def test_a_taint_the_nodes_pool_is_born_with_is_not_adoption() -> None:
    pooled = rules(
        """\
        labelTaints:
          - name: ci
            match: {labels: {example.com/ci: "yes"}}
            taint: {key: example.com/ci, effect: NoSchedule}
            nodeMayLift: true
        nodePools:
          - {name: ci, provider: oke, size: 1, labels: {example.com/ci: "yes"}}
        """
    )
    born = node(
        {"example.com/ci": "yes", "nodegate.dev/pool": "ci"},
        taints=(NodeTaint("example.com/ci", "NoSchedule"),),
    )
    result = plan(born, pooled, FACTS)
    assert result.owned_annotation == "example.com/ci:NoSchedule"
    assert result.adopted_taints == ()


def test_a_carried_gate_of_another_tool_is_adopted() -> None:
    gate = rules(
        """\
        startupGates:
          - name: cni
            match: {labels: {pool: gpu}}
            taint: {key: readiness.k8s.io/network, effect: NoSchedule}
            readyWhen: {conditions: [{type: NetworkReady, status: "True"}]}
        """
    )
    result = plan(node({"pool": "gpu"}, taints=(NET,)), gate, FACTS)
    assert [c.rules for c in result.adopted_taints] == [("cni",)]


def test_an_adoption_split_from_its_write_is_not_reported() -> None:
    result = plan(node(taints=(NET,)), NETWORK_RULE, FACTS)
    assert result.taints_only() is None  # no taint change: the claim is the whole write


def test_readiness_taint_left_in_the_claim_by_an_earlier_rule_is_released_not_removed() -> None:
    no_rules = rules("labelTaints: []\n")
    left = node(
        taints=(NET,), annotations={OWNED_TAINTS_ANNOTATION: "readiness.k8s.io/network:NoSchedule"}
    )
    earlier = PlanFacts(now=NOW, previously_owned=frozenset({NET.identity}))
    result = plan(left, no_rules, earlier)
    assert result.remove_taints == ()
    assert result.owned_annotation == ""


def test_other_taints_left_in_the_claim_are_still_cleaned_up() -> None:
    old = NodeTaint("example.com/old", "NoSchedule")
    no_rules = rules("labelTaints: []\n")
    left = node(taints=(old,), annotations={OWNED_TAINTS_ANNOTATION: "example.com/old:NoSchedule"})
    earlier = PlanFacts(now=NOW, previously_owned=frozenset({old.identity}))
    assert [c.taint for c in plan(left, no_rules, earlier).remove_taints] == [old]


def test_readiness_taint_no_rule_names_is_neither_removed_nor_claimed() -> None:
    other = NodeTaint("readiness.k8s.io/storage", "NoSchedule")
    result = plan(node(taints=(other, NET)), NETWORK_RULE, FACTS)
    assert result.remove_taints == ()
    assert result.owned_annotation == "readiness.k8s.io/network:NoSchedule"
