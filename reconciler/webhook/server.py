"""The Node admission webhook's HTTPS server, served by every reconciler replica
(`nodegate reconcile --webhook-port`).

It runs in the reconciler's process rather than as a second entry point because it needs
exactly what the reconciler already has, on every replica, leader or not: the validated rules
(the same watcher, the same refusal of bad rules), the records' namespace, the image, the
ServiceAccount. A second Deployment would double the objects to run and keep in step for a few
hundred lines of code.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.kube import load_api_client
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.webhook.admission import (
    NodeAdmission,
    RecordLookup,
    RulesProvider,
    WebhookMetrics,
)
from nodegate.reconciler.webhook.api import WebhookKubeApi
from nodegate.reconciler.webhook.review import (
    MAX_BODY_BYTES,
    error_body,
)
from nodegate.reconciler.webhook.tls import FileCertificates, SecretCertificates

log = logging.getLogger("nodegate.webhook")

SOCKET_TIMEOUT_SECONDS = 10.0
"""A connection idle this long (handshake or request) is closed: no thread waits forever."""


@contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    """A path holding `data`, for `SSLContext.load_cert_chain` (which reads only files).

    An anonymous in-memory file on Linux (the image's root filesystem is read-only, and the
    key never touches a disk); a private temporary file elsewhere.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("nodegate-webhook-pem", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pem"
        path.write_bytes(data)
        path.chmod(0o600)
        yield str(path)


def server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A TLS (1.2+) server context serving this certificate and key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with _pem_path(cert_pem) as cert_file, _pem_path(key_pem) as key_file:
        context.load_cert_chain(cert_file, key_file)
    return context


class _TlsServer(ThreadingHTTPServer):
    """Accepts plain TCP and wraps each connection with the context in force at that moment,
    so a renewed certificate applies to the next connection without a restart. The handshake
    runs in the connection's own thread (under its socket timeout), not in the accept loop."""

    daemon_threads = True
    context: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        context = self.context
        if context is None:
            sock.close()
            raise OSError("no serving certificate yet")  # socketserver drops the connection
        try:
            wrapped = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (OSError, ValueError):
            sock.close()
            raise
        return wrapped, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A broken connection (bad handshake, peer gone, timeout) is a log line, not a
        traceback on stderr."""
        log.info("webhook connection failed", extra={"client": str(client_address)}, exc_info=True)


class WebhookServer:
    """The HTTPS server: POST `path` with an AdmissionReview; everything else 404/405."""

    def __init__(
        self,
        address: str,
        port: int,
        path: str,
        review: Callable[[bytes], tuple[int, bytes]],
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.serving = threading.Event()
        """Set once a certificate is loaded: before, connections are closed at once."""

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses connections
            timeout = SOCKET_TIMEOUT_SECONDS
            # Headers and body leave as two writes: with Nagle's algorithm on, the second
            # waits for the peer's delayed ACK (measured: node creates took 56 ms, now 16).
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                if urlsplit(self.path).path != path:
                    self._reply(404, error_body(f"no webhook at {self.path[:100]}"))
                    return
                try:
                    length = int(self.headers.get("Content-Length", ""))
                except ValueError:
                    self.close_connection = True
                    self._reply(411, error_body("a Content-Length header is required"))
                    return
                if length < 0 or length > max_body_bytes:
                    # Refused unread; the connection closes so the rest is never read either.
                    self.close_connection = True
                    reason = f"body of {length} bytes; at most {max_body_bytes} are read"
                    log.warning("admission review refused", extra={"reason": reason})
                    self._reply(413, error_body(reason))
                    return
                body = self.rfile.read(length)
                if len(body) != length:
                    self.close_connection = True
                    self._reply(400, error_body("body shorter than its Content-Length"))
                    return
                status, answer = review(body)
                self._reply(status, answer)

            def do_GET(self) -> None:
                self._reply(405, error_body("POST an AdmissionReview"))

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # every review is logged once, structured, by NodeAdmission

        self._server = _TlsServer((address, port), Handler)
        self._started = False

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    def use_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve this certificate from the next connection on."""
        self._server.context = server_context(cert_pem, key_pem)
        self.serving.set()

    def start(self) -> None:
        self._started = True
        threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True).start()

    def shutdown(self) -> None:
        if self._started:  # shutdown() waits for serve_forever to end: it must have begun
            self._server.shutdown()
        self._server.server_close()


def serve_webhook(
    settings: ReconcilerSettings,
    rules: RulesProvider,
    registry: CollectorRegistry,
    stop: threading.Event,
    health: Health,
) -> WebhookServer | None:
    """Start the webhook and the loop that keeps its certificate (None: not configured)."""
    webhook = settings.webhook
    if webhook is None:
        return None
    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig else None
    # Its own client: reviews never queue behind node traffic, and calls time out in budget.
    api = WebhookKubeApi(load_api_client(kubeconfig), webhook.lookup_timeout_seconds)
    metrics = WebhookMetrics(registry)
    namespace = settings.records_namespace
    lookup = RecordLookup(api, namespace, webhook.lookup_timeout_seconds, metrics)
    admission = NodeAdmission(rules, lookup, metrics)
    server = WebhookServer(webhook.address, webhook.port, webhook.path, admission.review)
    source: SecretCertificates | FileCertificates
    if webhook.cert_dir is not None:
        source = FileCertificates(
            webhook.cert_dir, server.use_certificate, interval_seconds=webhook.cert_check_seconds
        )
    else:
        source = SecretCertificates(
            api,
            namespace,
            webhook.tls_secret,
            webhook.configuration,
            webhook.certificate_hosts(namespace),
            server.use_certificate,
            interval_seconds=webhook.cert_check_seconds,
        )
    server.start()
    supervised("webhook-certificates", source.run, stop, health)
    log.info(
        "webhook starting",
        extra={"port": server.port, "path": webhook.path, "certificates": type(source).__name__},
    )
    return server
