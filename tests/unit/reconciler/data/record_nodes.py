"""Records the Node JSON the unit tests read (`python -m tests.unit.reconciler.data.record_nodes`).

A real answer of a real API server, kept byte for byte: a Node registered by a real kubelet
(v1.36, `LocalKubelet`, its fake CRI) after a node-problem-detector-style condition, a taint with
`timeAdded`, nodegate's owned-taints annotation and another tool's annotation were written to it,
as GET returns it (`kubelet-node.json`). Needs root (kubelet) and the local control plane's
binaries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.kubelet import LocalKubelet
from nodegate.localcluster.nodes import MERGE_PATCH, STRATEGIC_MERGE_PATCH

HERE = Path(__file__).parent
KUBELET_NODE = "recorded-kubelet-1"


def _raw(response: Any) -> bytes:
    return bytes(response.data)


def _wait_ready(core: Any, name: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            node = json.loads(_raw(core.read_node(name, _preload_content=False)))
        except Exception:  # not registered yet
            time.sleep(0.5)
            continue
        conditions = node.get("status", {}).get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{name} not Ready in {timeout:.0f} s")


def record() -> None:
    with LocalControlPlane() as plane, LocalKubelet(plane, KUBELET_NODE):
        core = k8s_client.CoreV1Api(plane.api_client())
        _wait_ready(core, KUBELET_NODE)
        condition = {
            "type": "TestReady",
            "status": "False",
            "reason": "NotReadyYet",
            "message": "the test agent has not reported",
            "lastHeartbeatTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        core.patch_node_status(
            KUBELET_NODE,
            {"status": {"conditions": [condition]}},
            _content_type=STRATEGIC_MERGE_PATCH,
            _preload_content=False,
        )
        before = json.loads(_raw(core.read_node(KUBELET_NODE, _preload_content=False)))
        version = before["metadata"]["resourceVersion"]
        taints = before["spec"].get("taints") or []
        taint = {
            "key": "readiness.k8s.io/TestReady",
            "value": "pending",
            "effect": "NoSchedule",
            "timeAdded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        patch = {
            "metadata": {
                "resourceVersion": version,
                "labels": {"example.com/pool": "gpu"},
                "annotations": {
                    "nodegate.dev/owned-taints": "readiness.k8s.io/TestReady:NoSchedule",
                    "example.com/agent-version": "1.2.3",
                },
            },
            "spec": {"taints": [*taints, taint]},
        }
        core.patch_node(KUBELET_NODE, patch, _content_type=MERGE_PATCH, _preload_content=False)
        node = _raw(core.read_node(KUBELET_NODE, _preload_content=False))
        (HERE / "kubelet-node.json").write_bytes(node + b"\n")


if __name__ == "__main__":
    record()
