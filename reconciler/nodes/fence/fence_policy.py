"""Whether the API server fences this leader's writes: the fence policy and its binding as
installed, and who this replica is to the API server, read once when it starts to lead; what
they mean is decided by `core.decisions.fencing.server_fence`."""

from __future__ import annotations

import logging

from kubernetes import client

from nodegate.core.decisions.fencing import ServerFence, server_fence
from nodegate.reconciler.kit.client import CONNECT_TIMEOUT_SECONDS, Direct, call, json_body
from nodegate.reconciler.kit.errors import KubeError, NotFoundError
from nodegate.reconciler.kit.kube import RawObject, path_of
from nodegate.reconciler.settings import LeaderElectionSettings

log = logging.getLogger("nodegate.fence")
TIMEOUT = (CONNECT_TIMEOUT_SECONDS, 10.0)


def _read(direct: Direct, path: str, review: RawObject | None = None) -> RawObject | None:
    """The object at `path` (None if there is none), or the answer to `review` POSTed there."""
    try:
        method = "GET" if review is None else "POST"
        response = call(direct.request, method, path, TIMEOUT, body=review)
    except NotFoundError:
        return None
    return json_body(response, TIMEOUT)


def _username(direct: Direct) -> str | None:
    """Who the API server takes this replica for (a SelfSubjectReview); None if it cannot say."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = _read(direct, path_of("SelfSubjectReview"), review)
    except (KubeError, ValueError):
        return None
    user = ((answer or {}).get("status") or {}).get("userInfo") or {}
    return str(user["username"]) if user.get("username") else None


def _installed(api_client: client.ApiClient, lease: LeaderElectionSettings) -> ServerFence:
    if not lease.fence_policy:
        return ServerFence(False, "no fence policy is configured (--fence-policy is empty)")
    direct = Direct(api_client)  # not the generated classes (why: `Direct`)
    try:
        policy = _read(direct, path_of("ValidatingAdmissionPolicy", name=lease.fence_policy))
        binding = _read(
            direct, path_of("ValidatingAdmissionPolicyBinding", name=lease.fence_policy)
        )
    except (KubeError, ValueError) as err:
        return ServerFence(False, f"the fence policy could not be read ({err})")
    user = _username(direct)
    return server_fence(policy, binding, lease.lease_namespace, lease.lease_name, user)


def check_server_fence(api_client: client.ApiClient, lease: LeaderElectionSettings) -> ServerFence:
    """The fence this replica's writes get from the API server, said in the log: enforced
    (INFO), or fenced on the client only, and why (WARNING)."""
    fence = _installed(api_client, lease)
    where = {"policy": lease.fence_policy, "lease": f"{lease.lease_namespace}/{lease.lease_name}"}
    if fence.enforced:
        log.info(
            "writes are fenced by the API server: a write made under a term of leadership "
            "that is over is refused where it lands",
            extra=where,
        )
    else:
        log.warning(
            "writes are fenced on the client only: a process paused between its fence check "
            "and its send can still land one write after another replica took over "
            f"({fence.why}; docs/reconciler.md, 'One writer')",
            extra=where,
        )
    return fence
