"""deploy/reconciler.yaml works as shipped: its RBAC is enough and its args run.

The reconciler runs with the ServiceAccount token the manifests define (real RBAC enforcement by
kube-apiserver) and with the container args taken from the Deployment itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.reconciler_fixtures import TIMEOUT, node_events, wait_for_taints
from tests.e2e.reconciler_process import running_reconciler
from tests.e2e.shipped_manifests import (
    apply_all_but_the_deployment,
    manifest_objects,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
)


def test_reconciler_runs_with_the_shipped_rbac_and_args(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    tmp_path: Path,
) -> None:
    objects = manifest_objects()
    deployment = the_deployment(objects)
    apply_all_but_the_deployment(api_client, objects)  # no kubelet here: we run its command
    token = service_account_token(core_v1, "nodegate-system", "nodegate-reconciler")
    kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / "sa.kubeconfig")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--http-port")]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    name = make_node(labels={"example.com/dedicated": "ci"})
    with running_reconciler(kubeconfig, tmp_path, *args) as process:
        wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
        wait_until(
            lambda: [e for e in node_events(core_v1, name) if e.reason == "NodegateUpdated"],
            TIMEOUT,
            "event recorded under the ServiceAccount",
        )
        lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(
            "nodegate-reconciler", "nodegate-system"
        )
        assert lease.spec is not None
        assert lease.spec.holder_identity
        assert process.metric("nodegate_errors_total") == 0
        assert "Forbidden" not in process.logs()
