"""Liveness of the reconciler's long-running loops, and the server of its probes.

A thread that dies quietly while the probes stay green is the worst failure a controller can
have: every loop runs under `supervised`, and one that ends before shutdown fails /healthz.
/healthz, /readyz and /metrics are served by one small HTTP server (stdlib; prometheus-client
renders).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

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


Check = Callable[[], tuple[bool, str]]


def serve(
    address: str, port: int, registry: CollectorRegistry, healthy: Check, ready: Check
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; returns the server (its port if `port` was 0)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                return
            checks = {"/healthz": healthy, "/readyz": ready, "/livez": healthy}
            check = checks.get(self.path)
            if check is None:
                self._reply(404, b"not found\n", "text/plain")
                return
            ok, text = check()
            self._reply(200 if ok else 503, (text + "\n").encode(), "text/plain")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds would drown the structured log

    server = ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
