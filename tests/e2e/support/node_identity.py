"""Acting as a node: the kubelet credentials a compromised node holds.

The local control plane runs Node authorization and NodeRestriction, as OKE and AKS do, so a
client built here may write exactly what a real kubelet may write about itself, and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane

AsNode = Callable[[str], k8s_client.CoreV1Api]


def node_clients(plane: LocalControlPlane) -> Iterator[AsNode]:
    """Yield a factory of CoreV1Api clients authenticated as `system:node:<name>`; close all."""
    opened: list[k8s_client.ApiClient] = []

    def as_node(node_name: str) -> k8s_client.CoreV1Api:
        api_client = plane.api_client(plane.node_identity(node_name))
        opened.append(api_client)
        return k8s_client.CoreV1Api(api_client)

    try:
        yield as_node
    finally:
        for api_client in opened:
            api_client.close()  # type: ignore[no-untyped-call]  # unannotated in the client


@pytest.fixture
def as_node(control_plane: LocalControlPlane) -> Iterator[AsNode]:
    """`as_node("evil-1")`: a CoreV1Api with evil-1's kubelet credentials on `control_plane`."""
    yield from node_clients(control_plane)
