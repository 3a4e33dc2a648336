"""The fence token, how a refusal is read, and whether an installed policy fences a replica."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodegate.core.decisions.fencing import (
    REFUSAL_MARK,
    UNFENCED,
    Term,
    deposed,
    refusal_term,
    server_fence,
    stamped,
    writer_condition,
)
from nodegate.core.rules.node_marks import FENCE_ANNOTATION

USER = "system:serviceaccount:nodegate-system:nodegate-reconciler"


POLICY = "nodegate-reconciler-fence"


def answer(message: str) -> str:
    """The API server's answer to a refused write: a Status whose message says why."""
    return json.dumps({"kind": "Status", "code": 403, "reason": "Forbidden", "message": message})


def refusal(lease: str, write: str, policy: str = POLICY) -> str:
    """The fence policy's refusal, as kube-apiserver words it around its messageExpression."""
    return answer(
        f"nodes \"n1\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding "
        f"'{policy}' denied request: {REFUSAL_MARK} lease={lease} write={write} (a write by a "
        "replica that no longer leads Lease nodegate-system/nodegate-reconciler)"
    )


def test_a_term_is_its_holder_and_transitions() -> None:
    assert Term("pod-a-123", 4).token() == "pod-a-123/4"


def test_stamping_adds_the_token_and_keeps_every_other_annotation() -> None:
    metadata = {"resourceVersion": "7", "annotations": {"other": "x"}}

    result = stamped(metadata, Term("a", 1))

    assert result == {
        "resourceVersion": "7",
        "annotations": {"other": "x", FENCE_ANNOTATION: "a/1"},
    }
    assert metadata == {"resourceVersion": "7", "annotations": {"other": "x"}}  # not changed


def test_the_policys_refusal_names_the_leases_term() -> None:
    assert refusal_term(refusal("pod-b/5", "pod-a/4"), POLICY) == Term("pod-b", 5)


def test_a_holder_with_slashes_is_read_up_to_the_last_one() -> None:
    assert refusal_term(refusal("ns/pod-b/5", "pod-a/4"), POLICY) == Term("ns/pod-b", 5)


def test_a_released_lease_is_a_term_without_holder() -> None:
    assert refusal_term(refusal("/5", "pod-a/5"), POLICY) == Term("", 5)


def test_a_write_that_carried_no_term_is_read_too() -> None:
    assert refusal_term(refusal("pod-b/5", ""), POLICY) == Term("pod-b", 5)


def test_another_policys_refusal_is_not_the_fences() -> None:
    assert refusal_term(refusal("pod-b/5", "pod-a/4", policy="someone-else"), POLICY) is None


def test_fence_words_a_node_planted_in_another_policys_refusal_are_not_the_fences() -> None:
    """A kubelet may write its own Node's annotations; a policy that echoes one must not make
    the leader believe it was deposed."""
    echoed = answer(
        "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'vendor' with binding 'vendor' "
        f"denied request: annotation {REFUSAL_MARK} lease=evil/999999 write=x is not allowed"
    )

    assert refusal_term(echoed, POLICY) is None


def test_a_missing_param_and_other_refusals_are_not_the_fences() -> None:
    missing = answer(
        "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p' denied "
        "request: failed to configure binding: no params found for policy binding"
    )

    assert refusal_term(missing, POLICY) is None
    assert refusal_term(answer('nodes "n1" is forbidden: User cannot patch'), POLICY) is None
    assert refusal_term("not json", POLICY) is None


@pytest.mark.parametrize(
    ("mine", "leases", "over"),
    [
        (Term("a", 4), Term("b", 5), True),  # another replica took over
        (Term("a", 4), Term("", 4), True),  # released at our number: only we release it
        (Term("b", 5), Term("a", 4), False),  # the API server has not seen our takeover yet
    ],
    ids=["taken-over", "released", "view-behind"],
)
def test_a_refusal_means_the_term_is_over_only_if_the_lease_moved_past_it(
    mine: Term, leases: Term, over: bool
) -> None:
    assert deposed(mine, leases) is over


def installed(**changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    policy: dict[str, Any] = {
        "metadata": {"name": "fence"},
        "spec": {
            "paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"},
            "matchConditions": [{"name": "reconciler", "expression": writer_condition(USER)}],
        },
    }
    binding: dict[str, Any] = {
        "metadata": {"name": "fence"},
        "spec": {
            "policyName": "fence",
            "paramRef": {"name": "lease", "namespace": "ns"},
            "validationActions": ["Deny"],
        },
    }
    binding["spec"].update(changes)
    return policy, binding


def test_a_policy_bound_to_this_replicas_lease_and_user_fences_it() -> None:
    policy, binding = installed()

    assert server_fence(policy, binding, "ns", "lease", USER).enforced


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"paramRef": {"name": "other", "namespace": "ns"}}, "not this replica's ns/lease"),
        ({"validationActions": ["Warn"]}, "does not deny"),
        ({"policyName": "another"}, "names another policy"),
    ],
)
def test_a_binding_that_does_not_refuse_this_replicas_stale_writes_is_said_why(
    change: dict[str, Any], why: str
) -> None:
    policy, binding = installed(**change)

    fence = server_fence(policy, binding, "ns", "lease", USER)

    assert not fence.enforced
    assert why in fence.why


def test_a_policy_for_another_service_account_does_not_fence_this_replica() -> None:
    policy, binding = installed()

    fence = server_fence(policy, binding, "ns", "lease", "system:serviceaccount:x:y")

    assert not fence.enforced
    assert "does not match this replica's user" in fence.why


def test_no_policy_or_no_binding_is_client_side_fencing_only() -> None:
    policy, _ = installed()

    assert server_fence(None, None, "ns", "lease", USER).why == "the fence policy is not installed"
    assert server_fence(policy, None, "ns", "lease", USER).why == "the fence policy has no binding"


def test_a_write_that_drops_the_token_on_purpose_is_left_without_one() -> None:
    metadata = {"annotations": dict(UNFENCED)}

    assert stamped(metadata, Term("a", 1)) == {"annotations": {FENCE_ANNOTATION: None}}
