"""Every call the reconciler makes goes straight to urllib3 (`Direct`), none through the official
client's generated API classes (their making cost a start about half its CPU): on a real socket,
each sends the request the generated client sent (method, path, query spelled as the API server
reads it, body and content type, no body on a GET), and each answer and refusal reads as before.
The Node's patch and the Events: test_direct_writes.py; the liveness bounds:
test_kube_liveness.py and test_lease_api.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from nodegate.reconciler.kit.errors import (
    ConflictError,
    GoneError,
    PermanentError,
    TemporaryError,
    ThrottledError,
)
from nodegate.reconciler.kit.kube import KubeApi, Selection
from nodegate.reconciler.kit.lease import KubeLeaseApi
from nodegate.reconciler.nodes.fence.fence_policy import check_server_fence
from nodegate.reconciler.settings import LeaderElectionSettings
from nodegate.reconciler.webhook.api import WebhookKubeApi

Answer = tuple[int, dict[str, str], bytes]


class Recording(ThreadingHTTPServer):
    """Answers every request with the next of `answers` (status, headers, body; `{}` when
    none is left) and keeps what it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.answers: list[Answer] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(
        self, body: object, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        self.answers.append((status, headers or {}, json.dumps(body).encode()))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recording

    def _answer(self) -> None:
        length = self.headers.get("Content-Length")
        raw = self.rfile.read(int(length)) if length else b""
        url = urlsplit(self.path)
        self.server.requests.append(
            {
                "method": self.command,
                "path": url.path,
                "raw_query": url.query,
                "query": {key: values[0] for key, values in parse_qs(url.query).items()},
                "headers": {key.lower(): value for key, value in self.headers.items()},
                "raw_body": raw,
                "body": json.loads(raw) if raw else None,
            }
        )
        status, headers, body = (
            self.server.answers.pop(0) if self.server.answers else (200, {}, b"{}")
        )
        self.send_response_only(status)  # no Date of the handler's own: an answer's headers
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815 (http.server's names)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[Recording]:
    recording = Recording()
    thread = threading.Thread(target=recording.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield recording
    finally:
        recording.shutdown()
        recording.server_close()


@pytest.fixture
def api_client(server: Recording, monkeypatch: pytest.MonkeyPatch) -> client.ApiClient:
    """The official client, configured as `load_api_client` makes it, whose generated-call path
    fails the test if anything takes it."""

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a call went through the generated client")

    monkeypatch.setattr(client.ApiClient, "param_serialize", refused)
    monkeypatch.setattr(client.ApiClient, "call_api", refused)
    configuration = client.Configuration(host=server.url)
    configuration.api_key = {"BearerToken": "t0k3n"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


@pytest.fixture
def api(api_client: client.ApiClient) -> KubeApi:
    return KubeApi(api_client)


def _no_body(sent: dict[str, Any]) -> None:
    """A GET as the generated client sent it: no body, so no Content-Type either."""
    assert sent["raw_body"] == b""
    assert "content-type" not in sent["headers"]
    assert sent["headers"].get("content-length") in (None, "0")


def _sent_as_the_client_sent(sent: dict[str, Any]) -> None:
    assert sent["headers"]["authorization"] == "Bearer t0k3n"
    assert sent["headers"]["accept"] == "application/json"
    assert sent["headers"]["user-agent"] == client.ApiClient().user_agent


@pytest.mark.parametrize(
    ("selection", "path"),
    [
        (Selection("Node"), "/api/v1/nodes"),
        (Selection("Node", namespace="ignored"), "/api/v1/nodes"),
        (Selection("ConfigMap", namespace="nodegate"), "/api/v1/namespaces/nodegate/configmaps"),
        (Selection("ConfigMap"), "/api/v1/configmaps"),
        (Selection("Pod", namespace="kube-system"), "/api/v1/namespaces/kube-system/pods"),
        (Selection("Pod"), "/api/v1/pods"),
        (Selection("DaemonSet", namespace="ds"), "/apis/apps/v1/namespaces/ds/daemonsets"),
        (Selection("DaemonSet"), "/apis/apps/v1/daemonsets"),
        (Selection("CSINode"), "/apis/storage.k8s.io/v1/csinodes"),
        (Selection("NodeRules"), "/apis/nodegate.dev/v1/noderules"),
    ],
    ids=lambda value: value if isinstance(value, str) else f"{value.kind}/{value.namespace}",
)
def test_each_kind_is_listed_and_watched_where_the_api_server_serves_it(
    server: Recording, api: KubeApi, selection: Selection, path: str
) -> None:
    api.list_page(selection, 10, None)
    list(api.watch(selection, "5", timeout_seconds=20))
    listed, watched = server.requests
    assert (listed["method"], listed["path"]) == ("GET", path)
    assert (watched["method"], watched["path"]) == ("GET", path)


def test_a_list_page_asks_with_its_selectors_and_continue_token_and_reads_the_page(
    server: Recording, api: KubeApi
) -> None:
    labels = "app in (a,b),tier!=db,!gone,x=y"
    fields = "spec.nodeName=node/1 a"
    selection = Selection("Pod", "kube-system", field_selector=fields, label_selector=labels)
    server.answer(
        {
            "metadata": {"resourceVersion": "42", "continue": "next+/="},
            "items": [{"metadata": {"name": "p1"}}],
        }
    )
    page = api.list_page(selection, 500, "tok+/=&x")
    (sent,) = server.requests
    assert sent["query"] == {
        "limit": "500",
        "fieldSelector": fields,
        "labelSelector": labels,
        "continue": "tok+/=&x",
    }
    assert "+" not in sent["raw_query"]  # spaces as %20, a `+` as %2B: as the client sent them
    _no_body(sent)
    _sent_as_the_client_sent(sent)
    assert page.items == [{"metadata": {"name": "p1"}}]
    assert (page.resource_version, page.continue_token) == ("42", "next+/=")


def test_a_first_page_sends_no_continue_token(server: Recording, api: KubeApi) -> None:
    api.list_page(Selection("Node"), 500, None)
    assert server.requests[0]["query"] == {"limit": "500"}


def test_a_watch_asks_for_bookmarks_and_its_server_side_timeout_and_reads_events(
    server: Recording, api: KubeApi
) -> None:
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "6"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}},
    ]
    server.answers.append((200, {}, b"".join(json.dumps(e).encode() + b"\n" for e in events)))
    selection = Selection("Node", label_selector="nodegate.dev/pool=gpu")
    got = list(api.watch(selection, "5", timeout_seconds=23))
    (sent,) = server.requests
    assert sent["query"] == {
        "watch": "true",
        "resourceVersion": "5",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "23",
        "labelSelector": "nodegate.dev/pool=gpu",
    }
    _no_body(sent)
    assert got == [(e["type"], e["object"]) for e in events]


def test_an_expired_watch_is_gone(server: Recording, api: KubeApi) -> None:
    error = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    server.answers.append((200, {}, json.dumps(error).encode() + b"\n"))
    with pytest.raises(GoneError):
        list(api.watch(Selection("Node"), "1", timeout_seconds=20))


def test_reads_are_gets_and_a_missing_object_is_none(server: Recording, api: KubeApi) -> None:
    server.answer({"kind": "Status", "code": 404}, status=404)
    assert api.get_node("gone") is None
    server.answer({"metadata": {"name": "history"}})
    assert api.read_configmap("nodegate", "history") == {"metadata": {"name": "history"}}
    server.answer({"metadata": {"name": "noderules.nodegate.dev"}})
    assert api.read_crd("noderules.nodegate.dev") is not None
    paths = [(sent["method"], sent["path"], sent["query"]) for sent in server.requests]
    assert paths == [
        ("GET", "/api/v1/nodes/gone", {}),
        ("GET", "/api/v1/namespaces/nodegate/configmaps/history", {}),
        (
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/noderules.nodegate.dev",
            {},
        ),
    ]
    for sent in server.requests:
        _no_body(sent)


def test_writes_carry_the_field_manager_their_content_type_and_their_body(
    server: Recording, api: KubeApi
) -> None:
    body = {"metadata": {"name": "history", "resourceVersion": "3"}, "data": {"a": "b"}}
    patch = {"metadata": {"resourceVersion": "3"}, "data": {"a": None}}
    status = {"status": {"conditions": [{"type": "NodegateOci", "status": "True"}]}}
    for _ in range(5):
        server.answer({"metadata": {"name": "answer"}})
    assert api.create_configmap("nodegate", body) == {"metadata": {"name": "answer"}}
    api.replace_configmap("nodegate", "history", body)
    api.patch_configmap("nodegate", "history", patch)
    api.patch_node_status("n1", status)
    api.patch_noderules_status("team-a", {"status": {"observedGeneration": 2}})
    sent = [
        (s["method"], s["path"], s["query"], s["headers"]["content-type"], s["body"])
        for s in server.requests
    ]
    manager = {"fieldManager": "nodegate"}
    merge, json_, strategic = (
        "application/merge-patch+json",
        "application/json",
        "application/strategic-merge-patch+json",
    )
    assert sent == [
        ("POST", "/api/v1/namespaces/nodegate/configmaps", manager, json_, body),
        ("PUT", "/api/v1/namespaces/nodegate/configmaps/history", manager, json_, body),
        ("PATCH", "/api/v1/namespaces/nodegate/configmaps/history", manager, merge, patch),
        ("PATCH", "/api/v1/nodes/n1/status", manager, strategic, status),
        (
            "PATCH",
            "/apis/nodegate.dev/v1/noderules/team-a/status",
            manager,
            merge,
            {"status": {"observedGeneration": 2}},
        ),
    ]
    for request in server.requests:
        _sent_as_the_client_sent(request)


def test_a_delete_sends_its_precondition(server: Recording, api: KubeApi) -> None:
    server.answer({"kind": "Status", "status": "Success"})
    api.delete_configmap("nodegate", "labels-a", "17")
    (sent,) = server.requests
    assert (sent["method"], sent["path"], sent["query"]) == (
        "DELETE",
        "/api/v1/namespaces/nodegate/configmaps/labels-a",
        {},
    )
    assert sent["body"] == {"preconditions": {"resourceVersion": "17"}}
    assert sent["headers"]["content-type"] == "application/json"


def test_the_servers_clock_is_the_date_of_its_version_answer_on_one_connection(
    server: Recording, api: KubeApi
) -> None:
    for _ in range(2):
        server.answers.append(
            (200, {"Date": "Mon, 07 Dec 2026 05:00:01 GMT"}, b'{"major": "1", "minor": "33"}')
        )
    assert api.server_time() == datetime(2026, 12, 7, 5, 0, 1, tzinfo=UTC)
    api.server_time()
    assert [(s["method"], s["path"]) for s in server.requests] == [("GET", "/version")] * 2
    _no_body(server.requests[0])
    pool = api.api_client.rest_client.pool_manager.connection_from_url(server.url)
    assert pool.num_connections == 1  # each answer read to its end, its connection reused


@pytest.mark.parametrize(
    ("status", "headers", "kind"),
    [
        (409, {}, ConflictError),
        (410, {}, GoneError),
        (429, {"Retry-After": "2"}, ThrottledError),
        (401, {}, TemporaryError),
        (500, {}, TemporaryError),
        (403, {}, PermanentError),
    ],
    ids=["conflict", "gone", "throttled", "unauthorized", "server-error", "forbidden"],
)
def test_a_refused_read_or_write_is_the_same_error_kind_as_through_the_generated_client(
    server: Recording, api: KubeApi, status: int, headers: dict[str, str], kind: type[Exception]
) -> None:
    refusal = {"kind": "Status", "code": status, "message": "refused: why"}
    raised: list[BaseException] = []
    if "Retry-After" not in headers:
        # (This fixture's pool keeps urllib3's default retries, which retry a GET answered 429
        # with Retry-After; `load_api_client`'s do not: test_retry_after_bounds.py.)
        server.answer(refusal, status, headers)
        with pytest.raises(kind) as read:
            api.list_page(Selection("Node"), 10, None)
        raised.append(read.value)
    server.answer(refusal, status, headers)
    with pytest.raises(kind) as written:
        api.patch_configmap("nodegate", "history", {"data": {"a": "b"}})
    raised.append(written.value)
    for error in raised:
        assert "refused: why" in str(error)
        if isinstance(error, ThrottledError):
            assert error.retry_after == 2.0
        if isinstance(error, PermanentError):
            assert error.status == 403
            assert error.said == "refused: why"


def test_a_read_answered_with_something_other_than_json_is_a_temporary_error(
    server: Recording, api: KubeApi
) -> None:
    server.answers.append((200, {"Content-Type": "text/html"}, b"<html>log in</html>"))
    with pytest.raises(TemporaryError, match="not JSON"):
        api.read_configmap("nodegate", "history")


def test_the_lease_calls(server: Recording, api_client: client.ApiClient) -> None:
    leases = KubeLeaseApi(api_client, 5.0)
    lease = {"metadata": {"name": "nodegate", "resourceVersion": "9"}, "spec": {}}
    server.answer({"kind": "Status", "code": 404}, status=404)
    assert leases.read_lease("nodegate-system", "nodegate") is None
    server.answer(lease, status=201)
    assert leases.create_lease("nodegate-system", lease) == lease
    server.answer(lease)
    assert leases.replace_lease("nodegate-system", "nodegate", lease) == lease
    path = "/apis/coordination.k8s.io/v1/namespaces/nodegate-system/leases"
    sent = [(s["method"], s["path"], s["query"], s["body"]) for s in server.requests]
    assert sent == [
        ("GET", f"{path}/nodegate", {}, None),
        ("POST", path, {}, lease),
        ("PUT", f"{path}/nodegate", {}, lease),
    ]
    _no_body(server.requests[0])
    for request in server.requests:
        _sent_as_the_client_sent(request)


def test_the_fence_policy_reads(server: Recording, api_client: client.ApiClient) -> None:
    """Read once when a replica starts to lead: the policy, its binding, who this replica is."""
    server.answer({"kind": "Status", "code": 404}, status=404)
    server.answer({"kind": "Status", "code": 404}, status=404)
    server.answer({"status": {"userInfo": {"username": "system:serviceaccount:ns:nodegate"}}})
    lease = LeaderElectionSettings(fence_policy="nodegate-fence")
    assert not check_server_fence(api_client, lease).enforced
    sent = [(s["method"], s["path"], s["body"]) for s in server.requests]
    admission = "/apis/admissionregistration.k8s.io/v1"
    assert sent == [
        ("GET", f"{admission}/validatingadmissionpolicies/nodegate-fence", None),
        ("GET", f"{admission}/validatingadmissionpolicybindings/nodegate-fence", None),
        (
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        ),
    ]


def test_the_webhooks_certificate_calls(server: Recording, api_client: client.ApiClient) -> None:
    webhook = WebhookKubeApi(api_client, 2.0)
    secret = {"metadata": {"name": "certs", "resourceVersion": "4"}, "data": {}}
    json_patch = [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2E="}]
    server.answer(secret)
    assert webhook.read_secret("nodegate", "certs") == secret
    server.answer(secret)
    webhook.replace_secret("nodegate", "certs", secret)
    server.answer({"kind": "Status", "code": 404}, status=404)
    assert webhook.read_webhook_configuration("nodegate") is None
    server.answer({"metadata": {"name": "nodegate"}})
    webhook.patch_webhook_configuration("nodegate", json_patch)
    configuration = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/nodegate"
    sent = [
        (s["method"], s["path"], s["query"], s["headers"].get("content-type"), s["body"])
        for s in server.requests
    ]
    manager = {"fieldManager": "nodegate"}
    assert sent == [
        ("GET", "/api/v1/namespaces/nodegate/secrets/certs", {}, None, None),
        ("PUT", "/api/v1/namespaces/nodegate/secrets/certs", manager, "application/json", secret),
        ("GET", configuration, {}, None, None),
        ("PATCH", configuration, manager, "application/json-patch+json", json_patch),
    ]
