"""The container's command-line flags, from one typed place.

Every flag the Deployment passes to `nodegate reconcile` is a field here, so adding a flag is
adding a field (the flag name is the field name in kebab case), and a unit test parses the
result with the real CLI so a misspelt flag fails the build, not the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, kw_only=True)
class ReconcileFlags:
    """`nodegate reconcile` flags; None leaves a flag at the CLI's default."""

    rules_configmap: str
    """`namespace/name` of the rules ConfigMap, watched and hot-reloaded."""
    lease_namespace: str
    """Namespace of the leader Lease (the reconciler's own)."""
    lease_name: str
    """Name of the leader Lease."""
    http_port: int
    """Port of /healthz, /readyz and /metrics."""
    rules_key: str | None = None
    """Key of the rules YAML in the ConfigMap; None: the CLI's default ('rules.yaml')."""
    webhook_port: int | None = None
    """Serve the Node admission webhook on this port; None: not served."""
    webhook_service: str | None = None
    """The webhook's Service name (its certificate's DNS names)."""
    webhook_configuration: str | None = None
    """MutatingWebhookConfiguration whose caBundle the replicas keep (self-signed)."""
    webhook_tls_secret: str | None = None
    """Secret with the replicas' shared CA and certificate (self-signed)."""
    webhook_cert_dir: str | None = None
    """Directory of a mounted tls.crt/tls.key (cert-manager)."""

    def argv(self) -> list[str]:
        """The flags in field order, as `--flag=value` (booleans as `--flag` / `--no-flag`)."""
        argv: list[str] = []
        for field in fields(self):
            value = getattr(self, field.name)
            flag = "--" + field.name.replace("_", "-")
            if value is None:
                continue
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + flag[2:])
            else:
                argv.append(f"{flag}={value}")
        return argv
