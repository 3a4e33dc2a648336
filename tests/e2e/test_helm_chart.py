"""The chart, packaged as `make chart` packages it, with the real helm on a real kube-apiserver:
install, upgrade (a rules edit and a replica change), rollback and uninstall, each leaving the
objects the manifest builder builds for the release's values (helm built from its Go module,
`make helm`). The reconciler is not run here (no image): the objects are what is checked.

Uninstall removes every object; the Namespace is deleted too (this control plane runs no
namespace controller, so it stays Terminating). What helm does not own, and so keeps, is what
the reconciler writes at run time: its taint record and persisted-label records (ConfigMaps in
its namespace, deleted with it) and the taints and labels on nodes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.loader import RulesDocument
from nodegate.localcluster.build import ensure_helm_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.manifests.build import build_manifests
from nodegate.manifests.chart import default_values, settings_for
from tests.unit.manifests.support import REPO, REPOSITORY, example_document

CHART = REPO / "charts" / "nodegate"


@pytest.fixture(scope="module")
def helm(control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Any:
    binary = ensure_helm_built()
    home = tmp_path_factory.mktemp("helm-home")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "KUBECONFIG": str(control_plane.kubeconfig_path),
        }
        return subprocess.run(
            [str(binary), *args, "--namespace", "default"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env=env,
        )

    return run


def _values(tmp_path: Path, label: str, **overrides: Any) -> tuple[dict[str, Any], Path]:
    values = {**default_values(example_document()), **overrides}
    values["image"] = {**values["image"], "repository": REPOSITORY}
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return values, path


def _check_released(api: k8s_client.ApiClient, values: dict[str, Any]) -> None:
    """The live objects carry what the builder builds for these values."""
    built = build_manifests(RulesDocument.parse(values["rules"], "rules"), settings_for(values))
    apps = k8s_client.AppsV1Api(api)
    core = k8s_client.CoreV1Api(api)
    namespace = values["namespace"]
    deployment = next(o for o in built if o["kind"] == "Deployment")
    live = apps.read_namespaced_deployment(values["name"], namespace).spec
    assert live is not None and live.template.spec is not None
    assert live.replicas == deployment["spec"]["replicas"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert live.template.spec.containers[0].args == container["args"]
    assert live.template.spec.containers[0].image == container["image"]
    rules = core.read_namespaced_config_map(values["rulesConfigMap"], namespace)
    assert rules.data == next(o for o in built if o["kind"] == "ConfigMap")["data"]


def test_install_upgrade_rollback_uninstall(
    helm: Any, control_plane: LocalControlPlane, unique_name: str, tmp_path: Path
) -> None:
    api = control_plane.client
    packaged = helm("package", str(CHART), "--destination", str(tmp_path))
    assert packaged.returncode == 0, packaged.stderr
    (package,) = tmp_path.glob("nodegate-*.tgz")  # what `make chart` packages
    release = unique_name[:40].rstrip("-")
    common = {"namespace": release, "name": release}
    first, first_file = _values(tmp_path, "first", **common)

    installed = helm("install", release, str(package), "--values", str(first_file))
    assert installed.returncode == 0, installed.stderr
    _check_released(api, first)

    edited = first["rules"] + "# edited by the upgrade\n"
    second, second_file = _values(tmp_path, "second", **common, replicas=3, rules=edited)
    upgraded = helm("upgrade", release, str(package), "--values", str(second_file))
    assert upgraded.returncode == 0, upgraded.stderr
    _check_released(api, second)

    rolled = helm("rollback", release, "1")
    assert rolled.returncode == 0, rolled.stderr
    _check_released(api, first)

    uninstalled = helm("uninstall", release)
    assert uninstalled.returncode == 0, uninstalled.stderr
    rbac = k8s_client.RbacAuthorizationV1Api(api)
    for read in (
        lambda: k8s_client.AppsV1Api(api).read_namespaced_deployment(release, release),
        lambda: rbac.read_cluster_role(release),
        lambda: rbac.read_cluster_role_binding(release),
    ):
        with pytest.raises(ApiException) as gone:
            read()
        assert gone.value.status == 404
    try:
        namespace = k8s_client.CoreV1Api(api).read_namespace(release)
    except ApiException as error:
        assert error.status == 404
    else:
        assert namespace.metadata is not None
        assert namespace.metadata.deletion_timestamp is not None
    listed = helm("list", "--all", "--short")
    assert release not in listed.stdout.split()
