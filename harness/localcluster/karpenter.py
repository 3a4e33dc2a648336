"""Karpenter with its kwok cloud provider, on a `LocalControlPlane`: a real node autoscaler.

Karpenter's kwok provider launches a "node" by creating a Node object (annotated for kwok, which
then plays its kubelet), so Karpenter's own provisioning, registration (taints and startupTaints
written onto the Node), initialization and consolidation run unchanged against the real API
server. Built from its Go module only for the tests that use it (`ensure_karpenter_built`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster import paths
from nodegate.localcluster.build import ensure_karpenter_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.ports import free_port
from nodegate.localcluster.processes import ManagedProcess, StartedWhileUsed

KWOK_NODE_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
"""The nodeClassRef of a NodePool Karpenter's kwok provider launches from."""

_CRD_ESTABLISHED_SECONDS = 30.0


class KarpenterError(RuntimeError):
    """Karpenter did not start; the message carries its log tail."""


def karpenter_argv(binary: Path, metrics_port: int, probe_port: int) -> list[str]:
    """One replica, no leader election, short batching windows so tests see decisions fast.

    Its metrics and probe servers bind every interface on the given ports (Karpenter takes a
    port, not an address); nothing but the test reads them."""
    return [
        str(binary),
        "--disable-leader-election",
        f"--metrics-port={metrics_port}",
        f"--health-probe-port={probe_port}",
        "--log-level=info",
        "--batch-idle-duration=1s",
        "--batch-max-duration=3s",
    ]


class LocalKarpenter(StartedWhileUsed):
    """Karpenter (kwok provider) for one control plane: CRDs installed, `default` KWOKNodeClass
    created, the process started and stopped. A context manager."""

    def __init__(self, plane: LocalControlPlane, log_dir: Path) -> None:
        self.plane = plane
        self.log_dir = log_dir
        self.process: ManagedProcess | None = None

    def start(self) -> None:
        root = ensure_karpenter_built()
        self._install_crds(root / paths.KARPENTER_CRDS_DIR)
        self._create_node_class()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.process = ManagedProcess(
            "karpenter",
            karpenter_argv(root / paths.KARPENTER_KWOK, free_port(), free_port()),
            self.log_dir / "karpenter.log",
            env={"KUBECONFIG": str(self.plane.kubeconfig_path)},
        )
        self.process.start()
        time.sleep(1.0)
        if not self.process.is_alive():
            raise KarpenterError(f"karpenter exited at once:\n{self.process.tail()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def tail(self, lines: int = 60) -> str:
        return self.process.tail(lines) if self.process else "(not started)\n"

    def _install_crds(self, crd_dir: Path) -> None:
        extensions = k8s_client.ApiextensionsV1Api(self.plane.client)
        names = []
        for path in sorted(crd_dir.glob("*.yaml")):
            crd: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
            names.append(crd["metadata"]["name"])
            try:
                extensions.create_custom_resource_definition(crd)  # type: ignore[arg-type]
            except ApiException as err:
                if err.status != 409:  # already installed by an earlier start
                    raise
        deadline = time.monotonic() + _CRD_ESTABLISHED_SECONDS
        for name in names:
            while not _established(extensions, name):
                if time.monotonic() > deadline:
                    raise KarpenterError(f"CRD {name} not established in time")
                time.sleep(0.2)

    def _create_node_class(self) -> None:
        custom = k8s_client.CustomObjectsApi(self.plane.client)
        body = {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": KWOK_NODE_CLASS["name"]},
        }
        try:
            custom.create_cluster_custom_object(
                "karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", body
            )
        except ApiException as err:
            if err.status != 409:
                raise


def _established(extensions: k8s_client.ApiextensionsV1Api, name: str) -> bool:
    crd = extensions.read_custom_resource_definition(name)
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
