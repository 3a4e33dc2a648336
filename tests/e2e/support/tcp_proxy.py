"""A loopback TCP proxy that can black-hole its traffic: one client's view of an API-server
outage (a network partition), while other clients still reach the server.

Hand-written test support (no library offers a partition switch on loopback): bytes are pumped
both ways by two threads per connection. `partition()` stops forwarding on every open
connection without closing it (no FIN, no RST): what a stuck load balancer or a NAT that dropped
its state does, so requests hang until the client's own deadline, the hardest case to notice.
Those connections stay dead after `heal()`, as they would behind a NAT that forgot them; only
new connections work again. During the partition new connections are black-holed the same way,
or, with `refuse_new=True`, refused (reset at once) as by a load balancer with no backend.

`hold()` is a delay, not a loss: what clients send is kept, in order, and `release()` delivers
it upstream (a request stuck in a slow network path that arrives late); answers still flow.

`cut_answers_over(limit)` breaks answers off in the middle: once an answer (what the server sent
since the client last sent anything) grows past `limit` bytes, its first `limit` bytes are
forwarded and the connection is reset, so the client has the answer's head and part of its
body (a flaky link, a middlebox that drops long transfers). Bytes are counted through TLS, so
the cut falls in the body of any answer much longer than its head.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class _Link:
    """One client connection and its upstream; `dead` once a partition caught it."""

    sockets: tuple[socket.socket, socket.socket]
    dead: threading.Event = field(default_factory=threading.Event)
    held: list[bytes] = field(default_factory=list)
    """Bytes from the client kept by `hold()`, sent upstream in order by `release()`."""
    sending: threading.Lock = field(default_factory=threading.Lock)
    answered: int = 0
    cut: threading.Event = field(default_factory=threading.Event)
    """Bytes from the server since the client last sent any (`cut_answers_over`)."""


class PartitionProxy:
    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._partitioned = False
        self._refusing = False
        self._holding = False
        self.held_bytes = 0
        """Bytes kept since the last `hold()`."""
        self._cut_over: int | None = None
        self.cuts = 0
        """Answers broken off by `cut_answers_over`."""
        self._closing = threading.Event()
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def partition(self, refuse_new: bool = False) -> None:
        """Stop forwarding on every open connection, for good; new ones are black-holed too,
        or refused with `refuse_new`, until `heal()`."""
        with self._lock:
            self._partitioned, self._refusing = True, refuse_new
            for link in self._links:
                link.dead.set()

    def hold(self) -> None:
        """Keep what every client sends (open and new connections) instead of sending it."""
        with self._lock:
            self._holding = True
            self.held_bytes = 0

    def release(self) -> None:
        """Send upstream, in order, all that was kept, and forward as usual again."""
        with self._lock:
            self._holding = False
            links = list(self._links)
        for link in links:
            with link.sending:
                self._flush(link)

    @staticmethod
    def _flush(link: _Link) -> None:
        held, link.held = link.held, []
        for data in held:
            with contextlib.suppress(OSError):
                link.sockets[1].sendall(data)

    def cut_answers_over(self, limit: int | None) -> None:
        """Reset every connection whose answer grows past `limit` bytes, after forwarding that
        many (None: stop)."""
        with self._lock:
            self._cut_over = limit

    def heal(self) -> None:
        """New connections work again (the ones the partition caught stay dead)."""
        with self._lock:
            self._partitioned = self._refusing = False

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            sockets = [self._listener, *(s for link in self._links for s in link.sockets)]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refusing, partitioned = self._refusing, self._partitioned
            if refusing:
                # SO_LINGER 0: close with RST, as a refused connection looks to the client.
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link((client, upstream))
            if partitioned:
                link.dead.set()
            with self._lock:
                self._links.append(link)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(link, source, target), daemon=True
                ).start()

    def _cut(self, link: _Link, data: bytes) -> bool:
        """Forward an answer's bytes up to the cut limit and reset both sides there; False when
        the answer stays within it."""
        with self._lock:
            limit = self._cut_over
        link.answered += len(data)
        if limit is None or link.answered <= limit:
            return False
        client, upstream = link.sockets
        with contextlib.suppress(OSError):
            client.sendall(data[: max(0, limit - (link.answered - len(data)))])
        with self._lock:
            self.cuts += 1
        link.cut.set()
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                # SO_LINGER 0: close with RST, as a broken link looks to the client; SHUT_RD
                # first wakes the other pump's read, which holds the socket open until then.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RD)
            with contextlib.suppress(OSError):
                sock.close()
        return True

    def _pump(self, link: _Link, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if link.dead.is_set():
                    # Black-holed: hold the bytes and the connection, say nothing, for good.
                    self._closing.wait()
                    return
                if target is not link.sockets[1]:
                    if self._cut(link, data):
                        return
                    target.sendall(data)
                    continue
                link.answered = 0
                with link.sending:
                    with self._lock:
                        holding = self._holding
                        self.held_bytes += len(data) if holding else 0
                    if holding:
                        link.held.append(data)
                        continue
                    self._flush(link)
                    target.sendall(data)
        except OSError:
            pass
        if link.dead.is_set():
            self._closing.wait()  # a dead path carries no FIN either
            return
        if link.cut.is_set():
            return  # reset by `_cut`: no FIN after the RST
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def partition_proxy(upstream_port: int) -> Iterator[PartitionProxy]:
    proxy = PartitionProxy(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()
