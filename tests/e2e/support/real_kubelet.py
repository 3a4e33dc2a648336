"""A real kubelet per test (nodegate.localcluster.kubelet), and the Node's first version.

The kubelets register with the plain session `control_plane`: no kwok there to fight a real
kubelet over its Node, and no controller-manager to change the Node after registration, so
besides the kubelet only the test and the reconciler it starts write the Node.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.kubelet import LocalKubelet, why_no_kubelet

REGISTRATION_TIMEOUT_SECONDS = 30
KUBELET_NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
"""The one taint kubelet adds itself to every Node it registers (kubelet_node_status.go)."""
KUBELET_OWN_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
"""The labels kubelet sets itself on a Node it registers (no cloud provider here)."""


@dataclass(frozen=True)
class FirstVersion:
    """The Node as a watch started before its kubelet saw it first (ADDED), and how long after
    kubelet's start that event arrived."""

    node: dict[str, Any]
    seconds: float

    @property
    def taints(self) -> list[dict[str, str]]:
        return list(self.node["spec"].get("taints") or [])

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.node["metadata"].get("labels") or {})


StartKubelet = Callable[..., LocalKubelet]


@pytest.fixture
def start_kubelet(
    control_plane: LocalControlPlane, core_v1: k8s_client.CoreV1Api
) -> Iterator[StartKubelet]:
    """start(node_name, flags=(), dropin=None): a real kubelet registering `node_name`.

    Skipped with the reason where a kubelet cannot run (not root, no `unshare`). At the end
    every kubelet is stopped by pid, checked gone, and its Node deleted."""
    reason = why_no_kubelet()
    if reason is not None:
        pytest.skip(reason)
    started: list[LocalKubelet] = []

    def start(node_name: str, flags: Sequence[str] = (), dropin: str | None = None) -> LocalKubelet:
        kubelet = LocalKubelet(control_plane, node_name, flags=flags, dropin=dropin)
        started.append(kubelet)
        return kubelet.start()

    try:
        yield start
    finally:
        for kubelet in started:
            tails = kubelet.log_tails()
            kubelet.stop()
            print(tails[-3000:])
            try:
                core_v1.delete_node(kubelet.node_name)
            except ApiException as err:
                if err.status != 404:
                    raise
        leftovers = [p for kubelet in started for p in kubelet.leftover_processes()]
        assert not leftovers, f"kubelet processes survived their stop: {leftovers}"


def first_version(
    core_v1: k8s_client.CoreV1Api, node_name: str, start: Callable[[], LocalKubelet]
) -> FirstVersion:
    """Run `start` and return the Node's first version: the watch begins at a resourceVersion
    read BEFORE `start`, so its first event for the name is the create itself, whatever
    happened to the Node afterwards."""
    selector = f"metadata.name={node_name}"
    listed: Any = core_v1.list_node(field_selector=selector, _preload_content=False)
    before = json.loads(listed.data)
    assert not before["items"], f"{node_name} exists before its kubelet started"
    kubelet = start()
    stream: Any = core_v1.list_node(  # a urllib3 response: one JSON event per line
        field_selector=selector,
        resource_version=before["metadata"]["resourceVersion"],
        watch=True,
        timeout_seconds=REGISTRATION_TIMEOUT_SECONDS,
        _preload_content=False,
    )
    try:
        for line in stream:
            seconds = time.monotonic() - kubelet.started_at
            event = json.loads(line)
            assert event["type"] == "ADDED", f"first event for {node_name}: {event}"
            return FirstVersion(event["object"], seconds)
    finally:
        stream.release_conn()
    raise AssertionError(
        f"{node_name} did not register in {REGISTRATION_TIMEOUT_SECONDS}s "
        f"(kubelet running: {kubelet.is_running()}):\n{kubelet.log_tails()}"
    )


def taint_set(taints: Sequence[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(key, value, effect) of each taint: kubelet writes no timeAdded at registration."""
    return {(t["key"], t.get("value", ""), t["effect"]) for t in taints}
