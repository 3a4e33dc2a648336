"""The source seam: what the rules read from the cluster besides Nodes, declared once.

Each `SourceKind` in `SOURCES` is one thing the rules may read (a gate's init pods, a node's
workload pods, the node agents' DaemonSets and pods, the CSINodes): its API resources, the
namespaces a rule's `NodeReads` say it is read in. `cluster_reads(rules)` is the record of what
given rules read: which source, in which namespaces, for which rules. From it are derived the
RBAC (manifests/rbac.py) and the LIST scopes of the CLI's readers (cli/live/cluster.py); the
reconciler and the CLI each read a node's facts through one source per kind
(`core.decisions.sources`), refusing a kind without one by name. A unit test adds a dummy
source and fails every consumer that ignores it (tests/unit/test_source_seam.py). Adding a
source is then its kind here, what its rules read (`NodeReads`), its reconciler source and its
CLI source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodegate.core.rules.rule_kinds import ALL_NAMESPACES, NodeReads

if TYPE_CHECKING:
    from nodegate.core.rules.model import NodeRules


@dataclass(frozen=True)
class Resource:
    """An API resource a source lists and watches."""

    group: str
    plural: str
    kind: str


PODS = Resource("", "pods", "Pod")
DAEMON_SETS = Resource("apps", "daemonsets", "DaemonSet")
CSI_NODES = Resource("storage.k8s.io", "csinodes", "CSINode")

EVERYWHERE = frozenset({ALL_NAMESPACES})


@dataclass(frozen=True)
class SourceKind:
    """One thing the rules may read from the cluster (see the module docstring)."""

    name: str
    resources: tuple[Resource, ...]
    namespaces: Callable[[NodeReads], frozenset[str]]
    """The namespaces these reads make it read (`ALL_NAMESPACES`: every one, or a
    cluster-scoped kind); none: not read."""


SOURCES: list[SourceKind] = [
    SourceKind("init-pods", (PODS,), lambda reads: frozenset(p.namespace for p in reads.pods)),
    SourceKind(
        "workload-pods", (PODS,), lambda reads: EVERYWHERE if reads.workload_pods else frozenset()
    ),
    SourceKind("node-agents", (PODS, DAEMON_SETS), lambda reads: reads.agent_namespaces),
    SourceKind(
        "csi-nodes", (CSI_NODES,), lambda reads: EVERYWHERE if reads.csi_drivers else frozenset()
    ),
]
"""Every source, in the order their reads are granted and followed."""


@dataclass(frozen=True)
class Read:
    """What one source reads for the rules: where, and for which of them."""

    source: SourceKind
    namespaces: frozenset[str]
    rules: tuple[str, ...]

    def scopes(self) -> list[str | None]:
        """The namespaces as LIST scopes (None: every namespace)."""
        return [None] if ALL_NAMESPACES in self.namespaces else [*sorted(self.namespaces)]


@dataclass(frozen=True)
class ClusterReads:
    """What the rules read from the cluster besides Nodes, source by source."""

    reads: tuple[Read, ...] = ()

    def of(self, name: str) -> Read | None:
        return next((r for r in self.reads if r.source.name == name), None)

    def resources(self) -> tuple[Resource, ...]:
        """Every resource read, once, in the sources' order."""
        return tuple(dict.fromkeys(res for r in self.reads for res in r.source.resources))


def cluster_reads(rules: NodeRules) -> ClusterReads:
    """The record of what `rules` read from the cluster (the namespaces from the rules' reads
    as a whole, which add the init pods' namespaces to the node agents' for their deadlocks)."""
    found: list[Read] = []
    for kind in SOURCES:
        namespaces = kind.namespaces(rules.reads())
        if not namespaces:
            continue
        names = tuple(r.name for r in rules.taint_rules() if kind.namespaces(r.reads()))
        found.append(Read(kind, namespaces, names))
    return ClusterReads(tuple(found))
