"""The builder's manifests work as shipped: their RBAC is enough, their args run, and no more.

The objects come from `nodegate.manifests.build.build_manifests` (the one source behind the Pulumi
component, `nodegate manifests` and deploy/reconciler.yaml). Everything but the Deployment is
applied for real; there is no kubelet here to run the Deployment, so its container's command
line runs as a local process instead, with the token of the ServiceAccount the manifests
define (kube-apiserver enforces its RBAC) and the downward-API environment the pod would get.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.rules.loader import RulesDocument
from nodegate.localcluster.build import ensure_kubectl_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from tests.e2e.support.reconciler_fixtures import TIMEOUT, node_events, taints_of, wait_for_taints
from tests.e2e.support.reconciler_process import running_reconciler
from tests.e2e.support.shipped_manifests import (
    apply_all_but_the_deployment,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
    wait_crd_established,
)
from tests.unit.manifests.support import EXAMPLE_RULES, ON_CONFIGMAP

NAMESPACE = ACCOUNT = "nodegate-on-configmap"
"""Not deploy/reconciler.yaml's names: the image test applies those on objects, and on a shared
control plane the objects (the ClusterRole above all) of whichever came first would stay."""
LEASE = "nodegate-reconciler"


def manifest_objects() -> list[dict[str, Any]]:
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": NAMESPACE,
            "name": ACCOUNT,
            **ON_CONFIGMAP,
        }
    )
    document = RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules.yaml")
    return build_manifests(document, settings)


def as_the_pod(
    plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    deployment: dict[str, Any],
    namespace: str,
    account: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Path, list[str]]:
    """The Deployment's container as its pod would run it: a kubeconfig with its
    ServiceAccount's token, its args (on a port of its own), the downward API's environment."""
    token = service_account_token(core_v1, namespace, account)
    kubeconfig = service_account_kubeconfig(plane, token, tmp_path / "sa")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    monkeypatch.setenv("POD_NAME", f"{account}-test")
    return kubeconfig, [a for a in container["args"] if not a.startswith("--http-port")]


def test_reconciler_runs_with_the_built_rbac_and_args(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = manifest_objects()
    deployment = the_deployment(objects)
    apply_all_but_the_deployment(api_client, objects)  # no kubelet here: we run its command
    kubeconfig, args = as_the_pod(
        control_plane, core_v1, deployment, NAMESPACE, ACCOUNT, tmp_path, monkeypatch
    )

    name = make_node(labels={"example.com/dedicated": "ci"})
    with running_reconciler(kubeconfig, tmp_path, *args) as process:
        wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
        wait_until(
            lambda: [e for e in node_events(core_v1, name) if e.reason == "NodegateUpdated"],
            TIMEOUT,
            "event recorded under the ServiceAccount",
        )
        lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, NAMESPACE)
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
    apply_all_but_the_deployment(api_client, manifest_objects())
    token = service_account_token(core_v1, NAMESPACE, ACCOUNT)
    kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / "sa")
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


def test_on_rules_objects_the_reconciler_runs_with_the_built_rbac_and_reports_status(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """rulesSource objects: the installation, then the rules file itself through a real
    `kubectl apply -f`; the reconciler reads every NodeRules object and writes their status
    with exactly the RBAC built for it."""
    namespace = "nodegate-objects"
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": namespace,
            "name": namespace,
            "rulesSource": "objects",
        }
    )
    document = RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules.yaml")
    objects = build_manifests(document, settings)
    assert not [o for o in objects if o["kind"] == "ConfigMap" and "rules" in o["metadata"]["name"]]
    apply_all_but_the_deployment(api_client, objects)
    wait_crd_established(api_client)
    applied = subprocess.run(
        [str(ensure_kubectl_built()), "apply", "-f", str(EXAMPLE_RULES)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig_path)},
    )
    assert applied.returncode == 0, applied.stderr
    custom = k8s_client.CustomObjectsApi(api_client)
    try:
        deployment = the_deployment(objects)
        kubeconfig, args = as_the_pod(
            control_plane, core_v1, deployment, namespace, namespace, tmp_path, monkeypatch
        )
        assert "--rules-objects" in args
        name = make_node(labels={"example.com/dedicated": "ci"})
        with running_reconciler(kubeconfig, tmp_path, *args) as process:
            wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)

            def in_force() -> bool:
                found: dict[str, Any] = cast(
                    dict[str, Any],
                    custom.get_cluster_custom_object("nodegate.dev", "v1", "noderules", "example"),
                )
                status = found.get("status") or {}
                return bool(status.get("inForceGeneration") == found["metadata"]["generation"])

            wait_until(in_force, TIMEOUT, "the example's status written by the reconciler")
            assert process.metric("nodegate_errors_total") == 0
            assert "Forbidden" not in process.logs()
    finally:
        custom.delete_cluster_custom_object("nodegate.dev", "v1", "noderules", "example")


def test_rules_that_read_what_access_withholds_wait_and_say_so_in_their_status(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    unique_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An installation with `access.pods: false`, then a team's gate that waits for init
    pods: the API server refuses the reconciler the pods, the gate stays on its node (never
    lifted blind), and the object's status says which rule waits and what to grant."""
    namespace = "nodegate-no-pods"
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": namespace,
            "name": namespace,
            "access": {"pods": False},
        }
    )
    objects = build_manifests(None, settings)
    apply_all_but_the_deployment(api_client, objects)
    wait_crd_established(api_client)
    custom = k8s_client.CustomObjectsApi(api_client)
    name = f"{unique_name}-gated"[:63].rstrip("-")
    label, gate = "e2e.nodegate.dev/no-pods", "e2e.nodegate.dev/no-pods-init"
    spec = {
        "startupGates": [
            {
                "name": name,
                "match": {"labels": {label: "yes"}},
                "taint": {"key": gate, "effect": "NoSchedule"},
                "readyWhen": {"pods": {"namespace": "kube-system", "selector": {"app": "x"}}},
            }
        ]
    }
    body = {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", "metadata": {"name": name}}
    custom.create_cluster_custom_object("nodegate.dev", "v1", "noderules", {**body, "spec": spec})
    try:
        kubeconfig, args = as_the_pod(
            control_plane,
            core_v1,
            the_deployment(objects),
            namespace,
            namespace,
            tmp_path,
            monkeypatch,
        )
        node = make_node(labels={label: "yes"}, taints=[{"key": gate, "effect": "NoSchedule"}])
        with running_reconciler(kubeconfig, tmp_path, *args):

            def degraded() -> dict[str, Any] | None:
                found = cast(
                    dict[str, Any],
                    custom.get_cluster_custom_object("nodegate.dev", "v1", "noderules", name),
                )
                conditions = (found.get("status") or {}).get("conditions") or []
                return next((c for c in conditions if c["reason"] == "CannotRead"), None)

            wait_until(degraded, TIMEOUT, "the object's status saying its rule cannot read")
            condition = degraded()
            assert condition is not None and condition["status"] == "True"
            assert f"{name}: the reconciler may not list pods" in condition["message"]
            assert "access.pods" in condition["message"]
            assert 'cannot list resource "pods"' in condition["message"]  # the API's own words
            assert '"kind":"Status"' not in condition["message"]
            assert (gate, "NoSchedule") in taints_of(core_v1, node)
    finally:
        custom.delete_cluster_custom_object("nodegate.dev", "v1", "noderules", name)
