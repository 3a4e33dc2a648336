"""The fence token, how a refusal is read, and whether an installed policy fences a replica."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.core.fencing import (
    FENCE_ANNOTATION,
    REFUSAL_MARK,
    UNSEEN,
    Term,
    deposed,
    lease_term_in,
    server_fence,
    stamped,
    writer_condition,
)

USER = "system:serviceaccount:nodegate-system:nodegate-reconciler"


def refusal(lease: str, write: str) -> str:
    """A refusal as kube-apiserver words it around the policy's messageExpression."""
    return (
        '403 Forbidden: {"message":"nodes \\"n1\\" is forbidden: ValidatingAdmissionPolicy '
        "'nodegate-reconciler-fence' with binding 'nodegate-reconciler-fence' denied request: "
        f"{REFUSAL_MARK} lease={lease} write={write} (a write by a replica that no longer leads "
        'Lease nodegate-system/nodegate-reconciler)"}'
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
    assert lease_term_in(refusal("pod-b/5", "pod-a/4")) == Term("pod-b", 5)


def test_a_holder_with_slashes_is_read_up_to_the_last_one() -> None:
    assert lease_term_in(refusal("ns/pod-b/5", "pod-a/4")) == Term("ns/pod-b", 5)


def test_a_released_lease_is_a_term_without_holder() -> None:
    assert lease_term_in(refusal("/5", "pod-a/5")) == Term("", 5)


def test_a_lease_the_api_server_has_not_seen_is_unseen() -> None:
    message = (
        "422 Unprocessable Entity: ValidatingAdmissionPolicy 'p' with binding 'p' denied "
        "request: failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction"
    )

    assert lease_term_in(message) is UNSEEN


def test_any_other_refusal_is_not_the_fences() -> None:
    assert lease_term_in('403 Forbidden: nodes "n1" is forbidden: User cannot patch') is None


@pytest.mark.parametrize(
    ("mine", "leases", "over"),
    [
        (Term("a", 4), Term("b", 5), True),  # another replica took over
        (Term("a", 4), Term("", 4), True),  # released at our number: only we release it
        (Term("b", 5), Term("a", 4), False),  # the API server has not seen our takeover yet
        (Term("b", 5), UNSEEN, False),  # nor the Lease at all
    ],
    ids=["taken-over", "released", "view-behind", "lease-unseen"],
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
