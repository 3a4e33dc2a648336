"""Pool membership a node cannot steer, and label rules a node could lift, as pure functions."""

from __future__ import annotations

from nodegate.core.decisions.node_trust import (
    pool_membership,
    seal_for_registration,
    seal_taint,
)
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL
from nodegate.core.rules.node import NodeTaint
from nodegate.core.rules.node_marks import REGISTRATION_SEAL_KEY
from tests.unit.core.builders import rules
from tests.unit.core.test_validation import HEADER, problems_of

POOLS = rules(
    """\
    nodePools:
      - name: payments
        provider: oke
        size: 1
        reconcilerLabels: {node-restriction.kubernetes.io/tenant: payments}
    """
)


def test_the_pool_comes_from_the_label_no_kubelet_may_set() -> None:
    membership = pool_membership({TRUSTED_POOL_LABEL: "payments"}, (), POOLS)
    assert membership.pool is not None and membership.pool.name == "payments"


def test_the_pool_comes_from_the_registration_seal_until_it_is_recorded() -> None:
    membership = pool_membership({POOL_LABEL: "ci"}, (seal_taint("payments"),), POOLS)
    assert membership.pool is not None and membership.pool.name == "payments"


def test_a_pool_named_only_by_the_nodes_own_label_is_an_untrusted_claim() -> None:
    membership = pool_membership({POOL_LABEL: "payments"}, (), POOLS)
    assert membership.pool is None and membership.untrusted_claim == "payments"


def test_a_seal_of_another_effect_is_no_seal() -> None:
    forged = NodeTaint(REGISTRATION_SEAL_KEY, "NoSchedule", "payments")
    assert pool_membership({}, (forged,), POOLS).pool is None


def test_registration_seals_the_claimed_pool_once() -> None:
    payments = {POOL_LABEL: "payments"}
    assert seal_for_registration(payments, (), POOLS) == seal_taint("payments")
    assert seal_for_registration({**payments, TRUSTED_POOL_LABEL: "x"}, (), POOLS) is None
    assert seal_for_registration(payments, (seal_taint("gpu"),), POOLS) is None
    assert seal_for_registration({}, (), POOLS) is None


def test_a_claim_of_a_pool_the_rules_do_not_have_is_not_sealed() -> None:
    assert seal_for_registration({POOL_LABEL: "later"}, (), POOLS) is None


def test_a_label_rule_on_a_label_the_kubelet_may_change_is_refused_with_the_safe_form() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - name: ci
            match: {labels: {example.com/dedicated: ci}}
            taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        """
    )
    assert problem.startswith("rules.yaml:5:22: labelTaints[0].match.labels")
    assert "node-restriction.kubernetes.io/dedicated" in problem
    assert "labelTaints[0].nodeMayLift: true" in problem


def test_a_label_rule_reading_a_node_writable_key_in_an_expression_is_refused_too() -> None:
    [problem] = problems_of(
        """\
        labelTaints:
          - name: gpu
            match:
              labels: {node-restriction.kubernetes.io/gpu: "yes"}
              expressions: [{key: example.com/shared, operator: DoesNotExist}]
            taint: {key: example.com/gpu, effect: NoSchedule}
        """
    )
    assert "labelTaints[0].match.expressions[0].key" in problem


def test_a_label_rule_on_labels_no_kubelet_may_set_needs_no_opt_in() -> None:
    parse_rules(
        HEADER
        + "labelTaints:\n  - name: tenant\n"
        + "    match: {labels: {node-restriction.kubernetes.io/tenant: a,"
        + ' node-role.kubernetes.io/x: ""}}\n'
        + "    taint: {key: example.com/tenant, effect: NoSchedule}\n",
        "rules.yaml",
    )


def test_the_registration_pool_label_is_refused_in_a_pools_labels() -> None:
    [problem] = problems_of(
        f"""\
        nodePools:
          - name: ci
            provider: oke
            size: 1
            reconcilerLabels: {{{TRUSTED_POOL_LABEL}: ci}}
        """
    )
    assert "set when the node registers" in problem
