"""The calls on a change's path (a Node's patch, an Event) go straight to urllib3 (`Direct`),
not through the generated client: on a real socket, they send what the client sent (method,
path, query, body, content type, User-Agent, the credentials of the moment), a refusal is the
same error kind as before, and the patch's answer (the whole Node) is never decoded."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from nodegate.reconciler.kit.errors import (
    ConflictError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    ThrottledError,
    TimedOutError,
)
from nodegate.reconciler.kit.kube import KubeApi

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED_NODE = (DATA / "kubelet-node.json").read_bytes()
"""A real kubelet's Node as the API server answered a GET: what a patch's answer carries."""


class Recording(ThreadingHTTPServer):
    """Answers every request with the next of `answers` (status, headers, body) and keeps what
    it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.answers: list[tuple[int, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recording

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": {key.lower(): value for key, value in self.headers.items()},
                "body": json.loads(self.rfile.read(length)) if length else None,
            }
        )
        status, headers, body = (
            self.server.answers.pop(0) if self.server.answers else (200, {}, b"{}")
        )
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PATCH(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[Recording]:
    recording = Recording()
    thread = threading.Thread(target=recording.serve_forever, daemon=True)
    thread.start()
    try:
        yield recording
    finally:
        recording.shutdown()
        recording.server_close()


def _api(server: Recording, token: str | None = None) -> KubeApi:
    configuration = client.Configuration(host=server.url)
    if token is not None:
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return KubeApi(client.ApiClient(configuration))


PATCH = {
    "metadata": {"resourceVersion": "41"},
    "spec": {"taints": [{"key": "readiness.k8s.io/TestReady", "effect": "NoSchedule"}]},
}


def test_a_node_patch_sends_what_the_generated_client_sent(server: Recording) -> None:
    api = _api(server, token="t0k3n")
    server.answers.append((200, {}, RECORDED_NODE))
    api.patch_node("node/a b", PATCH)
    (sent,) = server.requests
    assert sent["method"] == "PATCH"
    assert sent["path"] == "/api/v1/nodes/node%2Fa%20b?fieldManager=nodegate"
    assert sent["body"] == PATCH
    assert sent["headers"]["content-type"] == "application/merge-patch+json"
    assert sent["headers"]["authorization"] == "Bearer t0k3n"
    assert sent["headers"]["user-agent"] == client.ApiClient().user_agent
    assert sent["headers"]["accept"] == "application/json"


def test_the_credentials_are_read_at_each_request_so_a_rotated_token_is_sent(
    server: Recording,
) -> None:
    api = _api(server, token="old")
    tokens = iter(["new"])

    def rotate(configuration: client.Configuration) -> None:
        configuration.api_key["BearerToken"] = next(tokens, "new")

    api.api_client.configuration.refresh_api_key_hook = rotate
    api.patch_node("a", PATCH)
    assert server.requests[0]["headers"]["authorization"] == "Bearer new"


def test_a_patch_answer_is_not_decoded(server: Recording) -> None:
    """The answer is drained unread: one that is not even JSON is no error (decoding it was
    `answer is not JSON`, a TemporaryError)."""
    server.answers.append((200, {}, RECORDED_NODE[: len(RECORDED_NODE) // 2]))
    _api(server).patch_node("a", PATCH)  # no TemporaryError: the answer was never decoded


def test_patches_reuse_one_connection_once_each_answer_is_drained(server: Recording) -> None:
    api = _api(server)
    for _ in range(3):
        server.answers.append((200, {}, RECORDED_NODE))
        api.patch_node("a", PATCH)
    pool = api.api_client.rest_client.pool_manager.connection_from_url(server.url)
    assert pool.num_connections == 1
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "headers", "kind"),
    [
        (409, {}, ConflictError),
        (404, {}, NotFoundError),
        (429, {"Retry-After": "3"}, ThrottledError),
        (503, {}, TemporaryError),
        (422, {}, PermanentError),
    ],
    ids=["conflict", "gone", "throttled", "unavailable", "invalid"],
)
def test_a_refused_patch_is_the_same_error_kind_as_through_the_generated_client(
    server: Recording, status: int, headers: dict[str, str], kind: type[Exception]
) -> None:
    body = json.dumps({"kind": "Status", "code": status, "message": "refused: why"}).encode()
    server.answers.append((status, headers, body))
    with pytest.raises(kind) as raised:
        _api(server).patch_node("a", PATCH)
    assert "refused: why" in str(raised.value)
    if status == 429:
        assert isinstance(raised.value, ThrottledError)
        assert raised.value.retry_after == 3.0
    if status == 422:
        assert isinstance(raised.value, PermanentError)
        assert raised.value.status == 422


def test_a_patch_to_nothing_listening_is_a_temporary_error() -> None:
    configuration = client.Configuration(host="http://127.0.0.1:9")  # discard: refused
    api = KubeApi(client.ApiClient(configuration))
    with pytest.raises(TemporaryError):
        api.patch_node("a", PATCH)


def test_an_event_is_created_and_its_count_patched_in_its_namespace(server: Recording) -> None:
    api = _api(server)
    created = {"metadata": {"name": "a.nodegate.x1", "namespace": "default"}}
    server.answers.append((201, {}, json.dumps(created).encode()))
    assert api.create_event("default", {"reason": "NodegateUpdated"}) == created
    server.answers.append((200, {}, json.dumps(created).encode()))
    api.patch_event("default", "a.nodegate.x1", {"count": 2})
    post, patch = server.requests
    assert (post["method"], post["path"]) == ("POST", "/api/v1/namespaces/default/events")
    assert post["headers"]["content-type"] == "application/json"
    assert post["body"] == {"reason": "NodegateUpdated"}
    assert (patch["method"], patch["path"]) == (
        "PATCH",
        "/api/v1/namespaces/default/events/a.nodegate.x1",
    )
    assert patch["headers"]["content-type"] == "application/merge-patch+json"


class Scripted:
    """A socket server that answers the first request with `head`, then `body` in pieces of
    `piece` bytes every `pause` seconds (a stalled or trickling answer)."""

    def __init__(self, head: bytes, body: bytes, piece: int, pause: float) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._answer = (head, body, piece, pause)
        self._done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        connection, _ = self._listener.accept()
        head, body, piece, pause = self._answer
        with contextlib.suppress(OSError):
            connection.recv(65536)
            connection.sendall(head)
            for start in range(0, len(body), piece):
                if self._done.wait(pause):
                    break
                connection.sendall(body[start : start + piece])
            self._done.wait(30)
        connection.close()

    def close(self) -> None:
        self._done.set()
        self._listener.close()


def _answer_head(status: str, content_type: str, length: int) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def test_a_2xx_answer_that_is_not_the_api_servers_json_is_a_temporary_error(
    server: Recording,
) -> None:
    """A proxy's login page (200, text/html) said nothing was written: counted as written, it
    made a false NodegateUpdated Event."""
    server.answers.append((200, {"Content-Type": "text/html"}, b"<html>log in</html>"))
    with pytest.raises(TemporaryError, match="not JSON"):
        _api(server).patch_node("a", PATCH)


def test_a_refusal_whose_body_stalls_is_a_timeout_not_a_refusal_without_its_words() -> None:
    """A fence refusal is known by its body's words: read by the client's exception, a stalled
    body became None and the 403 a refusal of unknown kind (the node waited for a resync)."""
    body = json.dumps({"kind": "Status", "code": 403, "message": "nodegate-fence ..."}).encode()
    scripted = Scripted(_answer_head("403 Forbidden", "application/json", len(body)), body, 1, 10)
    try:
        api = KubeApi(client.ApiClient(client.Configuration(host=scripted.url))).within(2)
        with pytest.raises(TimedOutError):
            api.patch_node("a", PATCH)
    finally:
        scripted.close()


def test_an_answer_trickling_in_ends_the_patch_within_its_deadline() -> None:
    """urllib3's read timeout is per read: a byte every 0.2 s never trips it, and the worker (and
    the fence's writes in flight) waited 80 s. The whole answer now has the read deadline."""
    node = RECORDED_NODE[:400]
    scripted = Scripted(_answer_head("200 OK", "application/json", len(node)), node, 1, 0.2)
    try:
        api = KubeApi(client.ApiClient(client.Configuration(host=scripted.url))).within(2)
        started = time.monotonic()
        api.patch_node("a", PATCH)  # written (the 2xx head said so); its answer given up
        assert time.monotonic() - started < 6
    finally:
        scripted.close()
