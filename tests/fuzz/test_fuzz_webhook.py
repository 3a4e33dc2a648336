"""Anyone who can reach the webhook's port can send it bytes: whatever they are, the body
decoder returns a NodeCreate or a Refusal, never raises, and the whole review (decode, patch,
encode) answers a status and a JSON body."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from nodegate.core.rules.loader import parse_rules
from nodegate.reconciler.webhook.admission import NodeAdmission, RecordLookup, WebhookMetrics
from nodegate.reconciler.webhook.review import NodeCreate, Refusal, decode_review
from tests.fuzz.profiles import fuzz

GOOD: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "operation": "CREATE",
        "object": {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"example.com/pool": "gpu"}},
            "spec": {"providerID": "oci://n1", "taints": []},
        },
    },
}
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
"""
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


def _replace(document: Any, path: list[str], value: Any) -> Any:
    """`document` with the member at `path` (as far as it exists) replaced by `value`."""
    if not path or not isinstance(document, dict):
        return value
    head, *rest = path
    return {**document, head: _replace(document.get(head), rest, value)}


PATHS = st.lists(
    st.sampled_from(
        ["request", "object", "metadata", "labels", "spec", "taints", "uid", "kind", "operation"]
    ),
    max_size=4,
)
BODIES = st.one_of(
    st.binary(max_size=600),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.builds(_replace, st.just(GOOD), PATHS, JSON_VALUES).map(lambda d: json.dumps(d).encode()),
    st.builds(
        lambda data, cut: data[:cut], st.just(json.dumps(GOOD).encode()), st.integers(0, 600)
    ),
)


class _NoRecord:
    def read_configmap(self, namespace: str, name: str) -> None:
        return None


METRICS = WebhookMetrics(CollectorRegistry())
ADMISSION = NodeAdmission(lambda: RULES, RecordLookup(_NoRecord(), "ns", 1.0, METRICS), METRICS)


@fuzz
@given(BODIES)
def test_any_body_decodes_to_a_node_create_or_a_refusal(body: bytes) -> None:
    assert isinstance(decode_review(body), NodeCreate | Refusal)


@fuzz
@given(BODIES)
def test_any_body_gets_a_json_answer(body: bytes) -> None:
    status, answer = ADMISSION.review(body)
    assert status in (200, 400)
    decoded = json.loads(answer)
    if status == 200:
        assert decoded["response"]["allowed"] is True
