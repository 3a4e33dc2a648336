"""The AdmissionReview v1 wire format of the Node admission webhook: body in, answer out.

Pure, and total: whatever bytes arrive, `decode_review` returns a `NodeCreate` to patch or a
`Refusal`, never raises (tests/fuzz/test_fuzz_webhook.py). A refusal is not a denial: the
webhook only ever adds what nodes should be born with, so anything it cannot or should not
handle (not a Node, not a CREATE, an unreadable body) is answered *allowed, unchanged* when the
request's uid can be read, and with HTTP 400 and a JSON error otherwise; the API server then
applies the webhook's failurePolicy (Ignore by default: the node is created without the patch).

Hand-written rather than through the kubernetes client's V1AdmissionReview models: those
deserialise the embedded Node into model classes (and the client has no AdmissionReview type
for the response), while the webhook needs the raw object to compute a JSON Patch against it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_BODY_BYTES = 3 * 1024 * 1024
"""Larger bodies are refused unread: a Node CREATE review is a few KiB (etcd caps an object at
1.5 MiB), so more is not a review of ours."""
MAX_UID_CHARS = 128
"""A request uid is a UUID; a longer one is not echoed back."""


@dataclass(frozen=True)
class NodeCreate:
    """A well-formed review of a Node being created: the one request the webhook patches."""

    uid: str
    node: Mapping[str, Any]
    dry_run: bool = False

    @property
    def name(self) -> str:
        metadata = self.node.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        return name if isinstance(name, str) else ""


@dataclass(frozen=True)
class Refusal:
    """A request the webhook does not patch, and why (for the log)."""

    reason: str
    uid: str | None = None
    """The request's uid when it could be read: answer allowed, unchanged; None: HTTP 400."""


def _show(value: Any, limit: int = 60) -> str:
    """A value for a log line: a string cut short, anything else by type (never `str()` of a
    structure: a deeply nested one would recurse)."""
    return value[:limit] if isinstance(value, str) else type(value).__name__


def _uid(request: Any) -> str | None:
    uid = request.get("uid") if isinstance(request, Mapping) else None
    if isinstance(uid, str) and 0 < len(uid) <= MAX_UID_CHARS:
        return uid
    return None


def _is_node(request: Mapping[str, Any]) -> bool:
    kind = request.get("kind")
    resource = request.get("resource")
    return (
        isinstance(kind, Mapping)
        and kind.get("group") == ""
        and kind.get("kind") == "Node"
        and isinstance(resource, Mapping)
        and resource.get("resource") == "nodes"
        and not request.get("subResource")
    )


def decode_review(body: bytes) -> NodeCreate | Refusal:
    """What an AdmissionReview request body asks, or why it is not handled."""
    if len(body) > MAX_BODY_BYTES:
        return Refusal(f"body of {len(body)} bytes is over the {MAX_BODY_BYTES} bytes allowed")
    try:
        review = json.loads(body)
    # Not UTF-8 or not JSON (ValueError, UnicodeDecodeError among them), or nested deeper
    # than the parser's recursion limit: all just an unreadable body.
    except (ValueError, RecursionError) as err:
        return Refusal(f"body is not JSON: {type(err).__name__}")
    if not isinstance(review, dict):
        return Refusal("body is not a JSON object")
    request = review.get("request")
    uid = _uid(request)
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        found = f"{_show(review.get('apiVersion'))} {_show(review.get('kind'))}"
        return Refusal(f"not an {API_VERSION} {KIND} (found {found})", uid)
    if not isinstance(request, dict) or uid is None:
        return Refusal("no request, or its uid is missing or not a string", None)
    if not _is_node(request):
        kind = request.get("kind")
        shown = _show(kind.get("kind")) if isinstance(kind, Mapping) else _show(kind)
        return Refusal(f"not a Node: kind {shown}", uid)
    operation = request.get("operation")
    if operation != "CREATE":
        return Refusal(f"operation {_show(operation, 20)} is not handled (only CREATE)", uid)
    node = request.get("object")
    if not isinstance(node, dict) or node.get("kind", "Node") != "Node":
        return Refusal("request.object is not a Node object", uid)
    return NodeCreate(uid, node, request.get("dryRun") is True)


def review_response(uid: str, patch: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """An AdmissionReview answer: allowed, with the JSON Patch when there is one."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if patch:
        encoded = json.dumps(list(patch), separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encoded).decode("ascii")
    return json.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response}).encode()


def error_body(reason: str) -> bytes:
    """The JSON body of an HTTP error answer (a request with no uid to answer)."""
    return json.dumps({"error": reason}).encode()
