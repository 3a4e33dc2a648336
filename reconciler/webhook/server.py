"""The Node admission webhook's HTTPS server, served by every reconciler replica
(`nodegate reconcile --webhook-port`).

It runs in the reconciler's process rather than as a second entry point because it needs
exactly what the reconciler already has, on every replica, leader or not: the validated rules
(the same watcher, the same refusal of bad rules), the records' namespace, the image, the
ServiceAccount. A second Deployment would double the objects to run and keep in step for a few
hundred lines of code.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http import HTTPStatus
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from nodegate.reconciler.kit.client import load_api_client
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.server_clock import AnchoredClock
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.webhook.admission import (
    NodeAdmission,
    RecordLookup,
    RulesProvider,
    WebhookMetrics,
)
from nodegate.reconciler.webhook.api import WebhookKubeApi
from nodegate.reconciler.webhook.review import MAX_BODY_BYTES, error_body
from nodegate.reconciler.webhook.tls import (
    FileCertificates,
    SecretCertificates,
    keep_syncing,
    server_context,
)
from nodegate.reconciler.webhook.wire import (
    Refusal,
    Request,
    ServerLimits,
    parse_head,
    within_open_file_limit,
)

log = logging.getLogger("nodegate.webhook")


class WebhookServer:
    """The HTTPS server: POST `path` with an AdmissionReview; everything else 404/405.

    Why asyncio rather than `http.server.ThreadingHTTPServer` (a thread per connection, no cap,
    a timeout per recv, so a client sending a byte every few seconds held a thread for ever and
    300 of them held 300 threads): one event-loop thread holds every connection, each under a
    whole-request deadline, and only complete requests reach the few review threads. A server
    library with these limits (uvicorn, hypercorn) would bring an ASGI stack and several
    dependencies into the image for one POST route; h11 alone would replace only the parsing,
    which here is a bounded header block handed to the standard library's own header parser.
    """

    def __init__(
        self,
        address: str,
        port: int,
        path: str,
        review: Callable[[bytes], tuple[int, bytes]],
        metrics: WebhookMetrics,
        max_body_bytes: int = MAX_BODY_BYTES,
        limits: ServerLimits | None = None,
    ) -> None:
        self.serving = threading.Event()
        """Set once a certificate is loaded: before, connections are closed at once."""
        self._path = path
        self._review = review
        self._max_body_bytes = max_body_bytes
        self._limits = within_open_file_limit(limits or ServerLimits())
        self._metrics = metrics
        self._context: ssl.SSLContext | None = None
        # Bound now, so the port is known (and taken) before the server starts.
        self._socket = socket.create_server((address, port), backlog=self._limits.max_connections)
        self._workers = ThreadPoolExecutor(self._limits.workers, "webhook-review")
        self._open = 0
        metrics.open_connections.set_function(lambda: self._open)
        self._body_bytes = 0
        self._review_slots = asyncio.Semaphore(self._limits.workers)  # bound to the loop on use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._running = threading.Event()
        self._shut = threading.Event()
        """Set by `shutdown`: the server loop ending then is expected."""
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    def use_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve this certificate from the next connection on."""
        self._context = server_context(cert_pem, key_pem)
        self.serving.set()

    def start(self, health: Health | None = None) -> None:
        """Serve in a thread of its own; with `health`, a server loop that ends before
        `shutdown` (a bug) fails /healthz instead of leaving the webhook quietly gone."""
        self._thread = supervised(
            "webhook", lambda _stop: asyncio.run(self._serve()), self._shut, health or Health()
        )
        self._running.wait(5)

    def shutdown(self) -> None:
        self._shut.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread is not None:
            loop.call_soon_threadsafe(stopping.set)
            self._thread.join(5)
        self._socket.close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # `limit` bounds what readuntil() buffers looking for the end of the headers. `backlog`:
        # asyncio listens on the socket again with its own (100) unless told; connections
        # that arrive while the loop is busy wait in the kernel's queue, as many as the server
        # would hold, instead of being dropped there and retried by TCP 1 s (then 3 s) later,
        # past the webhook's timeout (measured: 300 slow clients overflowed a queue of 100
        # whenever the loop paused, and a review waited 1 s for its connection).
        server = await asyncio.start_server(
            self._connection,
            sock=self._socket,
            limit=self._limits.max_header_bytes,
            backlog=self._limits.max_connections,
        )
        self._running.set()
        async with server:
            await self._stopping.wait()
        # asyncio.run cancels the connections still open when this returns.

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        context = self._context
        if context is None or self._open >= self._limits.max_connections:
            writer.transport.abort()  # refused at once: no certificate yet, or at the cap
            if context is not None:
                self._refused("connections")
            return
        self._open += 1
        peer = writer.get_extra_info("peername")
        try:
            sock = writer.get_extra_info("socket")
            # Head and body leave as one write, but a kept-alive connection's next answer must
            # not wait for the peer's delayed ACK either (measured: 56 ms a create, now 16).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = asyncio.get_running_loop().time() + self._limits.request_deadline_seconds
            async with asyncio.timeout_at(deadline):
                await writer.start_tls(context)
            await self._requests(reader, writer, deadline)
        # A client too slow for the deadline: cut, counted (a debug line: an attack must not
        # flood the log).
        except TimeoutError:
            self._refused("deadline")
            log.debug("webhook request past its deadline", extra={"client": str(peer)})
        # A client that is gone or speaks no TLS: close it, log it, keep serving.
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError) as err:
            log.debug("webhook connection closed", extra={"client": str(peer), "why": repr(err)})
        # A bug here must cost one connection, never the loop that serves them all.
        except Exception:
            log.exception("webhook connection failed", extra={"client": str(peer)})
        finally:
            self._open -= 1
            writer.transport.abort()

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deadline: float
    ) -> None:
        """Serve requests on one connection until it closes, each under its own deadline."""
        loop = asyncio.get_running_loop()
        limits = self._limits
        first = b""
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    head = first + await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                self._refused("headers")
                await self._reply(writer, 431, "request line and headers too large", deadline)
                return
            request = parse_head(head, limits.max_headers)
            if isinstance(request, Refusal):
                if request.status == 431:
                    self._refused("headers")
                await self._reply(writer, request.status, request.reason, deadline)
                return
            keep = await self._answer(request, reader, writer, deadline)
            if not keep:
                return
            try:
                async with asyncio.timeout(limits.idle_seconds):
                    first = await reader.readexactly(1)  # the next request's first byte
            # Idle for long enough, or closed by the client: the usual end of a connection.
            except (TimeoutError, asyncio.IncompleteReadError):
                return
            deadline = loop.time() + limits.request_deadline_seconds

    async def _answer(
        self,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        deadline: float,
    ) -> bool:
        """Answer one request whose head is read; True if the connection may serve another."""
        if request.method != "POST":
            return await self._reply(writer, 405, "POST an AdmissionReview", deadline, request)
        if urlsplit(request.target).path != self._path:
            return await self._reply(
                writer, 404, f"no webhook at {request.target[:100]}", deadline, request
            )
        length = request.content_length
        if length is None:
            await self._reply(writer, 411, "a Content-Length header is required", deadline)
            return False
        if length > self._max_body_bytes:
            # Refused unread; the connection closes so the rest is never read either.
            reason = f"body of {length} bytes; at most {self._max_body_bytes} are read"
            log.warning("admission review refused", extra={"reason": reason})
            await self._reply(writer, 413, reason, deadline)
            return False
        if self._body_bytes + length > self._limits.max_body_bytes_in_flight:
            self._refused("body_budget")
            await self._reply(writer, 503, "too many request bodies in flight; retry", deadline)
            return False
        self._body_bytes += length
        try:
            if request.expects_continue:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                async with asyncio.timeout_at(deadline):
                    body = await reader.readexactly(length)
                    await self._review_slots.acquire()  # a free review thread, within the deadline
            except asyncio.IncompleteReadError:
                await self._reply(writer, 400, "body shorter than its Content-Length", deadline)
                return False
            try:
                loop = asyncio.get_running_loop()
                status, answer = await loop.run_in_executor(self._workers, self._review, body)
            finally:
                self._review_slots.release()
        finally:
            self._body_bytes -= length
        return await self._send(writer, status, answer, request.keep_alive)

    def _refused(self, limit: str) -> None:
        self._metrics.refused.labels(limit).inc()

    async def _reply(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        reason: str,
        deadline: float,
        request: Request | None = None,
    ) -> bool:
        """An error answer; the connection is kept only after a well-formed, fully read request."""
        keep = request is not None and request.keep_alive and request.content_length in (None, 0)
        async with asyncio.timeout_at(max(deadline, asyncio.get_running_loop().time() + 1)):
            return await self._send(writer, status, error_body(reason), keep)

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, keep: bool
    ) -> bool:
        phrase = HTTPStatus(status).phrase
        close = "" if keep else "Connection: close\r\n"
        head = (
            f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{close}\r\n"
        )
        writer.write(head.encode("ascii") + body)
        # A client that does not read its answer is cut like one that does not send.
        async with asyncio.timeout(self._limits.request_deadline_seconds):
            await writer.drain()
        return keep


def serve_webhook(
    settings: ReconcilerSettings,
    rules: RulesProvider,
    registry: CollectorRegistry,
    stop: threading.Event,
    health: Health,
) -> WebhookServer:
    """Start the webhook and the loop that keeps its certificate."""
    webhook = settings.webhook
    assert webhook is not None
    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig else None
    api = WebhookKubeApi(load_api_client(kubeconfig), webhook.lookup_timeout_seconds)
    metrics = WebhookMetrics(registry)
    namespace = settings.records_namespace
    lookup = RecordLookup(api, namespace, webhook.lookup_timeout_seconds, metrics)
    clock = AnchoredClock(api.server_time)  # NoExecute taints' timeAdded, as the reconciler's
    admission = NodeAdmission(rules, lookup, metrics, clock.now_or_host)
    server = WebhookServer(webhook.address, webhook.port, webhook.path, admission.review, metrics)
    source: SecretCertificates | FileCertificates
    if webhook.cert_dir is not None:
        source = FileCertificates(webhook.cert_dir, server.use_certificate)
    else:
        source = SecretCertificates(
            api,
            namespace,
            webhook.tls_secret,
            webhook.configuration,
            webhook.certificate_hosts(namespace),
            server.use_certificate,
        )
    server.start(health)
    supervised("webhook-clock", clock.follow, stop, health)
    certificates = partial(keep_syncing, source.sync, webhook.cert_check_seconds)
    supervised("webhook-certificates", certificates, stop, health)
    log.info(
        "webhook starting",
        extra={"port": server.port, "path": webhook.path, "certificates": type(source).__name__},
    )
    return server
