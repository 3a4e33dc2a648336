"""The fence policy, when `leaderElection.serverFence` is on: a ValidatingAdmissionPolicy whose
param is the reconciler's leader Lease, refusing a write by the reconciler's ServiceAccount to a
Node (its status included) or to a ConfigMap of its namespace that carries another term than the
Lease's current one (core/decisions/fencing.py says why, and why a missing Lease allows and an
error ignores: the policy must never stand in anyone else's way), and its binding.
Cluster-scoped, so named after the installation like its ClusterRole; the reconciler may read
both, to say at start whether its writes are fenced by the API server.
"""

from __future__ import annotations

from typing import Any

from nodegate.core.decisions.fencing import (
    LEASE_KIND,
    policy_validation,
    policy_variables,
    service_account_user,
    writer_condition,
)
from nodegate.core.objects.installation import fence_policy_name
from nodegate.manifests.rbac import policy_rule
from nodegate.manifests.settings import DeploySettings, Manifest, PolicyRule

GROUP = "admissionregistration.k8s.io"


def _resources(operations: list[str], resource: str) -> dict[str, Any]:
    return {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": [resource],
    }


def objects(settings: DeploySettings) -> list[Manifest]:
    """The policy and its binding (none when the server fence is off)."""
    if not settings.leader_election.server_fence:
        return []
    name, lease = fence_policy_name(settings.name), settings.leader_election.lease_name
    api_version, kind = LEASE_KIND
    user = service_account_user(settings.namespace, settings.name)
    policy: Manifest = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": settings.labels},
        "spec": {
            "failurePolicy": "Ignore",
            "paramKind": {"apiVersion": api_version, "kind": kind},
            "matchConstraints": {
                # Namespaced objects in the reconciler's namespace only (Nodes have none).
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": settings.namespace}
                },
                "resourceRules": [
                    # Node status too: the OCI conditions are written there, stamped the same.
                    _resources(["UPDATE"], "nodes"),
                    _resources(["UPDATE"], "nodes/status"),
                    _resources(["CREATE", "UPDATE", "DELETE"], "configmaps"),
                ],
            },
            "matchConditions": [{"name": "reconciler", "expression": writer_condition(user)}],
            "variables": policy_variables(),
            "validations": [policy_validation(settings.namespace, lease)],
        },
    }
    binding: Manifest = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": settings.labels},
        "spec": {
            "policyName": name,
            "paramRef": {
                "name": lease,
                "namespace": settings.namespace,
                "parameterNotFoundAction": "Allow",
            },
            "validationActions": ["Deny"],
        },
    }
    return [policy, binding]


def cluster_rules(settings: DeploySettings) -> list[PolicyRule]:
    """Read the policy and its binding, by name (whether the API server fences the writes)."""
    if not settings.leader_election.server_fence:
        return []
    names = [fence_policy_name(settings.name)]
    return [
        policy_rule(GROUP, resource, ["get"], names)
        for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
    ]


def reconcile_settings(settings: DeploySettings) -> dict[str, Any]:
    """What the reconciler is told: the policy's name (empty: none is shipped)."""
    fenced = settings.leader_election.server_fence
    return {"fence_policy": fence_policy_name(settings.name) if fenced else ""}
