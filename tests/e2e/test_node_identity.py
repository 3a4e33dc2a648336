"""The harness's node identity is held to what NodeRestriction allows a kubelet, as in OKE/AKS."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import read_node


@pytest.fixture
def own_node(control_plane: LocalControlPlane) -> str:
    name = f"self-{uuid.uuid4().hex[:8]}"
    core_v1 = k8s_client.CoreV1Api(control_plane.client)
    core_v1.create_node(k8s_client.V1Node(metadata=k8s_client.V1ObjectMeta(name=name)))
    return name


def test_a_node_may_set_an_unrestricted_label_on_itself(
    as_node: AsNode, own_node: str, control_plane: LocalControlPlane
) -> None:
    as_node(own_node).patch_node(
        own_node, {"metadata": {"labels": {"nodegate.dev/pool": "payments"}}}
    )
    node = read_node(k8s_client.CoreV1Api(control_plane.client), own_node)
    assert node["metadata"]["labels"]["nodegate.dev/pool"] == "payments"


def test_a_node_may_not_set_a_node_restriction_label_on_itself(
    as_node: AsNode, own_node: str
) -> None:
    with pytest.raises(ApiException) as refused:
        as_node(own_node).patch_node(
            own_node,
            {"metadata": {"labels": {"node-restriction.kubernetes.io/tenant": "payments"}}},
        )
    assert refused.value.status == 403


def test_a_node_may_not_change_its_own_taints(as_node: AsNode, own_node: str) -> None:
    with pytest.raises(ApiException) as refused:
        as_node(own_node).patch_node(
            own_node, {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}
        )
    assert refused.value.status == 403


def test_a_node_may_not_write_another_node(as_node: AsNode, own_node: str) -> None:
    with pytest.raises(ApiException) as refused:
        as_node("someone-else").patch_node(own_node, {"metadata": {"labels": {"a": "b"}}})
    assert refused.value.status == 403
