"""deploy/reconciler.yaml works as shipped: its RBAC is enough and its args run.

The reconciler runs with the ServiceAccount token the manifests define (real RBAC enforcement by
kube-apiserver) and with the container args taken from the Deployment itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import utils

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.reconciler_fixtures import TIMEOUT, node_events, wait_for_taints
from tests.e2e.reconciler_process import running_reconciler

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "reconciler.yaml"


def manifest_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def service_account_kubeconfig(plane: LocalControlPlane, token: str, path: Path) -> Path:
    admin = yaml.safe_load(plane.kubeconfig_path.read_text())
    admin["users"] = [{"name": "reconciler", "user": {"token": token}}]
    for context in admin["contexts"]:
        context["context"]["user"] = "reconciler"
    path.write_text(yaml.safe_dump(admin))
    return path


def test_reconciler_runs_with_the_shipped_rbac_and_args(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    tmp_path: Path,
) -> None:
    objects = manifest_objects()
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    for obj in objects:
        if obj["kind"] != "Deployment":  # no kubelet here to run it; we run its command instead
            utils.create_from_dict(api_client, obj)  # type: ignore[no-untyped-call]
    request = k8s_client.AuthenticationV1TokenRequest(spec={"expirationSeconds": 3600})
    status = core_v1.create_namespaced_service_account_token(
        "nodegate-reconciler", "nodegate-system", request
    ).status
    assert status is not None
    token = str(status.token)
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
