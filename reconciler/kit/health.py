"""Liveness of the reconciler's long-running loops.

A thread that dies quietly while the probes stay green is the worst failure a controller can
have: every loop runs under `supervised`, and one that ends before shutdown fails /healthz.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("nodegate.health")


class Health:
    """Liveness: a loop that ended fails /healthz, so the kubelet restarts the pod.
    `on_failed(loop)` is told each loop that ended (for a gauge)."""

    def __init__(self, on_failed: Callable[[str], None] = lambda _loop: None) -> None:
        self._on_failed = on_failed
        self._failed: dict[str, str] = {}
        self._lock = threading.Lock()

    def failed(self, loop: str, why: str) -> None:
        with self._lock:
            self._failed[loop] = why
        self._on_failed(loop)
        log.error("a long-running loop ended", extra={"loop": loop, "why": why})

    def check(self) -> tuple[bool, str]:
        with self._lock:
            if not self._failed:
                return True, "ok"
            return False, "; ".join(f"{loop}: {why}" for loop, why in sorted(self._failed.items()))


def supervised(
    name: str, target: Callable[[threading.Event], None], stop: threading.Event, health: Health
) -> threading.Thread:
    """Run a loop in a daemon thread; if it ever returns or raises before `stop`, say so."""

    def body() -> None:
        try:
            target(stop)
        except BaseException as err:
            health.failed(name, f"{type(err).__name__}: {err}")
            raise
        if not stop.is_set():
            health.failed(name, "returned while the reconciler was running")

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread
