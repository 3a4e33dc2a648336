"""The init pods that lift startup gates: watched narrowly, held slim, indexed by node.

One informer (the same list-then-watch type as for Nodes) per distinct `readyWhen.pods`
namespace and label selector, so the watch carries only init pods, never the cluster's other
pods, and each is kept as a few fields: its node, whether it is Ready and since when, when it
was created, and the annotations gates read. The set of informers follows the rules.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from nodegate.core.decisions.sightings import Sighting
from nodegate.core.rules.model import NodeRules, StartupGate
from nodegate.core.rules.node import parse_time
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import ErrorHook, Informer
from nodegate.reconciler.kit.kube import ListWatch, RawObject, Selection

log = logging.getLogger("nodegate.gates")

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
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    ready = conditions.get("Ready") or {}
    containers = status.get("containerStatuses") or ()
    is_ready = ready.get("status") == "True" and all(c.get("ready") for c in containers)
    created = parse_time(meta.get("creationTimestamp"))
    return PodView(
        node=str((raw.get("spec") or {}).get("nodeName") or ""),
        created=created,
        status_written=_status_written(meta) or created,
        uid=str(meta.get("uid") or ""),
        ready_token=str(ready.get("lastTransitionTime") or "") if is_ready else None,
        annotations={
            k: str(v) for k, v in (meta.get("annotations") or {}).items() if keep_annotation(k)
        },
    )


def _status_written(meta: RawObject) -> datetime | None:
    """The latest time the API server stamped on a write of the pod's status (the kubelet's)."""
    times = []
    for entry in meta.get("managedFields") or ():
        if entry.get("subresource") == "status":
            with contextlib.suppress(ValueError):
                if (when := parse_time(entry.get("time"))) is not None:
                    times.append(when)
    return max(times) if times else None


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


def pod_source(gate: StartupGate) -> PodSource | None:
    pods = gate.ready_when.pods
    return (pods.namespace, pods.label_selector) if pods is not None else None


def pod_signals(gate: StartupGate, pods: list[PodView]) -> tuple[Sighting, ...]:
    """The ready signals of this gate's init pods on the node, each as a sighting.

    Readiness counts unless `requireAnnotation`; the pod's ready annotation counts as an
    episode that began when the pod was created (so an annotation left on a pod from before a
    reboot does not re-lift a gate): both are API-server times.
    """
    spec = gate.ready_when.pods
    if spec is None:
        return ()
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


class GatePods:
    """The init-pod informers the rules need, and which init pods run on which node."""

    def __init__(
        self,
        api: ListWatch,
        on_informer_error: ErrorHook,
        health: Health,
        on_node: Callable[[str], None],
        clock: Callable[[], datetime],
        watch_timeout_seconds: int = 120,
    ) -> None:
        self._api = api
        self._now = clock
        self._on_informer_error = on_informer_error
        self._health = health
        self._on_node = on_node
        self._watch_timeout = watch_timeout_seconds
        self._informers: dict[PodSource, tuple[Informer[PodView], threading.Event]] = {}
        self._by_node: dict[PodSource, dict[str, dict[str, PodView]]] = {}
        self._keep: Callable[[str], bool] = lambda _key: False
        self._read: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def follow(self, rules: NodeRules) -> None:
        """Start the informers the rules need and stop the ones they no longer do."""
        wanted = {s for g in rules.startup_gates if (s := pod_source(g)) is not None}
        read = {
            pair[0]
            for g in rules.startup_gates
            if g.ready_when.pods is not None
            and (pair := g.ready_when.pods.ready_annotation_pair) is not None
        }
        reads_more = not read <= self._read
        self._read = frozenset(read)
        self._keep = lambda key: key in read
        with self._lock:
            if reads_more:  # cached pods lack the annotations the new rules read
                for informer, _ in self._informers.values():
                    informer.request_relist()
            for source in set(self._informers) - wanted:
                informer, informer_stop = self._informers.pop(source)
                informer_stop.set()
                self._by_node.pop(source, None)
            for source in wanted - set(self._informers):
                self._start(source)

    def stop_all(self) -> None:
        with self._lock:
            for _, informer_stop in self._informers.values():
                informer_stop.set()
            self._informers.clear()

    def _start(self, source: PodSource) -> None:
        namespace, selector = source
        informer_stop = threading.Event()
        informer: Informer[PodView] = Informer(
            f"pods {namespace}/{selector}",
            self._api,
            Selection("Pod", namespace, label_selector=selector),
            lambda raw: slim_pod(raw, self._keep),
            lambda key, old, new: self._on_pod(source, key, old, new),
            watch_timeout_seconds=self._watch_timeout,
            on_error=self._on_informer_error,
        )
        self._informers[source] = (informer, informer_stop)
        self._by_node[source] = {}

        # Runs until the rules drop this source or the controller stops (`stop_all`).
        supervised(f"pods {namespace}/{selector}", informer.run, informer_stop, self._health)

    def _on_pod(
        self, source: PodSource, key: str, old: PodView | None, new: PodView | None
    ) -> None:
        with self._lock:
            index = self._by_node.setdefault(source, {})
            previous = index.get(old.node, {}).pop(key, None) if old is not None else None
            if new is not None and new.node:
                index.setdefault(new.node, {})[key] = sighted(new, previous, self._now())
        for node in {v.node for v in (old, new) if v is not None and v.node}:
            self._on_node(node)

    def synced(self) -> bool:
        with self._lock:
            return all(informer.synced.is_set() for informer, _ in self._informers.values())

    def signals(self, rules: NodeRules, node: str) -> dict[str, tuple[Sighting, ...]]:
        """Gate name -> the ready signals of its init pods on `node` (gates that have some)."""
        result = {}
        with self._lock:
            for gate in rules.startup_gates:
                source = pod_source(gate)
                if source is None:
                    continue
                pods = list(self._by_node.get(source, {}).get(node, {}).values())
                if signals := pod_signals(gate, pods):
                    result[gate.name] = signals
        return result


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_workload_pod(raw: RawObject) -> bool:
    """A pod that is not a DaemonSet's, not a static (mirror) pod, and not finished."""
    meta = raw.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    if any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or ()):
        return False
    return (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def workload_pods_on(api: ListWatch, node: str) -> list[str]:
    """namespace/name of the workload pods bound to `node` (one LIST, only for backfill)."""
    selection = Selection("Pod", None, field_selector=f"spec.nodeName={node}")
    found: list[str] = []
    token: str | None = None
    while True:
        page = api.list_page(selection, 500, token)
        found += [
            f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
            for p in page.items
            if is_workload_pod(p)
        ]
        token = page.continue_token
        if token is None:
            return found
