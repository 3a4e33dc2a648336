"""The names of the reconciler's own objects, as the shipped manifests make them by default:
one declaration each, for the manifest builder, the reconciler's settings and the day-2 CLI.
Pure."""

from __future__ import annotations

DEFAULT_NAMESPACE = "nodegate-system"
"""The reconciler's namespace: its rules ConfigMap, Lease and records."""
DEFAULT_NAME = "nodegate-reconciler"
"""The Deployment, ServiceAccount and RBAC objects; also the leader Lease's default name."""
DEFAULT_LEASE = DEFAULT_NAME
DEFAULT_RULES_CONFIGMAP = "nodegate-rules"
RULES_KEY = "rules.yaml"
"""Key of the rules text in the rules ConfigMap (and in the status record)."""
QUARANTINE_INFIX = "-quarantined-"
"""An unreadable record's copy is named `<record><infix><stamp>`."""


def quarantine_name(record: str, stamp: str) -> str:
    """The name of an unreadable record's copy (at most 253 characters, as the API allows)."""
    return f"{record}{QUARANTINE_INFIX}{stamp}"[:253]


def is_quarantine_of(name: str, record: str) -> bool:
    """Whether `name` is a quarantined copy of the record named `record`."""
    return name.startswith(f"{record}{QUARANTINE_INFIX}")
