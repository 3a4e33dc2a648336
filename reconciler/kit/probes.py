"""/healthz, /readyz and /metrics on one small HTTP server (stdlib; prometheus-client renders)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

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
