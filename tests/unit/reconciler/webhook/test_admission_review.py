"""The AdmissionReview wire format: which requests are patched, how the others are answered."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from nodegate.reconciler.webhook.review import (
    MAX_BODY_BYTES,
    NodeCreate,
    Refusal,
    decode_review,
    review_response,
)

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def review(**request: Any) -> dict[str, Any]:
    """An AdmissionReview of a Node CREATE as kube-apiserver sends it, with `request` changes."""
    base = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "requestKind": {"group": "", "version": "v1", "kind": "Node"},
        "requestResource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": "n1",
        "operation": "CREATE",
        "userInfo": {"username": "system:node:n1", "groups": ["system:nodes"]},
        "object": NODE,
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": base | request,
    }


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def test_a_node_create_is_decoded_with_its_uid_and_object() -> None:
    decoded = decode_review(encode(review()))
    assert decoded == NodeCreate("705ab4f5-6393-11e8-b7cc-42010a800002", NODE)
    assert isinstance(decoded, NodeCreate) and decoded.name == "n1"


@pytest.mark.parametrize(
    ("request_changes", "reason"),
    [
        pytest.param({"operation": "UPDATE"}, "operation UPDATE", id="update"),
        pytest.param({"operation": "DELETE", "object": None}, "operation DELETE", id="delete"),
        pytest.param(
            {"kind": {"group": "", "version": "v1", "kind": "Pod"}}, "not a Node", id="pod"
        ),
        pytest.param({"subResource": "status"}, "not a Node", id="status-subresource"),
        pytest.param({"object": "n1"}, "not a Node object", id="object-not-a-map"),
        pytest.param({"object": {**NODE, "kind": "Pod"}}, "not a Node object", id="object-a-pod"),
    ],
)
def test_requests_not_handled_are_answered_by_uid(
    request_changes: dict[str, Any], reason: str
) -> None:
    decoded = decode_review(encode(review(**request_changes)))
    assert isinstance(decoded, Refusal)
    assert decoded.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert reason in decoded.reason


def test_a_wrong_api_version_is_refused_but_answered_by_uid() -> None:
    document = review() | {"apiVersion": "admission.k8s.io/v1beta1"}
    decoded = decode_review(encode(document))
    assert isinstance(decoded, Refusal) and decoded.uid is not None
    assert "not an admission.k8s.io/v1 AdmissionReview" in decoded.reason


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff\xfe\x00garbage", id="not-utf8"),
        pytest.param(b"[1, 2]", id="a-list"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-nesting"),
        pytest.param(
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', id="no-request"
        ),
        pytest.param(encode(review(uid=7)), id="uid-not-a-string"),
        pytest.param(encode(review(uid="u" * 200)), id="uid-too-long"),
    ],
)
def test_bodies_without_a_readable_uid_are_refused_without_one(body: bytes) -> None:
    decoded = decode_review(body)
    assert isinstance(decoded, Refusal) and decoded.uid is None


def test_a_body_over_the_limit_is_refused_unparsed() -> None:
    decoded = decode_review(b" " * (MAX_BODY_BYTES + 1))
    assert isinstance(decoded, Refusal) and "over the" in decoded.reason


def test_the_answer_carries_the_uid_and_the_patch_in_base64() -> None:
    ops = [{"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule"}]}]
    answer = json.loads(review_response("u1", ops))
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "u1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == ops


def test_an_answer_without_changes_has_no_patch() -> None:
    assert json.loads(review_response("u1"))["response"] == {"uid": "u1", "allowed": True}
