"""What the node autoscalers in front of a pool know about startup taints, as data.

A startup gate works only if the autoscaler that adds the pool's nodes knows the taint is
temporary; otherwise it reads a gated node as capacity the pending pod cannot use and adds
another node, and a pool at zero never scales up at all. These are the upstream rules nodegate
checks gates against (sources in docs/gates.md):

* cluster-autoscaler (`cluster-autoscaler/utils/taints/taints.go`): a taint is a startup taint
  when its *key* starts with `startup-taint.cluster-autoscaler.kubernetes.io/` (CA >= 1.29) or
  the deprecated `ignore-taint.cluster-autoscaler.kubernetes.io/` (CA >= 1.18), is named by
  `--startup-taint` / `--ignore-taint`, or starts with a `--startup-taint-prefix` (CA >= 1.36).
  `status-taint.` keys mean "ready but unusable", which is wrong for a gate. A node still
  carrying a startup taint after `--max-node-startup-time` (15 minutes) counts as unready.
  cluster-autoscaler reads no `readiness.k8s.io/` key (node-readiness-controller's) as a startup
  taint unless it runs with `--startup-taint-prefix=readiness.k8s.io/` (or names the key).
* Karpenter: a gate must be in the NodePool's `startupTaints`, matched by key and effect; from
  Karpenter v1.13.0 a `readiness.k8s.io/` key is a known ephemeral taint without being listed
  (kubernetes-sigs/karpenter#3025). A provider is only as new as the Karpenter it is built on:
  oracle/karpenter-provider-oci v1.0.0 is built on v1.6.2.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

STARTUP_TAINT_PREFIX: Final = "startup-taint.cluster-autoscaler.kubernetes.io/"
IGNORE_TAINT_PREFIX: Final = "ignore-taint.cluster-autoscaler.kubernetes.io/"
STATUS_TAINT_PREFIX: Final = "status-taint.cluster-autoscaler.kubernetes.io/"
GATE_PREFIXES: Final = (STARTUP_TAINT_PREFIX, IGNORE_TAINT_PREFIX)
"""Key prefixes cluster-autoscaler reads as startup taints with no flag: the only way on
managed autoscalers (OKE add-on, AKS), which expose no `--startup-taint`."""

Version = tuple[int, int]
"""A cluster-autoscaler's or Karpenter's (major, minor): every boundary nodegate knows is a
minor release (x.y.0)."""

STARTUP_PREFIX_SINCE: Final[Version] = (1, 29)
"""kubernetes/autoscaler#6132 added `startup-taint.` (and `--startup-taint`); CA 1.29."""
IGNORE_PREFIX_SINCE: Final[Version] = (1, 18)
"""kubernetes/autoscaler#2733 added the `ignore-taint.` prefix; CA 1.18."""
STARTUP_TAINT_PREFIX_FLAG_SINCE: Final[Version] = (1, 36)
"""kubernetes/autoscaler#9296 added `--startup-taint-prefix`; CA 1.36."""

KARPENTER_NRC_PREFIX_SINCE: Final[Version] = (1, 13)
"""kubernetes-sigs/karpenter#3025 (in v1.13.0, not in v1.12.1): `KnownEphemeralTaintKeyPrefixes =
["readiness.k8s.io/"]` in pkg/scheduling/taints.go. `IsKnownEphemeralTaint` is read by
`KnownEphemeralTaintsRemoved` (nodeclaim/lifecycle/initialization.go: the node is not
initialized while such a taint is on it) and `StateNode.Taints` (state/statenode.go: ignored
for scheduling while the node is uninitialized), as a `startupTaints` entry is."""
KPO_KARPENTER_VERSION: Final[Version] = (1, 6)
"""oracle/karpenter-provider-oci v1.0.0 (its only release; go.mod: sigs.k8s.io/karpenter v1.6.2)."""

OCI_NODE_CLASS_GROUP: Final = "oci.oraclecloud.com"
"""The API group of karpenter-provider-oci's OCINodeClass: a NodePool launching OKE nodes."""
OKE_PREEMPTIBLE_TAINT_KEY: Final = "oci.oraclecloud.com/oke-is-preemptible"
OKE_PREEMPTIBLE_TAINT_VALUE: Final = "present"
OKE_PREEMPTIBLE_TAINT_EFFECT: Final = "NoSchedule"
"""karpenter-provider-oci v1.0.0 offers `spot` (OCI preemptible) shapes only when the NodePool's
`spec.template.spec.taints` hold this key with effect NoSchedule (`checkTaintExists` in
pkg/providers/instancetype/provider.go, fed `np.Spec.Template.Spec.Taints`, so not
`startupTaints`; the value is not compared). Its docs/guide/faqs.md: "If this taint is not
configured on the NodePool, Karpenter will not offer spot compute shapes", with the value
`present`; OKE puts the same taint on every preemptible node it bootstraps."""
CAPACITY_TYPE_LABEL: Final = "karpenter.sh/capacity-type"
CAPACITY_TYPES: Final = ("on-demand", "spot", "reserved")
"""Karpenter's capacity types; karpenter-provider-oci maps `spot` to OCI preemptible
instances (docs/guide/advanced-use-cases.md, scheduling-labels.md): there is no `preemptible`."""

CA_STARTUP_WINDOW: Final = timedelta(minutes=15)
"""cluster-autoscaler's `MaxNodeStartupTime` (a constant; from CA 1.35 the
`--max-node-startup-time` default, overridable per node group): a node still gated this long
after its creation is unready to it (`clusterstate.go: updateReadinessStats`)."""
CA_OK_TOTAL_UNREADY_COUNT: Final = 3
CA_MAX_TOTAL_UNREADY_PERCENTAGE: Final = 45
"""With more unready nodes than both (`--ok-total-unready-count`,
`--max-total-unready-percentage`), cluster-autoscaler halts cluster-wide."""

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?$")


def parse_version(text: str) -> Version | None:
    """'1.31', '1.31.2' or 'v1.31.2' as (1, 31); None if it is not such a version."""
    found = _VERSION.match(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def karpenter_knows_nrc_prefix(version: Version | None) -> bool:
    """Whether this Karpenter treats `readiness.k8s.io/` keys as startup taints unlisted; an
    unknown version does not (a provider may be built on an old Karpenter, as Oracle's is)."""
    return version is not None and version >= KARPENTER_NRC_PREFIX_SINCE


def is_ca_gate_key(key: str) -> bool:
    """Whether the key carries one of the prefixes cluster-autoscaler treats as a startup
    taint without any flag (so a gate may use cluster-autoscaler's reserved domain)."""
    return key.startswith(GATE_PREFIXES)


def renamed_key(key: str, version: Version | None) -> str:
    """The gate key with the startup prefix a cluster-autoscaler of this version knows (None:
    current) in place of its own domain."""
    old = version is not None and version < STARTUP_PREFIX_SINCE
    return (IGNORE_TAINT_PREFIX if old else STARTUP_TAINT_PREFIX) + key.rpartition("/")[2]


def prefix_known(key: str, version: Version | None) -> bool:
    """Whether a cluster-autoscaler of this version reads the key's prefix as a startup taint."""
    if key.startswith(STARTUP_TAINT_PREFIX):
        return version is None or version >= STARTUP_PREFIX_SINCE
    if key.startswith(IGNORE_TAINT_PREFIX):
        return version is None or version >= IGNORE_PREFIX_SINCE
    return False


def format_version(version: Version) -> str:
    return f"{version[0]}.{version[1]}"
