"""A pod as the rules read it: whether it is Ready and since which write, and whether it is a
workload (which makes a node busy: a backfilled gate never goes on a node running workloads)."""

from __future__ import annotations

import contextlib
from datetime import datetime

from nodegate.core.rules.node import parse_time
from nodegate.core.views.raw import RawObject


def pod_is_ready(status: RawObject) -> bool:
    """PodReady True and every container ready (as nidhogg and Vigil read a pod)."""
    containers = status.get("containerStatuses") or ()
    ready = ready_condition(status).get("status") == "True"
    return ready and all(c.get("ready") for c in containers)


def ready_transition(status: RawObject) -> str:
    """The pod's Ready condition's status and lastTransitionTime as the kubelet wrote them:
    one episode of (un)readiness from the next, compared for equality only."""
    ready = ready_condition(status)
    return f"{ready.get('status') or ''}@{ready.get('lastTransitionTime') or ''}"


def ready_condition(status: RawObject) -> RawObject:
    return next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})


def status_written(meta: RawObject) -> datetime | None:
    """The latest time the API server stamped on a write of the pod's status (the kubelet's)."""
    times = []
    for entry in meta.get("managedFields") or ():
        if entry.get("subresource") == "status":
            with contextlib.suppress(ValueError):
                if (when := parse_time(entry.get("time"))) is not None:
                    times.append(when)
    return max(times) if times else None


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_workload_pod(raw: RawObject) -> bool:
    """A pod that is not a DaemonSet's, not a static (mirror) pod, and not finished."""
    meta = raw.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or ()):
        return False
    return (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
