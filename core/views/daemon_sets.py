"""A DaemonSet and its pods as node agents read them: where its controller places pods, its
pod template's labels, and each of its pods' node, owner and readiness (`AgentPod`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from nodegate.core.rules.node import parse_time
from nodegate.core.views.daemon_set_placement import Placement, placement_of
from nodegate.core.views.pods import pod_is_ready, ready_transition, status_written
from nodegate.core.views.raw import RawObject

DAEMON_SET_POD_LABEL = "pod-template-generation"
"""The DaemonSet controller labels each pod it makes with it: the agent pods' watch selects
on it, so the watch carries DaemonSet pods only."""


@dataclass(frozen=True)
class DaemonSetView:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    placement: Placement
    """Where the DaemonSet controller runs its pods (`daemon_set_placement`)."""
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    """Its pod template's labels: a startup gate's init pods are found by them
    (`agent_deadlocks`)."""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def slim_daemon_set(raw: RawObject) -> DaemonSetView:
    meta = raw.get("metadata") or {}
    template = (raw.get("spec") or {}).get("template") or {}
    pod_labels = (template.get("metadata") or {}).get("labels") or {}
    return DaemonSetView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        placement=placement_of(template.get("spec") or {}),
        pod_labels={str(k): str(v) for k, v in pod_labels.items()},
    )


@dataclass(frozen=True, slots=True)
class AgentPod:
    """A DaemonSet's pod as node agents read it: held for every DaemonSet pod in the namespaces
    the rules read, so only what they read (node names and owner uids interned: a few hundred
    strings for 100,000 pods)."""

    node: str
    uid: str
    owner_uid: str
    """Its controller's uid (a DaemonSet's)."""
    ready: bool
    """PodReady True and every container ready."""
    transition: str
    """`ready_transition`: its Ready condition as written, Ready or not (equality only)."""
    terminating: bool
    """Being deleted: on its way out, whatever its readiness says."""
    status_written: datetime | None
    """When its status was last written (the API server's stamp), else its creation."""


NOT_AN_AGENT = AgentPod("", "", "", False, "", False, None)
"""What a pod the DaemonSet label selects but no DaemonSet controls is held as (a mirror pod a
kubelet labelled so, a tenant's pod): nothing, and never indexed by node."""


def slim_agent_pod(raw: RawObject) -> AgentPod:
    meta = raw.get("metadata") or {}
    controller = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    node = (raw.get("spec") or {}).get("nodeName")
    if controller is None or controller.get("kind") != "DaemonSet" or not node:
        return NOT_AN_AGENT
    status = raw.get("status") or {}
    return AgentPod(
        node=sys.intern(str(node)),
        uid=str(meta.get("uid") or ""),
        owner_uid=sys.intern(str(controller.get("uid") or "")),
        ready=pod_is_ready(status),
        transition=ready_transition(status),
        terminating=meta.get("deletionTimestamp") is not None,
        status_written=status_written(meta) or parse_time(meta.get("creationTimestamp")),
    )
