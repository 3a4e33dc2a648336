"""The real Pulumi engine, end to end: `pulumi up` and `pulumi destroy` of a small Python program
through the Python language host and the Kubernetes provider, against a local control plane.

Every Pulumi test elsewhere runs under `pulumi.runtime.set_mocks`; this one proves the tools the
real-engine tier needs (issue 48) work here, offline: the engine, host and provider are built
from their Go modules (`make pulumi-tools`), the provider is installed as a plugin into a
`PULUMI_HOME` in the cache, the state lives in a `file://` backend, and the program runs in the
project's `.venv`, whose pulumi-kubernetes is pinned to the provider's release. Each step
asserts on the cluster, not on Pulumi's output. Marker `pulumi` (`make e2e-pulumi` runs the tier
alone; `make test` builds the tools in a phase of their own, 10 to 36 minutes cold on 2 cores,
and runs it).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.localcluster.pulumi_tools import (
    PulumiTools,
    ensure_pulumi_built,
    install_kubernetes_plugin,
    pulumi_environment,
)
from nodegate.localcluster.versions import PULUMI_KUBERNETES_RELEASE, PULUMI_VERSION
from tests.e2e.conftest import run_control_plane
from tests.e2e.support.pulumi_project import project_venv, run_pulumi

pytestmark = [pytest.mark.pulumi, pytest.mark.timeout(600)]

PROGRAM = """\
import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
namespace = k8s.core.v1.Namespace("namespace", metadata={"name": config.require("namespace")})
k8s.core.v1.ConfigMap(
    "rules",
    metadata={"name": "nodegate-rules", "namespace": namespace.metadata["name"]},
    data={"rules.yaml": config.require("rules")},
)
"""
RULES = "labelTaints: []\n"


@pytest.fixture(scope="module")
def plane(request: pytest.FixtureRequest) -> Iterator[LocalControlPlane]:
    """A control plane of its own with the controller-manager: deleting a Namespace (what
    `pulumi destroy` waits for) needs its namespace controller."""
    yield from run_control_plane(request, with_scheduling=True)


@pytest.fixture(scope="module")
def tools() -> PulumiTools:
    """The cached tools (built at collection by the conftest), the provider installed."""
    built = ensure_pulumi_built()
    install_kubernetes_plugin(built)
    return built


def _pulumi(
    tools: PulumiTools, env: dict[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    result = run_pulumi(tools, env, cwd, *args)
    assert result.returncode == 0, f"pulumi {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def test_pulumi_up_creates_and_destroy_removes_a_namespace_and_configmap(
    plane: LocalControlPlane, tools: PulumiTools, unique_name: str, tmp_path: Path
) -> None:
    backend = tmp_path / "state"
    backend.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(
        "name: nodegate-e2e-engine\nruntime: python\n", encoding="utf-8"
    )
    (project / "__main__.py").write_text(PROGRAM, encoding="utf-8")
    env = pulumi_environment(tools, venv=project_venv())
    env.update(
        {
            "PULUMI_BACKEND_URL": f"file://{backend}",
            "PULUMI_CONFIG_PASSPHRASE": "nodegate-e2e",
            "KUBECONFIG": str(plane.kubeconfig_path),
        }
    )

    version = _pulumi(tools, env, project, "version").stdout.strip()
    assert version == PULUMI_VERSION
    plugins = json.loads(_pulumi(tools, env, project, "plugin", "ls", "--json").stdout)
    assert {"name": "kubernetes", "kind": "resource", "version": PULUMI_KUBERNETES_RELEASE} in [
        {key: plugin[key] for key in ("name", "kind", "version")} for plugin in plugins
    ]
    _pulumi(tools, env, project, "login", f"file://{backend}")
    _pulumi(tools, env, project, "stack", "init", "e2e")
    _pulumi(tools, env, project, "config", "set", "namespace", unique_name)
    _pulumi(tools, env, project, "config", "set", "rules", RULES)

    _pulumi(tools, env, project, "up", "--yes", "--skip-preview")
    core = k8s_client.CoreV1Api(plane.client)
    namespace = core.read_namespace(unique_name)
    assert namespace.status is not None and namespace.status.phase == "Active"
    configmap = core.read_namespaced_config_map("nodegate-rules", unique_name)
    assert configmap.data == {"rules.yaml": RULES}
    assert configmap.metadata is not None
    managers = {str(field.manager) for field in configmap.metadata.managed_fields or []}
    assert any(manager.startswith("pulumi-kubernetes") for manager in managers), managers

    _pulumi(tools, env, project, "destroy", "--yes", "--skip-preview")

    def namespace_gone() -> bool:
        try:
            core.read_namespace(unique_name)
        except ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    wait_until(namespace_gone, 60, f"namespace {unique_name} deleted")
