"""The HTTP below the AdmissionReview: what any client may hold of the webhook server, and the
request head read within those bounds.

Hand-written over the standard library's header parser (why no server library: `WebhookServer`,
and docs/reconciler.md, "Node admission webhook").
"""

from __future__ import annotations

import http.client
import io
import resource
from dataclasses import dataclass, replace

REQUEST_DEADLINE_SECONDS = 0.5
"""The whole-request deadline: reading a request (its TLS handshake too, on a new connection)
and getting a review thread. The API server sends a review at once and waits `timeoutSeconds`
(2 s by default, manifests/webhook.py) for the answer: 0.5 s here plus the record lookup's
budget (1 s) leaves the answer well inside it."""


@dataclass(frozen=True)
class ServerLimits:
    """What one replica's webhook server gives any client, whoever it is.

    The port is reachable by whatever can reach the pod (admission webhooks are not
    authenticated), and it runs in every replica's process, the leader's too; under
    `failurePolicy: Fail` a starved server blocks node registration, under `Ignore` nodes are
    born ungated. So every resource a client can hold is bounded, and past a bound the client
    is refused at once (connection closed, or 503) instead of queued behind the others: the
    API server then applies the failure policy now, not at its timeout.
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
    idle_seconds: float = 10.0
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


def within_open_file_limit(limits: ServerLimits) -> ServerLimits:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or limits.max_connections <= soft - 128:
        return limits
    return replace(limits, max_connections=max(1, soft - 128))


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    keep_alive: bool
    content_length: int | None
    expects_continue: bool


def parse_head(head: bytes, max_headers: int) -> Request | Refusal:
    """The request line and headers (already bounded in size), or what is wrong with them.

    The header block is parsed by the standard library's own parser (`http.client`), as
    `http.server` does; chunked bodies are refused (the API server always sends a length)."""
    line, _, rest = head.partition(b"\r\n")
    if rest.count(b"\r\n") - 1 > max_headers:
        return Refusal(431, f"more than {max_headers} headers")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return Refusal(400, "not an HTTP/1.x request line")
    method, target, version = parts
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    # Malformed headers (over-long lines, too many, undecodable): refused like a bad request.
    except (http.client.HTTPException, ValueError) as err:
        status = 431 if isinstance(err, http.client.HTTPException) else 400
        return Refusal(status, f"unreadable headers: {type(err).__name__}")
    if headers.get("Transfer-Encoding") is not None:
        return Refusal(400, "chunked bodies are not accepted: send a Content-Length")
    raw_length = headers.get("Content-Length")
    length: int | None = None
    if raw_length is not None:
        if not raw_length.strip().isdigit():
            return Refusal(400, "Content-Length is not a number")
        length = int(raw_length)
    connection = (headers.get("Connection") or "").lower()
    keep_alive = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
    expects = (headers.get("Expect") or "").lower() == "100-continue"
    return Request(method, target, keep_alive, length, expects)
