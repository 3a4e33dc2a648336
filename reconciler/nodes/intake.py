"""Node events in, decided cheaply: only a change to what the rules read costs a reconcile.

Every node event is slimmed to what the rules read (`node_view`), sighted (`NodeFacts.saw`),
shown to the hooks that asked (the OCI poller), and queued when what the rules read changed; a
node deleted, or created again under its name while the watch was down, is forgotten everywhere
(`node_memory`).
"""

from __future__ import annotations

from collections.abc import Callable

from nodegate.core.decisions.plan import annotations_read, relevant_view
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.kit.workqueue import WorkQueue
from nodegate.reconciler.nodes.decide.node_facts import NodeFacts
from nodegate.reconciler.nodes.metrics import ControllerMetrics
from nodegate.reconciler.nodes.node_memory import NodeMemories
from nodegate.reconciler.nodes.node_view import CachedNode, annotation_filter, slim_node
from nodegate.reconciler.nodes.records.label_records import LabelRecords


class NodeIntake:
    def __init__(
        self,
        queue: WorkQueue,
        metrics: ControllerMetrics,
        rules: Callable[[], NodeRules | None],
        facts: NodeFacts,
        memory: NodeMemories,
        labels: LabelRecords,
    ) -> None:
        self._queue = queue
        self._rules = rules
        self._facts = facts
        self._memory = memory
        self._labels = labels
        self._hooks: list[Callable[[NodeState | None, NodeState], None]] = []
        # Each outcome's counter looked up once: a metric's `labels()` per event was a tenth of
        # this handler's CPU in a 1,000-node storm (issue 62).
        self._counted = {
            outcome: metrics.node_events.labels(outcome)
            for outcome in ("no_rules", "unchanged", "queued", "deleted")
        }
        self._keep_annotation = annotation_filter(None)
        self._filters = 0  # how many annotation filters the cache has had (CachedNode.kept_under)

    def slim(self, raw: RawObject) -> CachedNode:
        return slim_node(raw, self._keep_annotation, self._filters)

    def stale(self, cached: CachedNode) -> bool:
        """Whether the entry was slimmed under an older annotation filter."""
        return cached.kept_under != self._filters

    def rules_applied(self, rules: NodeRules) -> bool:
        """Keep the annotations `rules` read; whether the cache must be listed again (it has
        been dropping some of them: entries slimmed before are stale, re-read before planning;
        counted after the filter changes, so one slimmed in between is re-read, never trusted)."""
        old = self._keep_annotation
        needs_relist = any(not old(key) for key in annotations_read(rules))
        self._keep_annotation = annotation_filter(rules)
        if needs_relist:
            self._filters += 1
        return needs_relist

    def watch(self, hook: Callable[[NodeState | None, NodeState], None]) -> Callable[[], None]:
        """Also call `hook(old, new)` on every node event but deletions, on the informer's
        thread (it must be cheap: the OCI poller's look at its own conditions), until the
        returned function is called (a leadership's poller must not outlive it)."""
        self._hooks.append(hook)
        return lambda: self._hooks.remove(hook)

    def on_event(self, key: str, old: CachedNode | None, new: CachedNode | None) -> None:
        if new is not None:
            for hook in tuple(self._hooks):
                hook(old.state if old is not None else None, new.state)
        for rival in self._labels.keys.observe(key, new.state if new is not None else None):
            self.on_node(rival)
        if new is None:
            self._deleted(key, old)
            return
        if old is not None and old.state.uid != new.state.uid:
            # Deleted and created again while the watch was down: a new node of the same name.
            self._facts.went(key, old.state)
            self._memory.forget(key, old.state.uid)
            old = None
        self._facts.saw(key, new.state)
        rules = self._rules()
        if rules is None:
            self._counted["no_rules"].inc()
            return
        if old is not None and relevant_view(old.state, rules) == relevant_view(new.state, rules):
            self._counted["unchanged"].inc()
            return  # a heartbeat or a change in something the rules don't read
        self._counted["queued"].inc()
        self._queue.add(key, "event")

    def on_node(self, node: str) -> None:
        """Something read about `node` changed (a source's object, a rival for its record)."""
        if self._rules() is not None:
            self._queue.add(node, "event")

    def _deleted(self, key: str, old: CachedNode | None) -> None:
        """Forget the node everywhere; if labels persist, reconcile its key once more so its
        record is marked gone."""
        self._counted["deleted"].inc()
        self._queue.discard(key)
        if old is None:
            self._memory.forget(key, None)
            return
        self._facts.went(key, old.state)
        self._memory.forget(key, old.state.uid)
        rules = self._rules()
        if rules is not None and rules.persistent_labels is not None:
            self._labels.node_deleted(key, old.state)
            self._queue.add(key, "event")
