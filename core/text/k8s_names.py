"""Kubernetes' own syntax and ownership rules for label and taint keys/values.

The API server and kubelet refuse what breaks these rules, so nodegate refuses it first, at
validation time, where the error can still name the line in the rules file.
Sources: apimachinery `validation.IsQualifiedName` / `IsValidLabelValue`, kubelet
`IsKubeletLabel`, the NodeRestriction admission plugin.
"""

from __future__ import annotations

import re

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
DNS_LABEL_PATTERN = rf"^{_DNS1123_LABEL}$"
"""A DNS label (RFC 1123): a rule's, a namespace's name. At most 63 characters."""
DNS_SUBDOMAIN_PATTERN = _DNS1123_SUBDOMAIN_RE.pattern
"""DNS labels joined by '.': most object names. At most 253 characters."""
CSI_DRIVER_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A CSI driver's name (e.g. ebs.csi.aws.com). At most 63 characters."""
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

NAME_MAX = 63
PREFIX_MAX = 253
LABEL_VALUE_MAX = 63


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name (label or taint key), or None if it is."""
    if not key:
        return "must not be empty"
    if key.count("/") > 1:
        prefix, _, rest = key.partition("/")
        return (
            f"a key has at most one '/', between a DNS prefix and the name (found "
            f"{key.count('/')}): e.g. '{prefix}/{rest.replace('/', '-')}'"
        )
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix before '/' must not be empty"
    if prefix:
        if len(prefix) > PREFIX_MAX:
            return f"prefix '{prefix}' is longer than {PREFIX_MAX} characters"
        if not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return (
                f"prefix '{prefix}' must be a DNS subdomain: lower-case letters, digits, '-' "
                "and '.', starting and ending with a letter or digit (e.g. 'example.com')"
            )
    if not name:
        return "name part must not be empty"
    if len(name) > NAME_MAX:
        return f"name part '{name}' is longer than {NAME_MAX} characters"
    if not _NAME_RE.match(name):
        return (
            f"name part '{name}' may contain only letters, digits, '-', '_' and '.', and must "
            "start and end with a letter or digit"
        )
    return None


_NAME_FORMS: dict[str, tuple[str, str]] = {
    DNS_LABEL_PATTERN: (
        "a DNS label: lower-case letters, digits and '-', starting and ending with a letter or "
        "digit",
        "-",
    ),
    DNS_SUBDOMAIN_PATTERN: (
        "a DNS subdomain: lower-case letters, digits, '-' and '.', each '.'-separated part "
        "starting and ending with a letter or digit",
        "-.",
    ),
    CSI_DRIVER_PATTERN: (
        "a CSI driver name: lower-case letters, digits, '-' and '.', starting and ending with a "
        "letter or digit",
        "-.",
    ),
}
"""The name forms above, in words, and the characters each allows besides [a-z0-9]."""


def name_form_problem(value: str, pattern: str) -> str | None:
    """Why `value` does not have the name form `pattern` (one of the patterns above), in words,
    with the nearest name of that form as the fix; None for any other pattern."""
    form = _NAME_FORMS.get(pattern)
    if form is None:
        return None
    described, allowed = form
    nearest = re.sub(f"[^a-z0-9{re.escape(allowed)}]+", "-", value.lower())
    nearest = re.sub(r"-*\.[-.]*", ".", nearest).strip("-.")
    name, _, rules = described.partition(": ")
    fix = f": write e.g. '{nearest}'" if nearest and re.match(pattern, nearest) else ""
    return f"'{value}' is not {name} ({rules}){fix}"


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value (taint values follow the same rule)."""
    if len(value) > LABEL_VALUE_MAX:
        return f"'{value}' is longer than {LABEL_VALUE_MAX} characters"
    if not _LABEL_VALUE_RE.match(value):
        return (
            f"'{value}' may contain only letters, digits, '-', '_' and '.', and must start "
            "and end with a letter or digit (or be empty)"
        )
    return None


def key_in_domain(key: str, domain: str) -> bool:
    """Whether `key`'s namespace (its DNS prefix) is `domain` or one of its subdomains."""
    namespace = key.rpartition("/")[0]
    return namespace == domain or namespace.endswith("." + domain)


# Taint keys other controllers own. A rule on one of these would fight that controller
# (and the reconciler must never remove them), so validation refuses them.
RESERVED_TAINT_DOMAINS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io", "the node lifecycle controller and kubelet"),
    ("node.cloudprovider.kubernetes.io", "the cloud controller manager"),
    ("node-role.kubernetes.io", "kubeadm / the platform (control-plane nodes)"),
    ("karpenter.sh", "Karpenter"),
    ("karpenter.k8s.aws", "Karpenter"),
    ("cluster-autoscaler.kubernetes.io", "the cluster autoscaler"),
    ("kubernetes.azure.com", "AKS"),
    ("oci.oraclecloud.com", "OKE"),
)
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
"""Non-graceful node shutdown: with this taint the pod GC force-deletes the node's pods and the
attach-detach controller force-detaches its volumes. Kubernetes applies it to no node itself: an
operator or an external controller must, and only once the node is really shut down."""

RESERVED_TAINT_KEYS: dict[str, str] = {
    "ToBeDeletedByClusterAutoscaler": "the cluster autoscaler",
    "DeletionCandidateOfClusterAutoscaler": "the cluster autoscaler",
    "CriticalAddonsOnly": "the platform (system node pools)",
    OUT_OF_SERVICE_TAINT: "the cluster operator (non-graceful node shutdown)",
}

CONDITION_RULE_TAINT_KEYS = frozenset({OUT_OF_SERVICE_TAINT})
"""Reserved keys a conditionTaints rule may apply, and no other rule: the node's conditions are
the only evidence that it is shut down. They stay reserved for the planner, so only a current
rule naming one may remove it (never a claim left by a deleted rule)."""


def taint_key_owner(key: str) -> str | None:
    """Who owns a reserved taint key, or None if any nodegate rule may use it."""
    return RESERVED_TAINT_KEYS.get(key) or next(
        (who for domain, who in RESERVED_TAINT_DOMAINS if key_in_domain(key, domain)), None
    )


# kubelet `IsKubeletLabel`: the only kubernetes.io / k8s.io labels a kubelet may set on itself.
_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")


def kubelet_may_set_label(key: str) -> bool:
    """Whether a kubelet may put this label on its own Node (`--node-labels`).

    The kubelet refuses to start with other kubernetes.io / k8s.io labels, and the
    NodeRestriction admission plugin refuses them on the Node object.
    """
    if key in _KUBELET_LABELS:
        return True
    if any(key_in_domain(key, allowed) for allowed in _KUBELET_LABEL_NAMESPACES):
        return True
    return not any(key_in_domain(key, domain) for domain in _RESTRICTED_LABEL_DOMAINS)


PLATFORM_LABEL_DOMAINS = (
    "kubernetes.io",
    "k8s.io",
    "kubernetes.azure.com",
    "oci.oraclecloud.com",
    "nodegate.dev",
)
"""Namespaces (with their subdomains) whose node labels the platform, the kubelet or nodegate
owns: never persisted across re-creation (node.kubernetes.io/instance-type would be wrong on a
replacement of another shape)."""


NODEGATE_DOMAIN = "nodegate.dev"
"""nodegate's own keys (its records and ownership annotation are `*nodegate.dev/*`)."""


def in_nodegate_domain(key: str) -> bool:
    """Whether a label or annotation key lies in nodegate's own namespace (or a subdomain)."""
    return key_in_domain(key, NODEGATE_DOMAIN)


def label_owned_by_platform(key: str) -> bool:
    return any(key_in_domain(key, domain) for domain in PLATFORM_LABEL_DOMAINS)


READINESS_TAINT_PREFIX = "readiness.k8s.io/"
"""node-readiness-controller's taint prefix (its CRD refuses any other key). nodegate may use
it (a migrated rule keeps its key), but never touches such a taint that no current rule of its
own names: the two can run side by side during a migration (docs/reconciler.md, Ownership)."""


def is_readiness_taint(key: str) -> bool:
    return key.startswith(READINESS_TAINT_PREFIX)
