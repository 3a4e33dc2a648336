"""Writes fenced by the API server: the token every write of the leader carries, the admission
policy that refuses a token that is not the Lease's current one, and how a refusal is read. Pure.

A leader's fence (reconciler/kit/fence.py) is checked when a write starts; a process paused
between that check and the send (GC, a frozen container, a live-migrated VM) sends it whenever
it runs again, however long ago its Lease passed to another replica. Only the API server can
check a write where it lands. So each write nodegate's leader makes to a Node or to one of its
own ConfigMaps carries its term of leadership, `<holderIdentity>/<leaseTransitions>` of the Lease
as it last renewed it, in the `FENCE_ANNOTATION`; a ValidatingAdmissionPolicy whose param is that
Lease refuses a write by nodegate's ServiceAccount whose term is not the Lease's current one
(a DELETE: the term the object was last marked with, so a delete is preceded by a mark). A write
carrying no term at all is let through: only a replica older than the fence writes one (an
upgrade under way), and refusing it would leave no writer until the rollout ends.

The policy must never cost the cluster anything else: its param lookup runs before its match
conditions, for every request its rules match, whoever sends it, so a missing Lease is `Allow`
(every write passes until the leader makes it again: fenced on the client only meanwhile) and
a configuration error is `Ignore`; ConfigMaps are matched in the reconciler's namespace only.

A term is unique: `leaseTransitions` grows by one whenever the holder changes (client-go's
rule, a released Lease included), each process has its own identity, and a process's first
acquisition is a transition even if the Lease names its identity already. A later term has the
larger number, so a refusal says which side is behind: the Lease's term is later (this
process was deposed: it stops writing) or earlier (the API server's view of the Lease has not
caught up with this process's takeover yet, a few milliseconds: retry). The numbers restart if
the Lease is deleted, so a refusal is judged against the Lease itself, read then, and its
numbers decide only when it cannot be read (reconciler/nodes/fence/fenced_api.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from nodegate.core.rules.node_marks import FENCE_ANNOTATION

REFUSAL_MARK = "nodegate-fence"
"""Starts the policy's refusal message (`policy_validation`), which `refusal_term` reads back."""


@dataclass(frozen=True)
class Term:
    """One leadership of the Lease: who held it, at which `leaseTransitions`."""

    holder: str
    transitions: int

    def token(self) -> str:
        return f"{self.holder}/{self.transitions}"


def stamped(metadata: dict[str, Any] | None, term: Term) -> dict[str, Any]:
    """`metadata` with the term's token in its annotations (a copy); a write that removes the
    token on purpose (`UNFENCED`) is left so."""
    metadata = dict(metadata or {})
    annotations = metadata.get("annotations") or {}
    if FENCE_ANNOTATION in annotations and annotations[FENCE_ANNOTATION] is None:
        return metadata
    metadata["annotations"] = {**annotations, FENCE_ANNOTATION: term.token()}
    return metadata


UNFENCED = ((FENCE_ANNOTATION, None),)
"""The annotation change of a Node write that must not grow the node's annotations (its taints
written alone because the node filled them to the size limit): it drops the token, so the
policy sees none and lets it through, fenced on the client only."""


def refusal_term(body: str, policy: str) -> Term | None:
    """The Lease's term named by the fence policy `policy` refusing a write, read from the API
    server's answer (a Status); None for any other answer. Only the message's fixed head is
    trusted: the API server writes it, and names the policy and binding (both `policy`), so
    text a node planted in its own annotations, echoed by some other policy, is never taken
    for the fence's word."""
    try:
        status = json.loads(body)
    except ValueError:
        return None
    message = status.get("message") if isinstance(status, dict) else None
    if not isinstance(message, str):
        return None
    head = f"ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: "
    found = re.fullmatch(
        r'[a-z]+ "[^"]*" is forbidden: '
        + re.escape(head + REFUSAL_MARK)
        + r" lease=(\S*)/(\d+) write=.*",
        message,
        flags=re.DOTALL,
    )
    return Term(found.group(1), int(found.group(2))) if found else None


def deposed(mine: Term, leases: Term) -> bool:
    """Whether a refusal naming the Lease's term `leases` means this term is over (else the API
    server's view of the Lease lags this process's takeover). Equal numbers with another holder:
    the Lease was released at this number (only its holder releases it)."""
    return leases.transitions > mine.transitions or (
        leases.transitions == mine.transitions and leases.holder != mine.holder
    )


# --- the policy's CEL: what the API server checks -------------------------------------------

_WRITTEN = "request.operation == 'DELETE' ? oldObject : object"
_CARRIED = (
    "has(variables.written.metadata.annotations) && "
    f"'{FENCE_ANNOTATION}' in variables.written.metadata.annotations ? "
    f"variables.written.metadata.annotations['{FENCE_ANNOTATION}'] : ''"
)
_CURRENT = (
    "(has(params.spec.holderIdentity) ? params.spec.holderIdentity : '') + '/' + "
    "string(has(params.spec.leaseTransitions) ? params.spec.leaseTransitions : 0)"
)


LEASE_KIND = ("coordination.k8s.io/v1", "Lease")
"""The policy's param: the reconciler's leader Lease."""


def policy_variables() -> list[dict[str, str]]:
    """The policy's variables: the object written (or deleted), the term it carries, the
    Lease's current term."""
    return [
        {"name": "written", "expression": _WRITTEN},
        {"name": "carried", "expression": _CARRIED},
        {"name": "current", "expression": _CURRENT},
    ]


def policy_validation(lease_namespace: str, lease_name: str) -> dict[str, str]:
    """The one validation: the carried term is the current one; the refusal names both."""
    return {
        "expression": "variables.carried == '' || variables.carried == variables.current",
        "messageExpression": (
            f"'{REFUSAL_MARK} lease=' + variables.current + ' write=' + variables.carried + "
            f"' (a write by a replica that no longer leads Lease {lease_namespace}/{lease_name})'"
        ),
        "reason": "Forbidden",
    }


def writer_condition(username: str) -> str:
    """The policy's match condition: only requests of the reconciler's own identity."""
    return f"request.userInfo.username == '{username}'"


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


# --- whether the API server fences this replica's writes ---------------------------------------


@dataclass(frozen=True)
class ServerFence:
    """What the installed policy does for this replica: `enforced`, or why not."""

    enforced: bool
    why: str


def server_fence(
    policy: dict[str, Any] | None,
    binding: dict[str, Any] | None,
    lease_namespace: str,
    lease_name: str,
    username: str | None,
) -> ServerFence:
    """Whether the policy and binding as read fence this replica's writes on its Lease. Only
    what can be told from the objects is checked; the e2e tests show the policy refusing."""
    if policy is None:
        return ServerFence(False, "the fence policy is not installed")
    if binding is None:
        return ServerFence(False, "the fence policy has no binding")
    spec, bound = policy.get("spec") or {}, binding.get("spec") or {}
    param_kind = spec.get("paramKind") or {}
    param = bound.get("paramRef") or {}
    if (param_kind.get("apiVersion"), param_kind.get("kind")) != LEASE_KIND:
        return ServerFence(False, "the fence policy's param is not a Lease")
    if (param.get("namespace"), param.get("name")) != (lease_namespace, lease_name):
        return ServerFence(
            False,
            f"the fence binding's Lease is {param.get('namespace')}/{param.get('name')}, "
            f"not this replica's {lease_namespace}/{lease_name}",
        )
    if "Deny" not in (bound.get("validationActions") or []):
        return ServerFence(False, "the fence binding does not deny (validationActions)")
    if bound.get("policyName") != (policy.get("metadata") or {}).get("name"):
        return ServerFence(False, "the fence binding names another policy")
    conditions = [c.get("expression", "") for c in spec.get("matchConditions") or []]
    if username is not None and writer_condition(username) not in conditions:
        return ServerFence(False, f"the fence policy does not match this replica's user {username}")
    return ServerFence(True, f"policy {(policy.get('metadata') or {}).get('name')}")
