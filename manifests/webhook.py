"""The Node admission webhook's objects, when `DeploySettings.webhook` is set.

* a Service in front of every replica's webhook port (leader or not: admission needs no
  leadership, and the API server may call any ready replica);
* the MutatingWebhookConfiguration: Node CREATE only, `sideEffects: None`, the configured
  failurePolicy (Ignore by default), a small timeout, `reinvocationPolicy` IfNeeded. No
  namespaceSelector (Nodes are cluster-scoped) and no objectSelector (which nodes get what is
  the rules' `match`, decided by the webhook, so the configuration never changes with them);
* certificates, one of two ways: self-signed (an empty Secret the replicas fill and share, and
  RBAC to get/update that one Secret and get/patch that one configuration's caBundle), or
  cert-manager (a Certificate whose Secret the pods mount, and the CA injector's annotation on
  the configuration; then no Secret access at all).
"""

from __future__ import annotations

from typing import Any

from nodegate.core.rules.model import NodeRules
from nodegate.manifests.rbac import keeps_label_records, policy_rule
from nodegate.manifests.settings import DeploySettings, Manifest, PolicyRule

WEBHOOK_NAME = "nodes.nodegate.dev"
"""The webhook's name inside the configuration (a qualified name, as the API requires)."""
PATH = "/mutate-nodes"
SERVICE_PORT = 443
CERT_DIR = "/etc/nodegate/webhook-tls"
"""Where cert-manager's Secret is mounted (its tls.crt and tls.key)."""
CERT_VOLUME = "webhook-tls"


def service_name(settings: DeploySettings) -> str:
    return f"{settings.name}-webhook"


def tls_secret_name(settings: DeploySettings) -> str:
    return f"{settings.name}-webhook-tls"


def self_signed(settings: DeploySettings) -> bool:
    return settings.webhook is not None and settings.webhook.cert_manager is None


def cluster_rules(settings: DeploySettings) -> list[PolicyRule]:
    """Self-signed only: read and patch the caBundle of our one configuration."""
    if not self_signed(settings):
        return []
    # The configuration is cluster-scoped, so named after the installation like its ClusterRole.
    group, names = "admissionregistration.k8s.io", [settings.name]
    return [policy_rule(group, "mutatingwebhookconfigurations", ["get", "patch"], names)]


def namespace_rules(settings: DeploySettings, rules: NodeRules) -> list[PolicyRule]:
    """A persisted-label record is read by name at admission (its name derives from the new
    node's key, so RBAC cannot name it; the reconciler may already list every ConfigMap of its
    namespace for its records, so `get` reads nothing more). Self-signed: read and replace our
    one TLS Secret (created empty by the manifests: RBAC cannot restrict `create` by name)."""
    if settings.webhook is None:
        return []
    granted: list[PolicyRule] = []
    if keeps_label_records(rules, settings):
        granted.append(policy_rule("", "configmaps", ["get"]))
    if self_signed(settings):
        granted.append(policy_rule("", "secrets", ["get", "update"], [tls_secret_name(settings)]))
    return granted


def reconcile_settings(settings: DeploySettings) -> dict[str, Any] | None:
    """The reconciler's `webhook` settings (`nodegate.reconciler.settings.WebhookSettings`
    values) that serve this webhook; None when it is off."""
    if settings.webhook is None:
        return None
    chosen: dict[str, Any] = {"port": settings.webhook.port, "service": service_name(settings)}
    if self_signed(settings):
        chosen["configuration"] = settings.name
        chosen["tls_secret"] = tls_secret_name(settings)
    else:
        chosen["cert_dir"] = CERT_DIR
    return chosen


def container_ports(settings: DeploySettings) -> list[dict[str, Any]]:
    if settings.webhook is None:
        return []
    return [{"name": "webhook", "containerPort": settings.webhook.port, "protocol": "TCP"}]


def volumes(settings: DeploySettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container mounts): cert-manager's Secret, when it makes the certificate.
    Optional, so the pods start (and reconcile) before cert-manager has issued it."""
    if settings.webhook is None or self_signed(settings):
        return [], []
    secret = {"secretName": tls_secret_name(settings), "optional": True}
    return (
        [{"name": CERT_VOLUME, "secret": secret}],
        [{"name": CERT_VOLUME, "mountPath": CERT_DIR, "readOnly": True}],
    )


def mutating_webhook_configuration(settings: DeploySettings, labels: dict[str, str]) -> Manifest:
    webhook = settings.webhook
    assert webhook is not None
    metadata: dict[str, Any] = {"name": settings.name, "labels": labels}
    if webhook.cert_manager is not None:
        certificate = f"{settings.namespace}/{service_name(settings)}"
        metadata["annotations"] = {"cert-manager.io/inject-ca-from": certificate}
    service = {
        "name": service_name(settings),
        "namespace": settings.namespace,
        "path": PATH,
        "port": SERVICE_PORT,
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "clientConfig": {"service": service},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["nodes"],
                        "scope": "Cluster",
                    }
                ],
                "failurePolicy": webhook.failure_policy,
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": webhook.timeout_seconds,
                "admissionReviewVersions": ["v1"],
                "reinvocationPolicy": webhook.reinvocation_policy,
            }
        ],
    }


def objects(settings: DeploySettings) -> list[Manifest]:
    """Every webhook object, in apply order (none when the webhook is off)."""
    if settings.webhook is None:
        return []
    meta = {"namespace": settings.namespace, "labels": settings.labels}
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name(settings), **meta},
        "spec": {
            "type": "ClusterIP",
            "selector": settings.selector,
            "ports": [{"name": "https-webhook", "port": SERVICE_PORT, "targetPort": "webhook"}],
        },
    }
    issuer = settings.webhook.cert_manager
    certificate: Manifest
    if issuer is None:
        # Filled and rotated by the replicas; no `data` here, so re-applying keeps theirs.
        certificate = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": tls_secret_name(settings), **meta},
            "type": "Opaque",
        }
    else:
        service_dns = f"{service_name(settings)}.{settings.namespace}"
        certificate = {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": service_name(settings), **meta},
            "spec": {
                "secretName": tls_secret_name(settings),
                "dnsNames": [
                    service_name(settings),
                    service_dns,
                    f"{service_dns}.svc",
                    f"{service_dns}.svc.cluster.local",
                ],
                "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": "cert-manager.io"},
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            },
        }
    return [service, certificate, mutating_webhook_configuration(settings, settings.labels)]
