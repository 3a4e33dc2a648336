"""The init pods that lift startup gates: watched narrowly, held slim, indexed by node.

One informer (the same list-then-watch type as for Nodes) per distinct `readyWhen.pods`
namespace and label selector, so the watch carries only init pods, never the cluster's other
pods, and each is kept as a few fields: its node, whether it is Ready and since when, when it
was created, and the annotations gates read. The set of informers follows the rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from nodegate.core.decisions.init_pods import (
    PodSource,
    PodView,
    pod_source,
    pods_read,
    sighted,
    signal_writes,
    slim_pod,
    spec_signals,
)
from nodegate.core.decisions.re_registration import PodWrites
from nodegate.core.decisions.sightings import Sighting
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.views.pods import is_workload_pod
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import ListWatch, Selection
from nodegate.reconciler.nodes.sources.node_agents import PodsByNode
from nodegate.reconciler.nodes.sources.watched import Watching


class GatePods:
    """The init-pod informers the rules need, and which init pods run on which node."""

    kind = "init-pods"

    def __init__(self, watching: Watching, clock: Callable[[], datetime]) -> None:
        self._watching = watching
        self._now = clock
        self._informers: dict[PodSource, tuple[Informer[PodView], threading.Event]] = {}
        self._by_node: dict[PodSource, PodsByNode[PodView]] = {}
        self._keep: Callable[[str], bool] = lambda _key: False
        self._read: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def follow(self, rules: NodeRules) -> None:
        pods = rules.reads().pods
        wanted = {pod_source(p) for p in pods}
        read = {pair[0] for p in pods if (pair := p.ready_annotation_pair) is not None}
        reads_more = not read <= self._read
        self._read = frozenset(read)
        self._keep = lambda key: key in read
        with self._lock:
            if reads_more:  # cached pods lack the annotations the new rules read
                for informer, _ in self._informers.values():
                    informer.request_relist()
            for source in set(self._informers) - wanted:
                self._informers.pop(source)[1].set()
                self._by_node.pop(source, None)
            for source in wanted - set(self._informers):
                self._start(source)

    def stop(self) -> None:
        with self._lock:
            for _, informer_stop in self._informers.values():
                informer_stop.set()
            self._informers.clear()
            self._by_node.clear()

    def _start(self, source: PodSource) -> None:
        namespace, selector = source
        index = self._by_node[source] = PodsByNode[PodView]()
        # Runs until the rules drop this source or the controller stops (`stop`).
        self._informers[source] = self._watching.start(
            f"pods {namespace}/{selector}",
            Selection("Pod", namespace, label_selector=selector),
            lambda raw: slim_pod(raw, self._keep),
            lambda key, old, new: self._on_pod(source, index, key, old, new),
        )

    def _on_pod(
        self,
        source: PodSource,
        index: PodsByNode[PodView],
        key: str,
        old: PodView | None,
        new: PodView | None,
    ) -> None:
        with self._lock:
            if self._by_node.get(source) is not index:
                return  # from an informer `follow` or `stop` stopped, still dispatching
            previous = index.nodes.get(old.node, {}).get(key) if old is not None else None
            index.move(key, old, sighted(new, previous, self._now()) if new is not None else None)
        for node in {v.node for v in (old, new) if v is not None and v.node}:
            self._watching.on_node(node)

    def synced(self) -> bool:
        with self._lock:
            return all(informer.synced.is_set() for informer, _ in self._informers.values())

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        return replace(facts, gate_pod_signals=self.signals(rules, node.name))

    def signals(self, rules: NodeRules, node: str) -> dict[str, tuple[Sighting, ...]]:
        """Rule name -> the ready signals of the pods it reads on `node` (rules that have
        some): a startup gate's init pods, or any kind's that reads pods."""
        result: dict[str, tuple[Sighting, ...]] = {}
        with self._lock:
            for name, spec in pods_read(rules):
                pods = self._by_node.get(pod_source(spec), PodsByNode()).on(node)
                if signals := spec_signals(spec, pods):
                    result[name] = result.get(name, ()) + signals
        return result

    def ready_pods(self, rules: NodeRules, node: str) -> PodWrites:
        """The init pods bound to the name `node` showing a ready signal, with the write it is
        dated by (what a departure keeps)."""
        signals = self.signals(rules, node)
        return signal_writes(s for found in signals.values() for s in found)

    def bound(self, node: str) -> PodWrites | None:
        """Every init pod bound to the name `node`, with its status write; None until every
        informer has listed (a pod not listed yet is not gone)."""
        with self._lock:
            if not all(informer.synced.is_set() for informer, _ in self._informers.values()):
                return None
            return {
                view.uid: view.status_written
                for index in self._by_node.values()
                for view in index.on(node)
            }


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
