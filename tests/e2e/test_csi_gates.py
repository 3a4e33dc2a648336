"""A startup gate lifted once the node's CSI driver registered (`readyWhen.csiDrivers`), on the
real API server with a running reconciler: its CSINode must list the driver with allocatable
set, and be the node's own (owned by this Node object, as the kubelet makes it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    Start,
    read_node,
    settled,
    taints_of,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess

KEY = "storage.e2e.nodegate.dev/csi"
GATED = [{"key": KEY, "effect": "NoSchedule"}]
POOL = {"e2e.nodegate.dev/csi-gate": "yes"}
DRIVER = "ebs.csi.aws.com"
RULES = HEADER + (
    "startupGates:\n"
    "  - name: ebs\n"
    '    match: {labels: {e2e.nodegate.dev/csi-gate: "yes"}}\n'
    f"    taint: {{key: {KEY}, effect: NoSchedule}}\n"
    f"    readyWhen: {{csiDrivers: [{{name: {DRIVER}}}]}}\n"
)


@pytest.fixture
def storage_v1(api_client: k8s_client.ApiClient) -> k8s_client.StorageV1Api:
    return k8s_client.StorageV1Api(api_client)


@pytest.fixture
def put_csinode(
    storage_v1: k8s_client.StorageV1Api,
) -> Iterator[Callable[[str, str, bool], None]]:
    """put(node, owner uid, allocatable): the node's CSINode listing the driver, as the kubelet
    writes it once the node plugin registered (with allocatable.count once it reported)."""
    made: list[str] = []

    def put(node: str, owner_uid: str, allocatable: bool) -> None:
        driver: dict[str, Any] = {"name": DRIVER, "nodeID": f"i-{node}", "topologyKeys": None}
        if allocatable:
            driver["allocatable"] = {"count": 25}
        body: Any = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {
                "name": node,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": node, "uid": owner_uid}
                ],
            },
            "spec": {"drivers": [driver]},
        }
        if node in made:
            current: Any = storage_v1.read_csi_node(node)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            storage_v1.replace_csi_node(node, body)
        else:
            storage_v1.create_csi_node(body)
            made.append(node)

    yield put
    for node in made:
        storage_v1.delete_csi_node(node, _preload_content=False)


def uid_of(core_v1: k8s_client.CoreV1Api, node: str) -> str:
    return str(read_node(core_v1, node)["metadata"]["uid"])


Witness = Callable[[ReconcilerProcess, dict[str, str], str], None]


@pytest.fixture
def csinodes_seen(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    put_csinode: Callable[[str, str, bool], None],
) -> Witness:
    """seen(process, pool, key): wait until the reconciler has every CSINode written so far. A
    witness node of the pool, gated by `key`, gets its own CSINode, written last; the one watch
    of CSINodes delivers in order, so the witness lifted says the earlier ones are cached too.
    Without it, `settled` could plan a node before its CSINode arrived, and a "not lifted"
    check would pass whatever the reconciler does with that CSINode."""
    witnesses: list[str] = []

    def seen(process: ReconcilerProcess, pool: dict[str, str], key: str) -> None:
        gated = [{"key": key, "effect": "NoSchedule"}]
        witness = make_node(f"witness{len(witnesses)}", labels=pool, taints=gated)
        witnesses.append(witness)
        put_csinode(witness, uid_of(core_v1, witness), True)
        wait_for_taints(core_v1, witness, lambda taints: (key, "NoSchedule") not in taints)
        wait_until(lambda: process.metric("nodegate_queue_depth") == 0, 60, "an empty queue")

    return seen


def test_the_gate_lifts_only_once_the_driver_registered_with_allocatable(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    put_csinode: Callable[[str, str, bool], None],
    csinodes_seen: Witness,
) -> None:
    node = make_node("csi", labels=POOL, taints=GATED)
    process = start_reconciler_with(RULES)
    csinodes_seen(process, POOL, KEY)
    settled(process, core_v1, node)
    assert (KEY, "NoSchedule") in taints_of(core_v1, node), "lifted with no CSINode"

    put_csinode(node, uid_of(core_v1, node), False)
    csinodes_seen(process, POOL, KEY)
    settled(process, core_v1, node)
    assert (KEY, "NoSchedule") in taints_of(core_v1, node), "lifted before allocatable"

    put_csinode(node, uid_of(core_v1, node), True)
    wait_for_taints(core_v1, node, lambda taints: (KEY, "NoSchedule") not in taints)


def test_a_csinode_owned_by_another_node_object_does_not_lift_the_gate(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    put_csinode: Callable[[str, str, bool], None],
    csinodes_seen: Witness,
) -> None:
    node = make_node("stale", labels=POOL, taints=GATED)
    put_csinode(node, "uid-of-an-earlier-node-of-this-name", True)
    process = start_reconciler_with(RULES)
    csinodes_seen(process, POOL, KEY)
    settled(process, core_v1, node)
    assert (KEY, "NoSchedule") in taints_of(core_v1, node), "lifted by another node's CSINode"


AGENT_KEY = "storage.e2e.nodegate.dev/csi-agent"
AGENT_POOL = {"e2e.nodegate.dev/csi-agent": "yes"}
AGENT_RULES = HEADER + (
    "nodeAgents:\n"
    "  - name: ebs-agent\n"
    '    match: {labels: {e2e.nodegate.dev/csi-agent: "yes"}}\n'
    f"    csiDrivers: [{{name: {DRIVER}}}]\n"
    "    for: 2s\n"
    f"    taint: {{key: {AGENT_KEY}, effect: NoSchedule}}\n"
)


def test_a_node_agent_on_a_csi_driver_lifts_on_registration_and_comes_back_when_it_is_gone(
    core_v1: k8s_client.CoreV1Api,
    storage_v1: k8s_client.StorageV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    put_csinode: Callable[[str, str, bool], None],
    csinodes_seen: Witness,
) -> None:
    """nodeAgents with csiDrivers only (no DaemonSet, so no informer of DaemonSets to wait
    for): the node plugin registered lifts the taint; its registration gone (the CSINode no
    longer lists it) brings it back after `for`."""
    node = make_node(
        "csi-agent", labels=AGENT_POOL, taints=[{"key": AGENT_KEY, "effect": "NoSchedule"}]
    )
    process = start_reconciler_with(AGENT_RULES)
    csinodes_seen(process, AGENT_POOL, AGENT_KEY)
    settled(process, core_v1, node)
    assert (AGENT_KEY, "NoSchedule") in taints_of(core_v1, node), "lifted with no CSINode"

    put_csinode(node, uid_of(core_v1, node), True)
    wait_for_taints(core_v1, node, lambda taints: (AGENT_KEY, "NoSchedule") not in taints)

    unregistered = [{"op": "replace", "path": "/spec/drivers", "value": []}]
    storage_v1.patch_csi_node(node, unregistered, _preload_content=False)
    wait_for_taints(core_v1, node, lambda taints: (AGENT_KEY, "NoSchedule") in taints)
