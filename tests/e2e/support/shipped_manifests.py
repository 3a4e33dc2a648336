"""deploy/reconciler.yaml as the e2e tests use it: its objects, applied, and its ServiceAccount's
credentials from the TokenRequest API (real RBAC enforcement by kube-apiserver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import utils

from nodegate.localcluster.cluster import LocalControlPlane

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "reconciler.yaml"
ALREADY_EXISTS = 409


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
