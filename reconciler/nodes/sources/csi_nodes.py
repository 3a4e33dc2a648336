"""The nodes' CSINodes, watched while the rules read CSI drivers (`readyWhen.csiDrivers`):
one cluster-wide informer, each CSINode held as its owner and its drivers
(`core.decisions.csi_nodes`); a change enqueues the node it is named after."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.core.views.csi_nodes import CsiNodeView, registered_drivers, slim_csinode
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import Selection
from nodegate.reconciler.nodes.sources.watched import Watching


class CsiNodes:
    kind = "csi-nodes"

    def __init__(self, watching: Watching) -> None:
        self._watching = watching
        self._running: tuple[Informer[CsiNodeView], threading.Event] | None = None
        self._lock = threading.Lock()

    def follow(self, rules: NodeRules) -> None:
        """Watch CSINodes while the rules read a CSI driver; stop when they no longer do."""
        if not rules.reads().csi_drivers:
            self.stop()
            return
        with self._lock:
            if self._running is None:
                # Runs until the rules stop reading CSI drivers or the controller stops.
                self._running = self._watching.start(
                    "csinodes", Selection("CSINode"), slim_csinode, self._on_csinode
                )

    def _on_csinode(self, key: str, old: CsiNodeView | None, new: CsiNodeView | None) -> None:
        self._watching.on_node(key)  # a CSINode is named after its Node

    def drivers(self, node: str, node_uid: str) -> Mapping[str, bool] | None:
        """The drivers registered on this Node (by its own CSINode); None while not known (not
        watched, or not listed yet): a rule must not read "not registered" into that."""
        with self._lock:
            running = self._running
        if running is None or not running[0].synced.is_set():
            return None
        return registered_drivers(running[0].get(node), node_uid)

    def synced(self) -> bool:
        with self._lock:
            return self._running is None or self._running[0].synced.is_set()

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        return replace(facts, csi_drivers=self.drivers(node.name, node.uid) or {})

    def stop(self) -> None:
        with self._lock:
            if self._running is not None:
                self._running[1].set()
                self._running = None
