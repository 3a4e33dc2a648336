"""The reconciler rides out an API-server crash: no restart, no lost or duplicated writes.

A control plane of its own (module-scoped), since its API server is killed mid-run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from tests.e2e.conftest import run_control_plane
from tests.e2e.reconciler_fixtures import RULES, patch_labels, wait_for_taints
from tests.e2e.reconciler_process import running_reconciler

CI = ("example.com/dedicated", "NoSchedule")
CONVERGE_SECONDS = 30


@pytest.fixture(scope="module")
def fragile_control_plane(request: pytest.FixtureRequest) -> Iterator[LocalControlPlane]:
    yield from run_control_plane(request, with_scheduling=False)


def test_reconciler_recovers_from_an_api_server_crash_without_a_restart(
    fragile_control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    plane = fragile_control_plane
    core = k8s_client.CoreV1Api(plane.client)
    core.create_namespaced_config_map(
        "default",
        k8s_client.V1ConfigMap(metadata={"name": "rules-outage"}, data={"rules.yaml": RULES}),
    )
    create_node(core, SimNode(name="before-crash", labels={"example.com/dedicated": "ci"}))
    args = ("--rules-configmap", "default/rules-outage", "--no-leader-elect")
    with running_reconciler(plane.kubeconfig_path, tmp_path, *args) as reconciler:
        wait_for_taints(core, "before-crash", lambda t: CI in t)
        pid = reconciler.process.pid

        plane.kill_component("kube-apiserver")
        time.sleep(3)  # watches broken, relists refused: every loop must keep retrying
        assert reconciler.process.poll() is None
        assert reconciler.get("/healthz")[0] == 200
        plane.start_component("kube-apiserver")

        restarted = time.monotonic()
        create_node(core, SimNode(name="after-crash", labels={"example.com/dedicated": "ci"}))
        patch_labels(core, "before-crash", {"example.com/dedicated": None})
        wait_until(
            lambda: CI in _taints(core, "after-crash") and CI not in _taints(core, "before-crash"),
            CONVERGE_SECONDS,
            "convergence after the API server came back",
        )
        print(f"converged {time.monotonic() - restarted:.1f}s after the API server restart")

        assert reconciler.process.poll() is None and reconciler.process.pid == pid
        assert reconciler.get("/healthz")[0] == 200
        # One write per real change: taint before-crash, taint after-crash, untaint before-crash.
        assert reconciler.metric("nodegate_node_writes_total", result="ok") == 3
        assert reconciler.metric("nodegate_informer_errors_total") >= 1


def _taints(core: k8s_client.CoreV1Api, name: str) -> set[tuple[str, str]]:
    spec = core.read_node(name).spec
    return {(t.key, t.effect) for t in ((spec.taints if spec else None) or [])}
