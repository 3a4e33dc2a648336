"""What every extra informer the rules call for is wired with (the init pods gates read, the
node agents' DaemonSets and pods, the CSINodes): the API, where its errors are counted, the
health it reports to, which node a change enqueues, the watch timeout; and the one way such an
informer is started and supervised, which also keeps what the API server refuses to let them
read (`refused`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import ErrorHook, Informer
from nodegate.reconciler.kit.kube import ListWatch, RawObject, Selection

View = TypeVar("View")


@dataclass(frozen=True)
class Watching:
    api: ListWatch
    on_informer_error: ErrorHook
    health: Health
    on_node: Callable[[str], None]
    """Enqueue the node a change concerns."""
    watch_timeout_seconds: int = 120
    _running: list[tuple[Informer[Any], threading.Event]] = field(default_factory=list)

    def start(
        self,
        name: str,
        selection: Selection,
        slim: Callable[[RawObject], View],
        on_event: Callable[[str, View | None, View | None], None],
        on_synced: Callable[[], None] | None = None,
    ) -> tuple[Informer[View], threading.Event]:
        """An informer, running (supervised) until its returned event is set; `on_synced` is
        called after each full list."""
        stop = threading.Event()
        informer: Informer[View] = Informer(
            name,
            self.api,
            selection,
            slim,
            on_event,
            watch_timeout_seconds=self.watch_timeout_seconds,
            on_error=self.on_informer_error,
            on_synced=on_synced,
        )
        supervised(name, informer.run, stop, self.health)
        self._running[:] = [(i, s) for i, s in self._running if not s.is_set()]
        self._running.append((informer, stop))
        return informer, stop

    def refused(self) -> dict[str, str]:
        """Each kind the API server refuses a running informer to list/watch (RBAC withholds
        it: the installation's `access`), with its refusal."""
        return {
            informer.selection.kind: informer.refused
            for informer, stop in list(self._running)
            if not stop.is_set() and informer.refused is not None
        }
