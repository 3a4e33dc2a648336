"""The names the shipped manifests give the reconciler's own objects by default: one declaration
each, for the manifest builder, the reconciler's settings and the day-2 CLI's options (the
rest of what nodegate says about those objects is `nodegate.core.objects.installation`); and
the annotation that confirms held rules, which core's rules floor names too."""

from __future__ import annotations

DEFAULT_NAMESPACE = "nodegate-system"
"""The reconciler's namespace: its rules ConfigMap, Lease and records."""
DEFAULT_NAME = "nodegate-reconciler"
"""The Deployment, ServiceAccount and RBAC objects; also the leader Lease's default name."""
DEFAULT_LEASE = DEFAULT_NAME
DEFAULT_RULES_CONFIGMAP = "nodegate-rules"
CONFIRM_ANNOTATION = "nodegate.dev/confirm-rules"
"""On the rules ConfigMap: the digest of a held rules text to apply anyway (on the NodeRules CRD
for rules read from objects: `core.rules.merge.confirm_on_crd`)."""
