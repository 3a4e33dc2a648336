"""Answers no API server sends, from a proxy or a hostile peer on the path: each ends as one of
our error kinds, within the call's deadline and bounded in memory, never as a bare Python error
that ends the loop reading it."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from nodegate.reconciler.kit.client import REFUSAL_BODY_LIMIT
from nodegate.reconciler.kit.errors import PermanentError, TemporaryError, TimedOutError
from nodegate.reconciler.kit.kube import KubeApi, Selection
from nodegate.reconciler.nodes.fence.fence_policy import check_server_fence
from nodegate.reconciler.settings import LeaderElectionSettings
from tests.unit.reconciler.kit.test_direct_writes import Scripted, _answer_head


def _api(url: str) -> KubeApi:
    return KubeApi(client.ApiClient(client.Configuration(host=url)), request_timeout_seconds=2)


def test_a_read_whose_answer_trickles_in_ends_within_its_deadline() -> None:
    """urllib3's read timeout is per read: a byte every 0.2 s never trips it."""
    body = json.dumps({"kind": "ConfigMap", "data": {"k": "v" * 200}}).encode()
    scripted = Scripted(_answer_head("200 OK", "application/json", len(body)), body, 1, 0.2)
    try:
        started = time.monotonic()
        with pytest.raises(TimedOutError):
            _api(scripted.url).read_configmap("ns", "records")
        assert time.monotonic() - started < 6
    finally:
        scripted.close()


def test_a_refusal_with_an_endless_body_is_read_no_further_than_its_limit() -> None:
    endless = b'{"kind":"Status","message":"' + b"x" * (8 * REFUSAL_BODY_LIMIT)
    head = _answer_head("403 Forbidden", "application/json", len(endless) + 2)
    scripted = Scripted(head, endless, len(endless), 0)
    try:
        with pytest.raises(PermanentError) as refused:
            _api(scripted.url).read_configmap("ns", "records")
        assert len(str(refused.value)) < 2 * REFUSAL_BODY_LIMIT
    finally:
        scripted.close()


@pytest.mark.parametrize("body", [b"[]", b"42", b'"text"', b"null"])
def test_an_answer_that_is_json_but_no_object_is_a_temporary_error(body: bytes) -> None:
    scripted = Scripted(_answer_head("200 OK", "application/json", len(body)), body, len(body), 0)
    try:
        with pytest.raises(TemporaryError, match="not a JSON object"):
            _api(scripted.url).read_configmap("ns", "records")
    finally:
        scripted.close()


def test_a_watch_error_event_without_its_object_is_a_temporary_error() -> None:
    event = b'{"type":"ERROR","object":null}\n'
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event)
    scripted = Scripted(head, chunk, len(chunk), 0)
    try:
        with pytest.raises(TemporaryError, match="unreadable watch event"):
            list(_api(scripted.url).watch(Selection("Node"), "1", 5))
    finally:
        scripted.close()


def test_a_fence_policy_answer_that_is_no_object_leaves_the_fence_unenforced() -> None:
    """The check runs on its own thread: a TypeError there ended it."""
    scripted = Scripted(_answer_head("200 OK", "application/json", 2), b"42", 2, 0)
    try:
        api_client = client.ApiClient(client.Configuration(host=scripted.url))
        fence = check_server_fence(api_client, LeaderElectionSettings(fence_policy="fence"))
        assert not fence.enforced
        assert "could not be read" in fence.why
    finally:
        scripted.close()
