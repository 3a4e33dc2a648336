"""The Node admission webhook: HTTPS in, `admission_patch` called, AdmissionReview out.

A thin shell, served by every reconciler replica (`nodegate reconcile --webhook-port`): the
decision is `core/node_admission.py`, the wire format `admission_review.py`, the certificate
`webhook_tls.py`. It runs in the reconciler's process rather than as a second entry point
because it needs exactly what the reconciler already has, on every replica, leader or not: the
validated rules (the same watcher, the same refusal of bad rules), the records' namespace, the
image, the ServiceAccount. A second Deployment would double the objects to run and keep in step
for a few hundred lines of code.

Whatever a request holds, the webhook answers and stays up: a request it does not handle is
answered allowed and unchanged (or HTTP 400/413 when it has no uid to answer), a bug in the
patch is logged and answered allowed and unchanged, a slow record lookup is cut at its budget.
It never denies: with `failurePolicy: Ignore` an outage only means nodes are born without the
patch, and the reconciler restores their labels right after (their gates only with `backfill`).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Histogram

from nodegate.core.model import NodeRules
from nodegate.core.node_admission import admission_patch
from nodegate.core.persisted_labels import RecordError, decode_record, key_for, record_name
from nodegate.reconciler.webhook.review import (
    MAX_BODY_BYTES,
    Refusal,
    decode_review,
    error_body,
    review_response,
)
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.kube import KubeError, load_api_client
from nodegate.reconciler.nodes.rules_source import RulesUpdate
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.webhook.api import RecordReader, WebhookKubeApi
from nodegate.reconciler.webhook.tls import FileCertificates, SecretCertificates

log = logging.getLogger("nodegate.webhook")

Clock = Callable[[], datetime]
RulesProvider = Callable[[], NodeRules | None]
SOCKET_TIMEOUT_SECONDS = 10.0
"""A connection idle this long (handshake or request) is closed: no thread waits forever."""
LOOKUP_THREADS = 4


class WebhookMetrics:
    """The webhook's metrics, on the reconciler's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reviews = Counter(
            "nodegate_webhook_reviews",
            "Admission reviews answered, by result (patched, unchanged, refused, error).",
            ["result"],
            registry=registry,
        )
        self.review_seconds = Histogram(
            "nodegate_webhook_review_duration_seconds",
            "Time to answer one admission review, record lookup included.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=registry,
        )
        self.lookups = Counter(
            "nodegate_webhook_record_lookups",
            "Persisted-label record lookups, by result (found, absent, unreadable, error, "
            "timeout).",
            ["result"],
            registry=registry,
        )


class LatestRules:
    """The last valid rules the rules watcher accepted, for the webhook (every replica)."""

    def __init__(self) -> None:
        self._rules: NodeRules | None = None

    def offer(self, update: RulesUpdate) -> None:
        self._rules = update.rules

    def __call__(self) -> NodeRules | None:
        return self._rules


class RecordLookup:
    """The persisted labels of a node being created: one GET of its record ConfigMap, within
    a budget. Anything but a readable record of this node's key is no labels (and a log line)."""

    def __init__(
        self,
        reader: RecordReader,
        namespace: str,
        budget_seconds: float,
        metrics: WebhookMetrics,
    ) -> None:
        self._reader = reader
        self._namespace = namespace
        self._budget = budget_seconds
        self._metrics = metrics
        # Calls run on a pool so the budget is a deadline whatever the client's own retries do.
        self._pool = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="webhook-lookup")

    def labels(self, node: Mapping[str, Any], rules: NodeRules) -> Mapping[str, str]:
        config = rules.persistent_labels
        if config is None:
            return {}
        metadata, spec = node.get("metadata"), node.get("spec")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        provider_id = spec.get("providerID") if isinstance(spec, Mapping) else None
        key = key_for(
            name if isinstance(name, str) else "",
            provider_id if isinstance(provider_id, str) else "",
            config,
        )
        if not key:
            return {}
        record = record_name(key)
        future = self._pool.submit(self._reader.read_configmap, self._namespace, record)
        context = {"node": name, "key": key, "record": record}
        try:
            raw = future.result(timeout=self._budget)
        except FutureTimeout:
            future.cancel()
            return self._none("timeout", "record lookup over its budget", context)
        except KubeError as err:
            return self._none("error", f"record lookup failed: {err}", context)
        if raw is None:
            self._metrics.lookups.labels("absent").inc()
            return {}
        try:
            stored = decode_record(raw.get("data"))
        except RecordError as err:
            return self._none("unreadable", f"record unreadable: {err}", context)
        if stored.key != key:
            return self._none("unreadable", f"record is for key {stored.key!r}", context)
        self._metrics.lookups.labels("found").inc()
        return stored.labels

    def _none(self, result: str, why: str, context: dict[str, Any]) -> Mapping[str, str]:
        self._metrics.lookups.labels(result).inc()
        log.warning(f"{why}; admitting the node without persisted labels", extra=context)
        return {}


class NodeAdmission:
    """One admission review, body to answer: (HTTP status, body)."""

    def __init__(
        self,
        rules: RulesProvider,
        lookup: RecordLookup,
        metrics: WebhookMetrics,
        clock: Clock = lambda: datetime.now(UTC),
    ) -> None:
        self._rules = rules
        self._lookup = lookup
        self._metrics = metrics
        self._now = clock

    def review(self, body: bytes) -> tuple[int, bytes]:
        started = time.monotonic()
        try:
            return self._review(body)
        finally:
            self._metrics.review_seconds.observe(time.monotonic() - started)

    def _review(self, body: bytes) -> tuple[int, bytes]:
        request = decode_review(body)
        if isinstance(request, Refusal):
            self._metrics.reviews.labels("refused").inc()
            log.warning(
                "admission review not handled; allowed unchanged",
                extra={"reason": request.reason, "uid": request.uid},
            )
            if request.uid is None:
                return 400, error_body(request.reason)
            return 200, review_response(request.uid)
        rules = self._rules()
        if rules is None:
            self._metrics.reviews.labels("unchanged").inc()
            log.warning("no rules yet; node admitted unchanged", extra={"node": request.name})
            return 200, review_response(request.uid)
        try:
            stored = self._lookup.labels(request.node, rules)
            patch = admission_patch(request.node, rules, stored, self._now())
        except Exception:
            # A bug must never stop a node from registering: admit it unchanged, loudly.
            self._metrics.reviews.labels("error").inc()
            log.exception("admission patch failed; node admitted unchanged")
            return 200, review_response(request.uid)
        self._metrics.reviews.labels("patched" if patch.ops else "unchanged").inc()
        log.info(
            "node admitted",
            extra={
                "node": request.name,
                "gates": list(patch.gates),
                "labels": dict(patch.labels),
                "skipped": list(patch.skipped),
                "dry_run": request.dry_run,
            },
        )
        return 200, review_response(request.uid, patch.ops)


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
