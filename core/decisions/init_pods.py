"""What makes a pod a rule reads (a gate's init pod) count, and since when: a pod's slim view
(its node, whether it is Ready and since when, the annotations rules read), its Ready episode as
nodegate first saw it, and the ready signals of a rule's pods on one node. Pure; the
reconciler's pod informers and `nodegate explain` both read pods through it, for every rule of
every kind that reads pods (`NodeReads.pods`).

Also which pods make a node busy (a backfilled gate never goes on a node running workloads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from nodegate.core.decisions.sightings import Sighting
from nodegate.core.rules.model import InitPods, NodeRules
from nodegate.core.rules.node import parse_time
from nodegate.core.views.pods import pod_is_ready, ready_condition, status_written
from nodegate.core.views.raw import RawObject

PodSource = tuple[str, str]
"""(namespace, label selector) of one gate's init pods."""


@dataclass(frozen=True)
class PodView:
    node: str
    created: datetime | None
    status_written: datetime | None
    """When the pod's status was last written, stamped by the API server (its `managedFields`
    entries for the status subresource), else its creation."""
    uid: str
    ready_token: str | None
    """This Ready episode as the kubelet wrote it (its Ready lastTransitionTime as text, compared
    for equality only: the kubelet's clock may be anywhere); None: not Ready (PodReady True and
    every container ready)."""
    annotations: Mapping[str, str]
    ready: Sighting | None = None
    """When nodegate first saw this Ready episode (`sighted`)."""


def slim_pod(raw: RawObject, keep_annotation: Callable[[str], bool]) -> PodView:
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    ready = ready_condition(status)
    is_ready = pod_is_ready(status)
    created = parse_time(meta.get("creationTimestamp"))
    return PodView(
        node=str((raw.get("spec") or {}).get("nodeName") or ""),
        created=created,
        status_written=status_written(meta) or created,
        uid=str(meta.get("uid") or ""),
        ready_token=str(ready.get("lastTransitionTime") or "") if is_ready else None,
        annotations={
            k: str(v) for k, v in (meta.get("annotations") or {}).items() if keep_annotation(k)
        },
    )


def sighted(view: PodView, previous: PodView | None, now: datetime) -> PodView:
    """The view with its Ready episode's sighting (`nodegate.core.decisions.sightings`): kept from
    the previous view of the same episode; else first seen `now`, witnessed if there was a
    previous view of the pod (this process saw the episode begin)."""
    if view.ready_token is None:
        return view
    token = f"{view.uid}@{view.ready_token}"
    if previous is not None and previous.ready is not None and previous.ready.token == token:
        return replace(view, ready=previous.ready)
    seen = Sighting(token, now, previous is not None, view.status_written)
    return replace(view, ready=seen)


def signal_pod(signal: Sighting) -> str:
    """The uid of the pod a ready signal is of (`sighted`, `spec_signals`: `<uid>@...`)."""
    return signal.token.split("@", 1)[0]


def signal_writes(signals: Iterable[Sighting]) -> dict[str, datetime | None]:
    """Pod uid -> the latest write its ready signals are dated by (`spec_signals`): what a
    departure keeps of the init pods (`re_registration`)."""
    found: dict[str, datetime | None] = {}
    for signal in signals:
        uid, written = signal_pod(signal), signal.status_written
        before = found.get(uid)
        if before is None or (written is not None and written > before):
            found[uid] = written
    return found


def pod_source(spec: InitPods) -> PodSource:
    return spec.namespace, spec.label_selector


def pods_read(rules: NodeRules) -> tuple[tuple[str, InitPods], ...]:
    """(rule name, pods) for every rule of every kind that reads pods on its nodes
    (`NodeReads.pods`): what the pod informers watch and whose signals the planner is given."""
    return tuple((rule.name, spec) for rule in rules.taint_rules() for spec in rule.reads().pods)


def spec_signals(spec: InitPods, pods: list[PodView]) -> tuple[Sighting, ...]:
    """The ready signals of these pods (of `spec`'s source, on one node), each as a sighting.

    Readiness counts unless `requireAnnotation`; the pod's ready annotation counts as an
    episode that began when the pod was created (so an annotation left on a pod from before a
    reboot does not re-lift a gate): both are API-server times.
    """
    pair = spec.ready_annotation_pair
    signals = []
    for pod in pods:
        if pod.ready is not None and not spec.require_annotation:
            signals.append(pod.ready)
        if pair is not None and pod.annotations.get(pair[0]) == pair[1]:
            created = pod.created or _EPOCH
            signals.append(Sighting(f"{pod.uid}@annotation", created, True, created))
    return tuple(signals)


_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
