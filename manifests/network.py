"""The optional NetworkPolicy around the reconciler's pods (`DeploySettings.network_policy`).

In: the `http` port (metrics and probes) and, with the webhook, the `webhook` port, from
anywhere (Prometheus and the API server have no address a policy can name portably; kubelet
probes come from the node, which CNIs let through). Out: TCP to the API server's ports only;
with OCI instance conditions, also DNS (53) and HTTPS (443) to the Compute endpoint, which a
policy cannot name by address either, and the auth's own: OKE's proxymux port (12250) for
workload identity, the metadata service (169.254.169.254, port 80) for instance principals.
The ports are named, so the policy follows the container's ports whatever their numbers.
"""

from __future__ import annotations

from typing import Any

from nodegate.manifests.settings import DeploySettings, Manifest


def network_policy(settings: DeploySettings) -> list[Manifest]:
    """The NetworkPolicy (none when it is off)."""
    policy = settings.network_policy
    if policy is None:
        return []
    ingress = [{"port": "http", "protocol": "TCP"}]
    if settings.webhook is not None:
        ingress.append({"port": "webhook", "protocol": "TCP"})
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": settings.name,
                "namespace": settings.namespace,
                "labels": settings.labels,
            },
            "spec": {
                "podSelector": {"matchLabels": settings.selector},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"ports": ingress}],
                "egress": [
                    {"ports": [{"port": p, "protocol": "TCP"} for p in policy.api_server_ports]},
                    *_oci_egress(settings),
                ],
            },
        }
    ]


WORKLOAD_IDENTITY_PORT = 12250
"""OKE's proxymux, where the SDK's workload identity signer gets its token (at the
`KUBERNETES_SERVICE_HOST` address: oci/auth/signers/resource_principals_signer.py)."""
INSTANCE_METADATA = "169.254.169.254/32"
"""The instance metadata service, plain HTTP, where instance principals get their certificate."""


def _oci_egress(settings: DeploySettings) -> list[dict[str, Any]]:
    """DNS and HTTPS out, for the OCI Compute endpoint and the auth service, and what each
    auth needs besides (none when OCI conditions are off)."""
    if settings.oci is None:
        return []
    dns = [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    # Both auths' ways out whichever is chosen: the chart templates one shape of policy for
    # every value of `oci.auth`.
    return [
        {"ports": [*dns, {"port": 443, "protocol": "TCP"}]},
        {"ports": [{"port": WORKLOAD_IDENTITY_PORT, "protocol": "TCP"}]},
        {
            "to": [{"ipBlock": {"cidr": INSTANCE_METADATA}}],
            "ports": [{"port": 80, "protocol": "TCP"}],
        },
    ]
