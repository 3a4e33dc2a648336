"""The webhook shell: one review end to end (record lookup included) and the HTTPS server on
loopback with a certificate of its own PKI. Every failure answers; none denies or crashes."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from nodegate.core.decisions.persisted_labels import LabelRecord, encode_record, record_name
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import POOL_LABEL
from nodegate.core.rules.node_marks import REGISTRATION_SEAL_KEY
from nodegate.reconciler.kit.errors import TemporaryError
from nodegate.reconciler.kit.health import Health
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.main import readiness
from nodegate.reconciler.webhook.admission import NodeAdmission, RecordLookup, WebhookMetrics
from nodegate.reconciler.webhook.certs import CertPolicy, renew
from nodegate.reconciler.webhook.server import WebhookServer
from tests.unit.reconciler.webhook.test_admission_review import review

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
RULES = parse_rules(
    """\
apiVersion: nodegate.dev/v1
kind: NodeRules
startupGates:
  - name: warmup
    match: {labels: {example.com/pool: gpu}}
    taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
    readyWhen: {annotation: example.com/ready=true}
persistentLabels:
  prefixes: ["persist.example.com/"]
nodePools:
  - {name: payments, provider: oke, size: 1}
"""
)
PROVIDER_ID = "oci://ocid1.instance.oc1.phx.n1"
GPU_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"example.com/pool": "gpu"}},
    "spec": {"providerID": PROVIDER_ID},
    "status": {"nodeInfo": {"systemUUID": "uuid-of-n1"}},
}


GATE_ONLY = ["/spec/taints", "/metadata/annotations"]
"""The paths of a patch adding the gate and its claim, and no label."""


def record(
    key: str = PROVIDER_ID,
    labels: dict[str, str] | None = None,
    gone: bool = True,
    system_uuid: str = "",
) -> RawObject:
    stored = LabelRecord(
        key,
        "old-uid",
        labels or {"persist.example.com/team": "ml"},
        NOW,
        ("n1",),
        node_gone_at=NOW if gone else None,
        system_uuid=system_uuid,
    )
    return {"metadata": {"name": record_name(key)}, "data": encode_record(stored)}


class FakeReader:
    def __init__(self, answer: RawObject | None = None, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.error: Exception | None = None
        self.reads: list[tuple[str, str]] = []

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        self.reads.append((namespace, name))
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.answer


def admission(reader: FakeReader, budget: float = 1.0) -> tuple[NodeAdmission, WebhookMetrics]:
    metrics = WebhookMetrics(CollectorRegistry())
    lookup = RecordLookup(reader, "nodegate-system", budget, metrics)
    return NodeAdmission(lambda: RULES, lookup, metrics, clock=lambda: NOW), metrics


def patch_of(answer: bytes) -> list[dict[str, Any]]:
    response = json.loads(answer)["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return []
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def body(**request: Any) -> bytes:
    """A Node CREATE review of GPU_NODE, with `request` changes."""
    return json.dumps(review(**{"object": GPU_NODE, **request})).encode()


def test_a_node_create_gets_its_gate_and_its_record_labels() -> None:
    reader = FakeReader(record())
    status, answer = admission(reader)[0].review(body())
    assert status == 200
    assert reader.reads == [("nodegate-system", record_name(PROVIDER_ID))]
    assert patch_of(answer) == [
        {"op": "add", "path": "/metadata/labels/persist.example.com~1team", "value": "ml"},
        {
            "op": "add",
            "path": "/spec/taints",
            "value": [{"key": "startup.example.com/init", "value": "wait", "effect": "NoSchedule"}],
        },
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"nodegate.dev/owned-taints": "startup.example.com/init:NoSchedule"},
        },
    ]


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        pytest.param(None, "absent", id="no-record"),
        pytest.param({"data": {"record.json": "{not json"}}, "unreadable", id="corrupt-record"),
        pytest.param(record(key="oci://someone-else"), "unreadable", id="record-of-another-key"),
        pytest.param(record(gone=False), "refused", id="record-of-a-live-node"),
        pytest.param(record(system_uuid="uuid-of-another"), "refused", id="another-machine"),
    ],
)
def test_without_a_readable_record_the_node_gets_its_gate_only(
    answer: RawObject | None, result: str
) -> None:
    review_of, metrics = admission(FakeReader(answer))
    status, out = review_of.review(body())
    assert status == 200
    assert [op["path"] for op in patch_of(out)] == GATE_ONLY
    assert metrics.lookups.labels(result)._value.get() == 1


def test_a_node_registering_in_a_pool_is_sealed_with_the_pool_it_cannot_change() -> None:
    claimed = {**GPU_NODE, "metadata": {"name": "n1", "labels": {POOL_LABEL: "payments"}}}
    status, out = admission(FakeReader(None))[0].review(body(object=claimed))
    assert status == 200
    seal = {"key": REGISTRATION_SEAL_KEY, "value": "payments", "effect": "PreferNoSchedule"}
    assert patch_of(out) == [{"op": "add", "path": "/spec/taints", "value": [seal]}]


def test_a_failing_lookup_admits_the_node_with_its_gate() -> None:
    reader = FakeReader(record())
    reader.error = TemporaryError("503")
    status, out = admission(reader)[0].review(body())
    assert status == 200 and [op["path"] for op in patch_of(out)] == [
        "/spec/taints",
        "/metadata/annotations",
    ]


def test_a_slow_lookup_is_cut_at_its_budget() -> None:
    review_of, metrics = admission(FakeReader(record(), delay=2.0), budget=0.2)
    started = time.monotonic()
    status, out = review_of.review(body())
    elapsed = time.monotonic() - started
    assert status == 200 and [op["path"] for op in patch_of(out)] == [
        "/spec/taints",
        "/metadata/annotations",
    ]
    assert elapsed < 0.6, f"answered after {elapsed:.2f}s, budget 0.2s"
    assert metrics.lookups.labels("timeout")._value.get() == 1


def test_an_update_is_answered_allowed_unchanged_without_a_lookup() -> None:
    reader = FakeReader(record())
    status, out = admission(reader)[0].review(body(operation="UPDATE"))
    assert status == 200 and patch_of(out) == [] and reader.reads == []


def test_a_body_without_uid_is_a_400_with_a_json_error() -> None:
    status, out = admission(FakeReader())[0].review(b"garbage")
    assert status == 400 and "error" in json.loads(out)


def test_without_rules_yet_nodes_are_admitted_unchanged() -> None:
    metrics = WebhookMetrics(CollectorRegistry())
    lookup = RecordLookup(FakeReader(), "ns", 1.0, metrics)
    status, out = NodeAdmission(lambda: None, lookup, metrics).review(body())
    assert status == 200 and patch_of(out) == []


def test_a_bug_in_the_patch_admits_the_node_unchanged() -> None:
    class Broken(FakeReader):
        def read_configmap(self, namespace: str, name: str) -> RawObject | None:
            return {"data": 7}  # decode_record expects a mapping: AttributeError inside

    review_of, metrics = admission(Broken())
    status, out = review_of.review(body())
    assert status == 200 and patch_of(out) == []
    assert metrics.reviews.labels("error")._value.get() == 1


# --- the HTTPS server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, Path]:
    bundle = renew(None, "ca", ("127.0.0.1",), datetime.now(UTC), CertPolicy())
    ca_file = tmp_path_factory.mktemp("pki") / "ca.crt"
    ca_file.write_bytes(bundle.ca_pem)
    return bundle.cert_pem, bundle.key_pem, ca_file


@pytest.fixture
def server(pki: tuple[bytes, bytes, Path]) -> Iterator[WebhookServer]:
    review_of, metrics = admission(FakeReader(record()))
    served = WebhookServer(
        "127.0.0.1", 0, "/mutate-nodes", review_of.review, metrics, max_body_bytes=4096
    )
    served.use_certificate(pki[0], pki[1])
    served.start()
    yield served
    served.shutdown()


def post(
    server: WebhookServer,
    ca_file: Path,
    path: str,
    data: bytes,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(ca_file))
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=5)
    try:
        connection.request("POST", path, body=data, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_server_answers_a_review_over_tls_its_ca_trusts(
    server: WebhookServer, pki: tuple[bytes, bytes, Path]
) -> None:
    status, out = post(server, pki[2], "/mutate-nodes?timeout=2s", body())
    assert status == 200 and len(patch_of(out)) == 3


def test_an_oversized_body_is_refused_unread(
    server: WebhookServer, pki: tuple[bytes, bytes, Path]
) -> None:
    status, out = post(server, pki[2], "/mutate-nodes", b" " * 5000)
    assert status == 413 and "at most 4096" in json.loads(out)["error"]


def test_another_path_is_not_found(server: WebhookServer, pki: tuple[bytes, bytes, Path]) -> None:
    assert post(server, pki[2], "/validate", body())[0] == 404


def test_garbage_instead_of_tls_leaves_the_server_serving(
    server: WebhookServer, pki: tuple[bytes, bytes, Path]
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)))
        raw.recv(100)
    assert post(server, pki[2], "/mutate-nodes", body())[0] == 200


def test_a_new_certificate_is_served_from_the_next_connection(
    server: WebhookServer, tmp_path: Path
) -> None:
    other = renew(None, "ca", ("127.0.0.1",), datetime.now(UTC), CertPolicy())
    (tmp_path / "ca.crt").write_bytes(other.ca_pem)
    server.use_certificate(other.cert_pem, other.key_pem)
    assert post(server, tmp_path / "ca.crt", "/mutate-nodes", body())[0] == 200


def test_before_a_certificate_connections_are_closed() -> None:
    review_of, metrics = admission(FakeReader())
    served = WebhookServer("127.0.0.1", 0, "/mutate-nodes", review_of.review, metrics)
    served.start()
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as raw:
            assert raw.recv(10) == b""  # closed at once, nothing served
        assert not served.serving.is_set()
    finally:
        served.shutdown()


def test_many_concurrent_reviews_are_all_answered(
    server: WebhookServer, pki: tuple[bytes, bytes, Path]
) -> None:
    results: list[int] = []

    def one() -> None:
        results.append(post(server, pki[2], "/mutate-nodes", body())[0])

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == [200] * 20


def test_a_replica_serving_the_webhook_is_not_ready_before_it_has_a_certificate() -> None:
    watcher = SimpleNamespace(loaded=threading.Event())
    watcher.loaded.set()
    controller = SimpleNamespace(rules_in_force=SimpleNamespace(generation=0))
    review_of, metrics = admission(FakeReader())
    served = WebhookServer("127.0.0.1", 0, "/mutate-nodes", review_of.review, metrics)
    try:
        ready = readiness(cast(Any, watcher), cast(Any, controller), threading.Event(), served)
        assert ready() == (False, "webhook has no serving certificate yet")
        bundle = renew(None, "ca", ("127.0.0.1",), datetime.now(UTC), CertPolicy())
        served.use_certificate(bundle.cert_pem, bundle.key_pem)
        assert ready()[0] is True
    finally:
        served.shutdown()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_server_loop_that_ends_before_shutdown_fails_health() -> None:
    review_of, metrics = admission(FakeReader(record()))
    served = WebhookServer("127.0.0.1", 0, "/mutate-nodes", review_of.review, metrics)

    async def broken() -> None:
        raise RuntimeError("a bug in the server loop")

    served._serve = broken  # type: ignore[method-assign]
    health = Health()
    served.start(health)
    deadline = time.monotonic() + 5
    while health.check()[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    if served._thread is not None:
        served._thread.join(5)  # its exception is reported within this test
    healthy, why = health.check()
    assert not healthy and "webhook" in why
    served.shutdown()


def test_a_server_shut_down_leaves_health_alone() -> None:
    health = Health()
    metrics = WebhookMetrics(CollectorRegistry())
    other = WebhookServer("127.0.0.1", 0, "/mutate-nodes", lambda body: (200, b""), metrics)
    other.start(health)
    other.shutdown()
    assert health.check() == (True, "ok")
