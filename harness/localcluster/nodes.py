"""Realistic simulated Nodes and pods, created and changed through the real API.

nodegate reacts to what cloud node pools and kubelets do: nodes that register with taints
already set, conditions flipping, a node deleted and re-created under the same name. These
helpers do exactly those API calls, so a test reads as the scenario it checks.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.components import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from nodegate.localcluster.versions import KUBERNETES_VERSION

T = TypeVar("T")

STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"

NOT_FOUND = 404


def oci_provider_id(suffix: str, region: str = "eu-frankfurt-1") -> str:
    """A providerID shaped like an OKE worker's."""
    return f"oci://ocid1.instance.oc1.{region}.{suffix}"


def azure_provider_id(vmss: str, instance: int) -> str:
    """A providerID shaped like an AKS VMSS instance's (note the three slashes)."""
    return (
        "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
        f"mc_nodegate_e2e_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/{vmss}"
        f"/virtualMachines/{instance}"
    )


@dataclass(frozen=True)
class SimNode:
    """What a simulated node registers with. `taints` are registration taints (set at create).

    `kwok=True` hands the node to kwok (only in the scheduling control plane): kwok then keeps
    it Ready with Lease heartbeats, so the node-lifecycle controller does not taint it.
    """

    name: str
    provider_id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"
    ready: bool = True
    kwok: bool = False
    internal_ip: str = "10.0.10.10"
    images: int = 0
    """Container images to report in status.images, as a kubelet does (40 make a ~12 KB Node)."""
    system_uuid: str | None = None
    """The machine's SMBIOS UUID in status.nodeInfo; by default derived from the providerID,
    so a node registered again with the same providerID reports the same machine, as a real
    kubelet on the same instance does."""
    boot_id: str = ""
    """status.nodeInfo.bootID, as a kubelet registers it (its host's
    /proc/sys/kernel/random/boot_id: the same across a kubelet restart, new at each boot)."""

    def body(self) -> dict[str, Any]:
        """The Node object; status is accepted on create for Nodes, as a kubelet registers."""
        now = _now()
        annotations = dict(self.annotations)
        if self.kwok:
            annotations[KWOK_NODE_ANNOTATION] = KWOK_NODE_ANNOTATION_VALUE
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "VM.Standard.E4.Flex",
            "topology.kubernetes.io/region": "eu-frankfurt-1",
            "topology.kubernetes.io/zone": "eu-frankfurt-1-ad-1",
            **self.labels,
        }
        provider_id = self.provider_id or oci_provider_id(self.name)
        spec: dict[str, Any] = {"providerID": provider_id}
        system_uuid = (
            str(uuid.uuid5(uuid.NAMESPACE_URL, provider_id))
            if self.system_uuid is None
            else self.system_uuid
        )
        if self.taints:
            spec["taints"] = [dict(taint) for taint in self.taints]
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        status_images = {"images": [_image(self.name, n) for n in range(self.images)]}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    _condition("Ready", "True" if self.ready else "False", "KubeletReady", now),
                    _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                    _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                    _condition("PIDPressure", "False", "KubeletHasSufficientPID", now),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": self.internal_ip},
                    {"type": "Hostname", "address": self.name},
                ],
                **(status_images if self.images else {}),
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "osImage": "Oracle Linux Server 8.10",
                    "kernelVersion": "5.15.0-nodegate",
                    "containerRuntimeVersion": "cri-o://1.36.0",
                    "kubeletVersion": KUBERNETES_VERSION,
                    "kubeProxyVersion": "",
                    "machineID": "",
                    "systemUUID": system_uuid,
                    "bootID": self.boot_id,
                },
            },
        }


def create_node(core_v1: k8s_client.CoreV1Api, node: SimNode) -> k8s_client.V1Node:
    """Register the node; the server adds its own taints (e.g. not-ready) via admission."""
    body = k8s_client.V1Node.from_dict(node.body())
    assert body is not None
    created: k8s_client.V1Node = core_v1.create_node(body)
    return created


def set_node_condition(
    core_v1: k8s_client.CoreV1Api,
    name: str,
    *,
    condition_type: str,
    status: str,
    reason: str,
    message: str = "",
    skew: float = 0.0,
) -> k8s_client.V1Node:
    """Patch one condition through the status subresource, as a kubelet or NPD would (one
    whose clock is `skew` seconds off writes its transition time so).

    A strategic merge patch merges `conditions` by `type`, so the others stay untouched.
    """
    written = _condition(condition_type, status, reason, _now(skew))
    patch = {"status": {"conditions": [{**written, "message": message}]}}
    patched: k8s_client.V1Node = core_v1.patch_node_status(
        name, patch, _content_type=STRATEGIC_MERGE_PATCH
    )
    return patched


def heartbeat(core_v1: k8s_client.CoreV1Api, name: str) -> None:
    """What a kubelet's status update does every 10 s: only lastHeartbeatTime moves.

    Status, reason and lastTransitionTime stay as they are, so nothing a rule reads changes.
    """
    response: Any = core_v1.read_node(name, _preload_content=False)  # urllib3 response
    conditions = json.loads(response.data)["status"].get("conditions") or []
    now = _now()
    beats = [{**condition, "lastHeartbeatTime": now} for condition in conditions]
    core_v1.patch_node_status(
        name, {"status": {"conditions": beats}}, _content_type=STRATEGIC_MERGE_PATCH
    )


def delete_node(core_v1: k8s_client.CoreV1Api, name: str, timeout: float = 30.0) -> None:
    """Delete the node and wait until the API no longer has it (finalizers may delay that)."""
    try:
        core_v1.delete_node(name)
    except ApiException as error:
        if error.status != NOT_FOUND:
            raise
    wait_until(lambda: not _node_exists(core_v1, name), timeout, f"node {name} deleted")


def mark_pod_ready(
    core_v1: k8s_client.CoreV1Api, name: str, namespace: str, skew: float = 0.0
) -> k8s_client.V1Pod:
    """Set a pod Running and Ready via the status subresource, as its kubelet would (one whose
    clock is `skew` seconds off writes its times so).

    Used where no kwok runs; condition entries merge by `type`, container statuses are
    replaced wholesale, one per container in the spec.
    """
    pod: k8s_client.V1Pod = core_v1.read_namespaced_pod(name, namespace)
    now = _now(skew)
    containers = pod.spec.containers if pod.spec else []
    statuses = [
        {
            "name": container.name,
            "image": container.image or "",
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }
        for container in containers
    ]
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("Initialized", "ContainersReady", "Ready")
    ]
    patch = {
        "status": {
            "phase": "Running",
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": statuses,
        }
    }
    patched: k8s_client.V1Pod = core_v1.patch_namespaced_pod_status(
        name, namespace, patch, _content_type=STRATEGIC_MERGE_PATCH
    )
    return patched


def wait_until(
    probe: Callable[[], T | bool | None], timeout: float, what: str, interval: float = 0.2
) -> T:
    """Poll `probe` until it returns something truthy and return that; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_crd_established(api_client: k8s_client.ApiClient, name: str, timeout: float = 30) -> None:
    """The API server serves a CRD's objects only once it is Established."""
    extensions = k8s_client.ApiextensionsV1Api(api_client)

    def established() -> bool:
        status = extensions.read_custom_resource_definition(name).status
        conditions = (status.conditions or []) if status is not None else []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established, timeout, f"the CRD {name} established")


def _node_exists(core_v1: k8s_client.CoreV1Api, name: str) -> bool:
    try:
        core_v1.read_node(name)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return False
        raise
    return True


def _condition(kind: str, status: str, reason: str, now: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _image(node: str, n: int) -> dict[str, Any]:
    """One status.images entry shaped like a kubelet's: a digest name, a tag name, a size."""
    digest = hashlib.sha256(f"{node}/{n}".encode()).hexdigest()
    repository = f"registry.example.com/platform/team-{n % 7}/service-{n}"
    return {
        "names": [f"{repository}@sha256:{digest}", f"{repository}:v1.{n}.0"],
        "sizeBytes": 2**26 + n,
    }


def _now(skew: float = 0.0) -> str:
    """This host's time, as a writer whose clock is `skew` seconds off (negative: behind) would
    write it."""
    now = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=skew)
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")
