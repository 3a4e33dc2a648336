"""deploy/reconciler.yaml as the e2e tests use it: its objects, applied, the example rules as
the NodeRules object it reads, and its ServiceAccount's credentials from the TokenRequest API
(real RBAC enforcement by kube-apiserver)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import utils
from kubernetes.client.exceptions import ApiException

from nodegate.core.rules.model import API_VERSION, CRD_NAME, PLURAL
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_crd_established as wait_established

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "deploy" / "reconciler.yaml"
EXAMPLE_RULES = ROOT / "examples" / "rules.yaml"
ALREADY_EXISTS = 409
GROUP, _, VERSION = API_VERSION.partition("/")


def wait_crd_established(api_client: k8s_client.ApiClient) -> None:
    """The NodeRules CRD Established: the API server serves its objects only then."""
    wait_established(api_client, CRD_NAME)


@contextmanager
def example_rules_applied(api_client: k8s_client.ApiClient) -> Iterator[None]:
    """examples/rules.yaml as the NodeRules object a user applies beside the installation;
    deleted after (NodeRules objects are cluster-wide: the control plane is shared)."""
    wait_crd_established(api_client)
    custom = k8s_client.CustomObjectsApi(api_client)
    body = yaml.safe_load(EXAMPLE_RULES.read_text(encoding="utf-8"))
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    try:
        yield
    finally:
        with suppress(ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, body["metadata"]["name"])


def manifest_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def the_deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment")


def apply_all_but_the_deployment(
    api_client: k8s_client.ApiClient, objects: list[dict[str, Any]]
) -> None:
    """Create every object except the Deployment (no kubelet here runs it; the tests run its
    container themselves). Objects already created by an earlier test of the session are kept."""
    for obj in objects:
        if obj["kind"] == "Deployment":
            continue
        try:
            utils.create_from_dict(api_client, obj)  # type: ignore[no-untyped-call]
        except utils.FailToCreateError as err:
            # The cluster is shared by the session: the objects are the same ones.
            if any(e.status != ALREADY_EXISTS for e in err.api_exceptions):
                raise


def service_account_token(
    core_v1: k8s_client.CoreV1Api, namespace: str, name: str, seconds: int = 3600
) -> str:
    """A bound token for the ServiceAccount, as a kubelet obtains one for a pod."""
    request = k8s_client.AuthenticationV1TokenRequest(spec={"expirationSeconds": seconds})
    status = core_v1.create_namespaced_service_account_token(name, namespace, request).status
    assert status is not None
    return str(status.token)


def service_account_kubeconfig(plane: LocalControlPlane, token: str, path: Path) -> Path:
    admin = yaml.safe_load(plane.kubeconfig_path.read_text())
    admin["users"] = [{"name": "reconciler", "user": {"token": token}}]
    for context in admin["contexts"]:
        context["context"]["user"] = "reconciler"
    path.write_text(yaml.safe_dump(admin))
    return path
