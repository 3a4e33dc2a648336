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
import http.client
import io
import logging
import os
import resource
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from http import HTTPStatus
from pathlib import Path
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
"""A kept-alive connection idle this long between requests is closed."""
REQUEST_DEADLINE_SECONDS = 0.5
"""The whole-request deadline: reading a request (its TLS handshake too, on a new connection)
and getting a review thread. The API server sends a review at once and waits `timeoutSeconds`
(2 s by default, manifests/webhook.py) for the answer: 0.5 s here plus the record lookup's
budget (1 s) leaves the answer well inside it."""


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


@dataclass(frozen=True)
class ServerLimits:
    """What one replica's webhook server gives any client, whoever it is.

    The port is reachable by whatever can reach the pod (admission webhooks are not
    authenticated), and the server runs in the leader's process; under `failurePolicy: Fail` a
    starved server blocks node registration, under `Ignore` nodes are born ungated. So every
    resource a client can hold is bounded, and past a bound the client is refused at once
    (connection closed, or 503) instead of queued behind the others: the API server then
    applies the failure policy now, not at its timeout.
    """

    max_connections: int = 512
    """Open connections at once; one more is accepted and closed at once. A connection costs a
    socket, a coroutine and TLS buffers (tens of KiB), not a thread, so the cap can sit above
    any number of slow clients a legitimate review must still get past; it is lowered to leave
    the process 128 descriptors under its open-file limit, so the API client never runs out."""
    request_deadline_seconds: float = REQUEST_DEADLINE_SECONDS
    """From a request's first byte (from the accept, TLS handshake included, for a connection's
    first request) to the end of its body and a free review worker; past it the connection is
    closed, however steadily the client trickles bytes."""
    idle_seconds: float = SOCKET_TIMEOUT_SECONDS
    """How long a kept-alive connection may wait for its next request."""
    max_header_bytes: int = 16 * 1024
    """Request line and headers together; more is answered 431 and the connection closed."""
    max_headers: int = 64
    """Header lines; more is answered 431 (the API server sends about ten)."""
    workers: int = 8
    """Threads that run reviews (the record lookup is a blocking API call)."""
    max_body_bytes_in_flight: int = 16 * 1024 * 1024
    """Bodies held at once across connections; a request that would exceed it is answered 503
    unread, so many large bodies cannot exhaust the container's memory."""


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
        max_body_bytes: int = MAX_BODY_BYTES,
        limits: ServerLimits | None = None,
        metrics: WebhookMetrics | None = None,
    ) -> None:
        self.serving = threading.Event()
        """Set once a certificate is loaded: before, connections are closed at once."""
        self._path = path
        self._review = review
        self._max_body_bytes = max_body_bytes
        self._limits = _within_open_file_limit(limits or ServerLimits())
        self._metrics = metrics
        self._context: ssl.SSLContext | None = None
        # Bound now, so the port is known (and taken) before the server starts.
        self._socket = socket.create_server((address, port), backlog=128)
        self._workers = ThreadPoolExecutor(self._limits.workers, "webhook-review")
        self._open = 0
        self._body_bytes = 0
        self._review_slots = asyncio.Semaphore(self._limits.workers)  # bound to the loop on use
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._running = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        port: int = self._socket.getsockname()[1]
        return port

    @property
    def open_connections(self) -> int:
        """Connections held right now (for tests and the curious)."""
        return self._open

    def use_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve this certificate from the next connection on."""
        self._context = server_context(cert_pem, key_pem)
        self.serving.set()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve()), name="webhook", daemon=True
        )
        self._thread.start()
        self._running.wait(5)

    def shutdown(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread is not None:
            loop.call_soon_threadsafe(stopping.set)
            self._thread.join(5)
        self._socket.close()
        self._workers.shutdown(wait=False, cancel_futures=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # `limit` bounds what readuntil() buffers looking for the end of the headers.
        server = await asyncio.start_server(
            self._connection, sock=self._socket, limit=self._limits.max_header_bytes
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
        self._count_open()
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
            self._count_open()
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
            request = _parse_head(head, limits.max_headers)
            if isinstance(request, _Refusal):
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
        request: _Request,
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
        if self._metrics is not None:
            self._metrics.refused.labels(limit).inc()

    def _count_open(self) -> None:
        if self._metrics is not None:
            self._metrics.open_connections.set(self._open)

    async def _reply(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        reason: str,
        deadline: float,
        request: _Request | None = None,
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


def _within_open_file_limit(limits: ServerLimits) -> ServerLimits:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or limits.max_connections <= soft - 128:
        return limits
    return replace(limits, max_connections=max(1, soft - 128))


@dataclass(frozen=True)
class _Refusal:
    status: int
    reason: str


@dataclass(frozen=True)
class _Request:
    method: str
    target: str
    keep_alive: bool
    content_length: int | None
    expects_continue: bool


def _parse_head(head: bytes, max_headers: int) -> _Request | _Refusal:
    """The request line and headers (already bounded in size), or what is wrong with them.

    The header block is parsed by the standard library's own parser (`http.client`), as
    `http.server` does; chunked bodies are refused (the API server always sends a length)."""
    line, _, rest = head.partition(b"\r\n")
    if rest.count(b"\r\n") - 1 > max_headers:
        return _Refusal(431, f"more than {max_headers} headers")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return _Refusal(400, "not an HTTP/1.x request line")
    method, target, version = parts
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    # Malformed headers (over-long lines, too many, undecodable): refused like a bad request.
    except (http.client.HTTPException, ValueError) as err:
        status = 431 if isinstance(err, http.client.HTTPException) else 400
        return _Refusal(status, f"unreadable headers: {type(err).__name__}")
    if headers.get("Transfer-Encoding") is not None:
        return _Refusal(400, "chunked bodies are not accepted: send a Content-Length")
    raw_length = headers.get("Content-Length")
    length: int | None = None
    if raw_length is not None:
        if not raw_length.strip().isdigit():
            return _Refusal(400, "Content-Length is not a number")
        length = int(raw_length)
    connection = (headers.get("Connection") or "").lower()
    keep_alive = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
    expects = (headers.get("Expect") or "").lower() == "100-continue"
    return _Request(method, target, keep_alive, length, expects)


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
    server = WebhookServer(
        webhook.address, webhook.port, webhook.path, admission.review, metrics=metrics
    )
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
