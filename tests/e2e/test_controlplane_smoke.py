"""Smoke tests proving the e2e harness is a real control plane, one behaviour per test.

Each one checks something only a real kube-apiserver / scheduler gets right, and that
nodegate relies on: the served version, admission-added taints, JSON-patch `test` ops and
optimistic concurrency rejecting stale writes, and the scheduler honouring NoSchedule taints.
"""

from __future__ import annotations

import contextlib
import re
from functools import partial
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.nodes import (
    JSON_PATCH,
    MERGE_PATCH,
    SimNode,
    azure_provider_id,
    create_node,
    oci_provider_id,
    wait_until,
)
from nodegate.localcluster.versions import KUBERNETES

REGISTRATION_TAINT = {"key": "nodegate.io/pending", "value": "true", "effect": "NoSchedule"}
NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
HTTP_CONFLICT = 409
HTTP_UNPROCESSABLE = 422
POD_IMAGE = "registry.k8s.io/pause:3.10"


def _taints(node: k8s_client.V1Node) -> list[dict[str, Any]]:
    """Taints as the JSON the server stores (unset fields omitted, no timestamps), so a JSON
    patch `test` op built from them matches exactly when they are current."""
    taints = (node.spec.taints if node.spec else None) or []
    return [
        {
            name: value
            for name, value in (("key", t.key), ("value", t.value), ("effect", t.effect))
            if value is not None
        }
        for t in taints
    ]


def test_server_reports_the_pinned_kubernetes_version(api_client: k8s_client.ApiClient) -> None:
    info = k8s_client.VersionApi(api_client).get_code()
    assert (info.git_version, info.major, info.minor) == (
        KUBERNETES.version,
        KUBERNETES.major,
        KUBERNETES.minor,
    )


def test_node_created_with_registration_taint_reads_back_with_admission_not_ready_taint(
    core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    provider_id = azure_provider_id("aks-pool1-12345678-vmss", 3)
    create_node(
        core_v1,
        SimNode(unique_name, provider_id=provider_id, taints=[REGISTRATION_TAINT]),
    )

    node = core_v1.read_node(unique_name)

    assert node.spec is not None and node.metadata is not None
    assert node.spec.provider_id == provider_id
    assert (node.metadata.labels or {})["kubernetes.io/hostname"] == unique_name
    # The TaintNodesByCondition admission plugin adds not-ready to every new Node; only the
    # controller-manager removes it, and this control plane runs none.
    assert _taints(node) == [
        REGISTRATION_TAINT,
        {"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"},
    ]


def test_json_patch_whose_test_op_carries_a_stale_taint_list_is_rejected_with_422(
    core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    create_node(core_v1, SimNode(unique_name, provider_id=oci_provider_id(unique_name)))
    stale = core_v1.read_node(unique_name)
    stale_taints = _taints(stale)
    # Someone else changes the taints after we read them.
    core_v1.patch_node(
        unique_name,
        {"spec": {"taints": [*stale_taints, REGISTRATION_TAINT]}},
        _content_type=MERGE_PATCH,
    )
    current_taints = _taints(core_v1.read_node(unique_name))

    with pytest.raises(ApiException) as rejected:
        core_v1.patch_node(
            unique_name,
            [
                {"op": "test", "path": "/spec/taints", "value": stale_taints},
                {"op": "replace", "path": "/spec/taints", "value": []},
            ],
            _content_type=JSON_PATCH,
        )

    assert rejected.value.status == HTTP_UNPROCESSABLE
    assert _taints(core_v1.read_node(unique_name)) == current_taints


def test_json_patch_whose_test_op_carries_the_current_taint_list_is_applied(
    core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    create_node(core_v1, SimNode(unique_name, taints=[REGISTRATION_TAINT]))
    current_taints = _taints(core_v1.read_node(unique_name))

    core_v1.patch_node(
        unique_name,
        [
            {"op": "test", "path": "/spec/taints", "value": current_taints},
            {"op": "replace", "path": "/spec/taints", "value": [REGISTRATION_TAINT]},
        ],
        _content_type=JSON_PATCH,
    )

    assert _taints(core_v1.read_node(unique_name)) == [REGISTRATION_TAINT]


def test_replace_with_a_stale_resource_version_is_rejected_with_409(
    core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    stale = create_node(core_v1, SimNode(unique_name))
    core_v1.patch_node(
        unique_name,
        {"metadata": {"labels": {"changed": "by-someone-else"}}},
        _content_type=MERGE_PATCH,
    )
    assert stale.metadata is not None and stale.metadata.labels is not None
    stale.metadata.labels["changed"] = "by-us"

    with pytest.raises(ApiException) as rejected:
        core_v1.replace_node(unique_name, stale)

    assert rejected.value.status == HTTP_CONFLICT
    current = core_v1.read_node(unique_name).metadata
    assert current is not None and (current.labels or {})["changed"] == "by-someone-else"


# -- with kube-scheduler, kube-controller-manager and kwok ----------------------------------


def _schedulable_kwok_node(
    core_v1: k8s_client.CoreV1Api, name: str, group: str, taints: list[dict[str, str]]
) -> None:
    """A kwok-driven node in `group`, returned once the controller-manager has removed the
    admission-added not-ready taint (so the only taints left are the ones we registered)."""
    create_node(core_v1, SimNode(name, labels={"e2e-group": group}, taints=taints, kwok=True))
    wait_until(
        lambda: all(t["key"] != NOT_READY_TAINT_KEY for t in _taints(core_v1.read_node(name))),
        60,
        f"node-lifecycle controller to drop the not-ready taint from {name}",
    )


def _pod(name: str, group: str, tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A pod restricted to the test's own nodes, tolerating exactly the `tolerations` taints
    (none by default)."""
    spec: dict[str, Any] = {
        "nodeSelector": {"e2e-group": group},
        "containers": [{"name": "app", "image": POD_IMAGE}],
    }
    if tolerations:
        spec["tolerations"] = [{**taint, "operator": "Equal"} for taint in tolerations]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _create_pod(core_v1: k8s_client.CoreV1Api, body: dict[str, Any]) -> None:
    pod = k8s_client.V1Pod.from_dict(body)
    assert pod is not None
    core_v1.create_namespaced_pod("default", pod)


def _bound_node(core_v1: k8s_client.CoreV1Api, pod: str) -> str | None:
    """The node the scheduler bound the pod to, or None while it is unbound."""
    spec = core_v1.read_namespaced_pod(pod, "default").spec
    return spec.node_name if spec else None


def _scheduled_verdict(pod: k8s_client.V1Pod) -> k8s_client.V1PodCondition | None:
    """The pod's PodScheduled condition once the scheduler has weighed nodes for it.

    A scheduler whose node cache has not yet caught up with a just-created node first reports
    "no nodes available to schedule pods", and weighs the pod again when the node arrives: that
    first verdict is about the scheduler's cache, not about the taint.
    """
    conditions = (pod.status.conditions if pod.status else None) or []
    condition = next((c for c in conditions if c.type == "PodScheduled"), None)
    if condition is None or (condition.message or "").startswith("no nodes available"):
        return None
    return condition


def test_scheduler_never_binds_a_pod_without_toleration_to_a_noschedule_tainted_node(
    scheduling_core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    """The node's only taint is REGISTRATION_TAINT, in the scheduler's own cache too: a pod
    tolerating just that taint is bound to the node first, which the scheduler does only once
    it holds the node without the admission-added not-ready taint (whose removal the API server
    shows before the scheduler's watch may have delivered it). Only then is the pod without the
    toleration created: every verdict on it is made on that node, so "untolerated taint" is the
    registration taint's doing, and a scheduler that ignored it would bind the pod."""
    core_v1 = scheduling_core_v1
    node = f"{unique_name}-tainted"
    _schedulable_kwok_node(core_v1, node, unique_name, [REGISTRATION_TAINT])
    seen = f"{unique_name}-seen"
    _create_pod(core_v1, _pod(seen, unique_name, tolerations=[REGISTRATION_TAINT]))
    try:
        bound = wait_until(
            partial(_bound_node, core_v1, seen),
            60,
            "the scheduler to bind the pod tolerating the registration taint",
        )
        assert bound == node
        _create_pod(core_v1, _pod(unique_name, unique_name))
        condition = wait_until(
            lambda: _scheduled_verdict(core_v1.read_namespaced_pod(unique_name, "default")),
            60,
            "the scheduler to weigh the test's node for the pod",
        )
        pod = core_v1.read_namespaced_pod(unique_name, "default")
        assert pod.spec is not None and pod.spec.node_name is None
        assert (condition.status, condition.reason) == ("False", "Unschedulable")
        # 1.36 no longer names the taint; the node's only taint is REGISTRATION_TAINT (other
        # nodes' "11 node(s)" must not pass for it: the one node of the test's group).
        assert re.search(r"(?<!\d)1 node\(s\) had untolerated taint", condition.message or "")
    finally:
        for name in (unique_name, seen):
            with contextlib.suppress(ApiException):  # the first pod not made: nothing to delete
                core_v1.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_scheduler_binds_a_pod_without_toleration_to_the_untainted_node(
    scheduling_core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    core_v1 = scheduling_core_v1
    tainted, untainted = f"{unique_name}-tainted", f"{unique_name}-plain"
    _schedulable_kwok_node(core_v1, tainted, unique_name, [REGISTRATION_TAINT])
    _schedulable_kwok_node(core_v1, untainted, unique_name, [])
    pods = [f"{unique_name}-{index}" for index in range(3)]
    for pod in pods:
        _create_pod(core_v1, _pod(pod, unique_name))
    try:
        bound = {
            pod: wait_until(partial(_bound_node, core_v1, pod), 60, f"pod {pod} to be bound")
            for pod in pods
        }
        assert bound == dict.fromkeys(pods, untainted)
    finally:
        for pod in pods:
            core_v1.delete_namespaced_pod(pod, "default", grace_period_seconds=0)


def test_kwok_makes_a_pod_bound_to_its_node_ready(
    scheduling_core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    core_v1 = scheduling_core_v1
    _schedulable_kwok_node(core_v1, f"{unique_name}-node", unique_name, [])
    _create_pod(core_v1, _pod(unique_name, unique_name))
    try:

        def ready() -> bool:
            pod = core_v1.read_namespaced_pod(unique_name, "default")
            conditions = (pod.status.conditions if pod.status else None) or []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        wait_until(ready, 60, "kwok to mark the pod Ready")
        status = core_v1.read_namespaced_pod(unique_name, "default").status
        assert status is not None and status.phase == "Running"
    finally:
        core_v1.delete_namespaced_pod(unique_name, "default", grace_period_seconds=0)
