"""The nodes' CSINodes, watched while the rules read CSI drivers (`readyWhen.csiDrivers`):
one cluster-wide informer, each CSINode held as its owner and its drivers
(`core.decisions.csi_nodes`); a change enqueues the node it is named after."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from nodegate.core.decisions.csi_nodes import CsiNodeView, registered_drivers, slim_csinode
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import ErrorHook, Informer
from nodegate.reconciler.kit.kube import ListWatch, Selection


class CsiNodes:
    def __init__(
        self,
        api: ListWatch,
        on_informer_error: ErrorHook,
        health: Health,
        on_node: Callable[[str], None],
        watch_timeout_seconds: int = 120,
    ) -> None:
        self._api = api
        self._on_informer_error = on_informer_error
        self._health = health
        self._on_node = on_node
        self._watch_timeout = watch_timeout_seconds
        self._running: tuple[Informer[CsiNodeView], threading.Event] | None = None
        self._lock = threading.Lock()

    def follow(self, rules: NodeRules) -> None:
        """Watch CSINodes while the rules read a CSI driver; stop when they no longer do."""
        wanted = bool(rules.reads().csi_drivers)
        with self._lock:
            if wanted and self._running is None:
                self._start()
            elif not wanted and self._running is not None:
                self._running[1].set()
                self._running = None

    def _start(self) -> None:
        informer_stop = threading.Event()
        informer: Informer[CsiNodeView] = Informer(
            "csinodes",
            self._api,
            Selection("CSINode"),
            slim_csinode,
            self._on_csinode,
            watch_timeout_seconds=self._watch_timeout,
            on_error=self._on_informer_error,
        )
        self._running = (informer, informer_stop)
        # Runs until the rules stop reading CSI drivers or the controller stops (`stop_all`).
        supervised("csinodes", informer.run, informer_stop, self._health)

    def _on_csinode(self, key: str, old: CsiNodeView | None, new: CsiNodeView | None) -> None:
        self._on_node(key)  # a CSINode is named after its Node

    def drivers(self, node: str, node_uid: str) -> Mapping[str, bool]:
        """The drivers registered on this Node (by its own CSINode); none while not watched."""
        with self._lock:
            running = self._running
        if running is None:
            return {}
        return registered_drivers(running[0].get(node), node_uid)

    def stop_all(self) -> None:
        with self._lock:
            if self._running is not None:
                self._running[1].set()
                self._running = None
