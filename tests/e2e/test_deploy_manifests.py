"""The builder's manifests work as shipped: their RBAC is enough, their args run, and no more.

The objects come from `nodegate.manifests.build_manifests` (the one source behind the Pulumi
component, `nodegate manifests` and deploy/reconciler.yaml). Everything but the Deployment is
applied for real; there is no kubelet here to run the Deployment, so its container's command
line runs as a local process instead, with the token of the ServiceAccount the manifests
define (kube-apiserver enforces its RBAC) and the downward-API environment the pod would get.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import utils
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.manifests.build import RulesDocument, build_manifests
from nodegate.manifests.settings import DeploySettings
from tests.e2e.reconciler_fixtures import TIMEOUT, node_events, wait_for_taints
from tests.e2e.reconciler_process import running_reconciler
from tests.unit.manifests.support import EXAMPLE_RULES

NAMESPACE = "nodegate-system"
ACCOUNT = "nodegate-reconciler"


def manifest_objects() -> list[dict[str, Any]]:
    settings = DeploySettings.model_validate(
        {"image": {"repository": "registry.example.com/nodegate"}, "namespace": NAMESPACE}
    )
    document = RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules.yaml")
    return build_manifests(document, settings)


def service_account_kubeconfig(plane: LocalControlPlane, token: str, path: Path) -> Path:
    admin = yaml.safe_load(plane.kubeconfig_path.read_text())
    admin["users"] = [{"name": "reconciler", "user": {"token": token}}]
    for context in admin["contexts"]:
        context["context"]["user"] = "reconciler"
    path.write_text(yaml.safe_dump(admin))
    return path


def test_reconciler_runs_with_the_built_rbac_and_args(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = manifest_objects()
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    for obj in objects:
        if obj["kind"] != "Deployment":  # no kubelet here to run it; we run its command instead
            utils.create_from_dict(api_client, obj)  # type: ignore[no-untyped-call]
    request = k8s_client.AuthenticationV1TokenRequest(spec={"expirationSeconds": 3600})
    status = core_v1.create_namespaced_service_account_token(ACCOUNT, NAMESPACE, request).status
    assert status is not None
    kubeconfig = service_account_kubeconfig(control_plane, str(status.token), tmp_path / "sa")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--http-port")]
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)  # as the downward API sets it
    monkeypatch.setenv("POD_NAME", "nodegate-reconciler-test")

    name = make_node(labels={"example.com/dedicated": "ci"})
    with running_reconciler(kubeconfig, tmp_path, *args) as process:
        wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
        wait_until(
            lambda: [e for e in node_events(core_v1, name) if e.reason == "NodegateUpdated"],
            TIMEOUT,
            "event recorded under the ServiceAccount",
        )
        lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(ACCOUNT, NAMESPACE)
        assert lease.spec is not None
        assert lease.spec.holder_identity
        assert process.metric("nodegate_errors_total") == 0
        assert "Forbidden" not in process.logs()


def _forbidden(call: Any) -> bool:
    try:
        call()
    except ApiException as err:
        return bool(err.status == 403)
    return False


def test_the_service_account_can_read_no_secrets_and_no_other_configmaps(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    tmp_path: Path,
) -> None:
    for obj in manifest_objects():
        if obj["kind"] != "Deployment":
            try:
                utils.create_from_dict(api_client, obj)  # type: ignore[no-untyped-call]
            except utils.FailToCreateError as err:  # the test above may have created them
                if any(e.status != 409 for e in err.api_exceptions):
                    raise
    request = k8s_client.AuthenticationV1TokenRequest(spec={"expirationSeconds": 3600})
    status = core_v1.create_namespaced_service_account_token(ACCOUNT, NAMESPACE, request).status
    assert status is not None
    kubeconfig = service_account_kubeconfig(control_plane, str(status.token), tmp_path / "sa")
    from kubernetes import config as k8s_config

    as_reconciler = k8s_client.CoreV1Api(
        k8s_config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    )

    assert _forbidden(lambda: as_reconciler.list_namespaced_secret(NAMESPACE))
    assert _forbidden(as_reconciler.list_secret_for_all_namespaces)
    # Listing its own namespace's ConfigMaps is granted only because the example rules persist
    # labels (their records are found by label); nothing outside it, and no reads by name.
    assert _forbidden(lambda: as_reconciler.list_namespaced_config_map("kube-system"))
    assert _forbidden(
        lambda: as_reconciler.read_namespaced_config_map("kube-root-ca.crt", NAMESPACE)
    )
    assert _forbidden(lambda: as_reconciler.delete_node("any"))
    assert not _forbidden(
        lambda: as_reconciler.read_namespaced_config_map("nodegate-rules", NAMESPACE)
    )
