"""The chart, packaged as `make chart` packages it, installed with the real helm (v3 and v4, built
from their Go modules, `make helm`) on a real kube-apiserver, with the reconciler running as the
release deployed it.

There is no kubelet to run the released Deployment's pods here, so its container runs as a
local process, as tests/e2e/test_deploy_manifests.py runs the builder's: the args of the live
Deployment helm wrote, the downward-API environment, and a token of the ServiceAccount helm
created (kube-apiserver enforces the release's RBAC and its fence policy).

* any rules: two installs side by side in two namespaces, one with rules of label taints only,
  the other with a NoExecute gate and a node agent (which chart 0.1.0 refused), each making its
  objects without clashing with the other's; one reconciler run, the first release's, taints a
  labelled node from its release's NodeRules object (two running reconcilers would both read
  every NodeRules object and write the same nodes: the chart says one release per cluster);
  uninstall removes every object of both and keeps what the reconciler wrote;
* an upgrade from chart 0.1.0 (packaged from commit fdcd617): its rules ConfigMap becomes the
  release's NodeRules object, its objects are replaced by the release-named ones, and the
  Lease keeps its name;
* helm 4 (server-side apply by default): the reconciler fills the webhook's Secret and patches
  its caBundle (fields the chart does not render), and an upgrade neither conflicts with them
  nor resets them;
* `ct install` (chart-testing) as chart CI runs it, on the control plane with kwok: kwok marks
  the released pods Running and Ready on its simulated nodes, so `helm install --wait`
  completes, though no container runs (the image's own run is tests/e2e/test_image.py's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.core.rules.model import API_VERSION, PLURAL
from nodegate.localcluster import paths
from nodegate.localcluster.build import (
    ensure_chart_testing_built,
    ensure_helm_built,
    ensure_kubectl_built,
)
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, delete_node, wait_until
from nodegate.localcluster.versions import HELM4_VERSION, HELM_VERSION
from tests.e2e.support.reconciler_fixtures import TIMEOUT, wait_for_taints
from tests.e2e.support.reconciler_process import ReconcilerProcess, free_port, running_reconciler
from tests.e2e.support.shipped_manifests import service_account_kubeconfig, service_account_token
from tests.unit.manifests.chart_values import CHART, chart_defaults, coalesced, expected_objects
from tests.unit.manifests.support import REPO, REPOSITORY, example_document

Helm = Callable[..., subprocess.CompletedProcess[str]]
GROUP, VERSION = API_VERSION.split("/")
PREVIOUS = "fdcd617"
"""The last commit of chart 0.1.0, the one generated for examples/rules.yaml."""


def _rules(name: str, spec: str) -> str:
    return f"apiVersion: {API_VERSION}\nkind: NodeRules\nmetadata: {{name: {name}}}\nspec:\n{spec}"


def _label_taints_only(name: str, label: str) -> str:
    return _rules(
        name,
        "  labelTaints:\n"
        "    - name: dedicated\n"
        f"      match: {{labels: {{{label}: ci}}}}\n"
        f"      taint: {{key: {label}, value: ci, effect: NoSchedule}}\n"
        "      nodeMayLift: true\n",
    )


def _another_gate(name: str) -> str:
    """A NoExecute gate waiting for CSI drivers and a node agent: what 0.1.0 refused."""
    return _rules(
        name,
        "  startupGates:\n"
        "    - name: storage\n"
        "      match: {labels: {example.com/never-on-these-nodes: x}}\n"
        "      taint: {key: startup.example.com/storage, effect: NoExecute}\n"
        "      readyWhen: {csiDrivers: [{name: ebs.csi.aws.com}]}\n"
        "  nodeAgents:\n"
        "    - name: cni\n"
        "      match: {labels: {example.com/never-on-these-nodes: x}}\n"
        "      taint: {key: example.com/cni-not-ready, effect: NoExecute}\n"
        "      daemonSets: [{namespace: kube-system, name: cni}]\n",
    )


def _helm(plane: LocalControlPlane, home: Path, version: str) -> Helm:
    binary = ensure_helm_built(version=version)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "KUBECONFIG": str(plane.kubeconfig_path)}
        return subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=180, check=False, env=env
        )

    return run


def _package(chart: Path, out: Path, home: Path) -> Path:
    packaged = subprocess.run(
        [str(ensure_helm_built()), "package", str(chart), "--destination", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert packaged.returncode == 0, packaged.stderr
    (found,) = out.glob("nodegate-*.tgz")
    return found


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart packaged once, as `make chart` packages it."""
    return _package(CHART, tmp_path_factory.mktemp("charts"), tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def previous_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chart 0.1.0, from its last commit."""
    tree = tmp_path_factory.mktemp("previous")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS, "charts/nodegate"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    found = _package(
        tree / "charts" / "nodegate", tmp_path_factory.mktemp("old"), tmp_path_factory.mktemp("h")
    )
    assert found.name == "nodegate-0.1.0.tgz"
    return found


def _values_file(tmp_path: Path, label: str, values: dict[str, Any]) -> Path:
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


def _release_objects(helm: Helm, release: str, namespace: str) -> list[dict[str, Any]]:
    shown = helm("get", "manifest", release, "--namespace", namespace)
    assert shown.returncode == 0, shown.stderr
    return [d for d in yaml.safe_load_all(shown.stdout) if d]


def _gone(api: k8s_client.ApiClient, obj: dict[str, Any]) -> bool:
    dynamic = DynamicClient(api)  # type: ignore[no-untyped-call]
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        dynamic.get(  # type: ignore[no-untyped-call]
            resource, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")
        )
    except NotFoundError:
        return True
    return False


def _check_released(
    api: k8s_client.ApiClient, given: dict[str, Any], release: str, namespace: str
) -> None:
    """The live Deployment and NodeRules objects carry what the builder builds for these
    values, released as `release` in `namespace`."""
    built = expected_objects(coalesced(chart_defaults(), given), release, namespace)
    deployment = next(o for o in built if o["kind"] == "Deployment")
    name = deployment["metadata"]["name"]
    live: Any = k8s_client.AppsV1Api(api).read_namespaced_deployment(name, namespace).spec
    assert live.replicas == deployment["spec"]["replicas"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert live.template.spec.containers[0].args == container["args"]
    assert live.template.spec.containers[0].image == container["image"]
    custom = k8s_client.CustomObjectsApi(api)
    for rules in (o for o in built if o["kind"] == "NodeRules"):
        found: Any = custom.get_cluster_custom_object(
            GROUP, VERSION, PLURAL, rules["metadata"]["name"]
        )
        assert found["spec"] == rules["spec"]


@contextmanager
def _released_reconciler(
    plane: LocalControlPlane, namespace: str, name: str, tmp_path: Path
) -> Iterator[ReconcilerProcess]:
    """The released Deployment's container as a local process (see the module doc)."""
    api = plane.client
    live: Any = k8s_client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    pod = live.spec.template.spec
    container = pod.containers[0]
    token = service_account_token(k8s_client.CoreV1Api(api), namespace, pod.service_account_name)
    kubeconfig = service_account_kubeconfig(plane, token, tmp_path / f"sa-{name}")
    args = [a for a in container.args if not a.startswith("--http-port")]  # a free port instead
    env = {"POD_NAMESPACE": namespace, "POD_NAME": f"{name}-released"}
    with running_reconciler(kubeconfig, tmp_path, *args, env=env) as process:
        yield process


@pytest.fixture
def namespaces(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[list[str]]:
    """Two release namespaces, which helm makes (`--create-namespace`) and keeps after
    uninstall; deleted after the test."""
    names = [f"{unique_name[:36].rstrip('-')}-{i}" for i in (1, 2)]
    yield names
    for name in names:
        try:
            core_v1.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


def _taints(core_v1: k8s_client.CoreV1Api, name: str) -> set[tuple[str, str]]:
    node: Any = core_v1.read_node(name)
    return {(t.key, t.effect) for t in node.spec.taints or []}


def test_two_releases_of_any_rules_install_side_by_side_reconcile_and_uninstall(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    package: Path,
    namespaces: list[str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Two installs side by side (two namespaces, cluster-scoped objects named apart), each
    with its own rules; one reconciler run, the first release's, reconciles. Not two releases
    serving one cluster: both would read every NodeRules object and write the same nodes, so
    the chart says one release per cluster."""
    api = control_plane.client
    helm = _helm(control_plane, tmp_path / "home", HELM_VERSION)
    label = f"{unique_name[:30]}.example.com/dedicated"
    given = [
        {"image": {"repository": REPOSITORY}, "rules": _label_taints_only(f"{ns}-a", label)}
        for ns in namespaces[:1]
    ] + [{"image": {"repository": REPOSITORY}, "rules": _another_gate(f"{namespaces[1]}-b")}]
    releases = [f"{ns}-nodegate" for ns in namespaces]  # unique in the shared cluster
    for release, namespace, values in zip(releases, namespaces, given, strict=True):
        where = ["--namespace", namespace, "--create-namespace"]
        values_file = _values_file(tmp_path, release, values)
        installed = helm("install", release, str(package), "--values", str(values_file), *where)
        assert installed.returncode == 0, installed.stderr
        assert f"kubectl -n {namespace} get deploy" in installed.stdout  # NOTES.txt
        released = _release_objects(helm, release, namespace)
        elsewhere = [o for o in released if o["metadata"].get("namespace", namespace) != namespace]
        assert not elsewhere, f"objects outside the release namespace: {elsewhere}"
        missing = [f"{o['kind']}/{o['metadata']['name']}" for o in released if _gone(api, o)]
        assert not missing, f"not created: {missing}"
        _check_released(api, values, release, namespace)

    node = make_node(labels={label: "ci"})
    with _released_reconciler(control_plane, namespaces[0], releases[0], tmp_path) as process:
        wait_for_taints(core_v1, node, lambda t: (label, "NoSchedule") in t)
        assert process.metric("nodegate_errors_total") == 0
        assert "Forbidden" not in process.logs()

    for release, namespace in zip(releases, namespaces, strict=True):
        objects = _release_objects(helm, release, namespace)
        uninstalled = helm("uninstall", release, "--namespace", namespace)
        assert uninstalled.returncode == 0, uninstalled.stderr
        left = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if not _gone(api, o)]
        assert not left, f"uninstall left {left}"
    # Kept on purpose: what the reconciler wrote, which helm never owned.
    core_v1.read_namespaced_config_map(HISTORY_CONFIGMAP, namespaces[0])
    assert (label, "NoSchedule") in _taints(core_v1, node)


def test_an_upgrade_from_chart_0_1_0_moves_the_rules_into_a_noderules_object(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    package: Path,
    previous_package: Path,
    namespaces: list[str],
    tmp_path: Path,
) -> None:
    api = control_plane.client
    helm = _helm(control_plane, tmp_path / "home", HELM_VERSION)
    namespace = namespaces[0]
    release = f"{namespace}-nodegate"
    where = ["--namespace", namespace]
    old_name = f"{namespace}-old"  # 0.1.0 named its objects after a value, not the release
    old = {"image": {"repository": REPOSITORY}, "rules": example_document().text, "name": old_name}
    old_file = _values_file(tmp_path, "old", old)
    installed = helm(
        "install", release, str(previous_package), "--values", str(old_file), *where,
        "--create-namespace",
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    apps = k8s_client.AppsV1Api(api)
    old_deployment: Any = apps.read_namespaced_deployment(old_name, namespace)
    old_args = old_deployment.spec.template.spec.containers[0].args
    old_lease = next(a for a in old_args if a.startswith("--lease-name="))
    core_v1.read_namespaced_config_map("nodegate-rules", namespace)
    try:
        new = {"image": {"repository": REPOSITORY}, "rules": example_document().text}
        new_file = _values_file(tmp_path, "new", new)
        upgraded = helm("upgrade", release, str(package), "--values", str(new_file), *where)
        assert upgraded.returncode == 0, upgraded.stderr
        _check_released(api, new, release, namespace)
        deployment: Any = apps.read_namespaced_deployment(release, namespace)
        assert old_lease in deployment.spec.template.spec.containers[0].args
        with pytest.raises(ApiException) as old_deployment_gone:
            apps.read_namespaced_deployment(old_name, namespace)
        assert old_deployment_gone.value.status == 404
        with pytest.raises(ApiException) as rules_configmap_gone:
            core_v1.read_namespaced_config_map("nodegate-rules", namespace)
        assert rules_configmap_gone.value.status == 404
        history = helm("history", release, *where, "--output", "json")
        charts = [entry["chart"] for entry in json.loads(history.stdout)]
        assert charts == ["nodegate-0.1.0", "nodegate-0.2.0"]
    finally:
        helm("uninstall", release, *where)


def test_helm4_server_side_apply_leaves_the_reconcilers_own_fields_alone(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    package: Path,
    namespaces: list[str],
    tmp_path: Path,
) -> None:
    """The webhook's Secret data and the configuration's caBundle are the reconciler's: the
    chart renders neither, so helm 4's server-side apply neither conflicts with nor resets them
    on upgrade."""
    api = control_plane.client
    helm = _helm(control_plane, tmp_path / "home", HELM4_VERSION)
    namespace = namespaces[0]
    name = release = f"{namespace}-nodegate"
    first: dict[str, Any] = {
        "image": {"repository": REPOSITORY, "digest": "sha256:" + "c" * 64},
        "imagePullSecrets": ["regcred"],
        "webhook": {"enabled": True, "port": free_port()},
        "networkPolicy": {"enabled": True},
    }
    where = ["--namespace", namespace]
    admission: Any = k8s_client.AdmissionregistrationV1Api(api)
    try:
        installed = helm(
            "install", release, str(package), "--values", str(_values_file(tmp_path, "1", first)),
            *where, "--create-namespace",
        )  # fmt: skip
        assert installed.returncode == 0, installed.stderr
        _check_released(api, first, release, namespace)

        with _released_reconciler(control_plane, namespace, name, tmp_path):
            bundle = wait_until(
                lambda: (
                    admission.read_mutating_webhook_configuration(name)
                    .webhooks[0]
                    .client_config.ca_bundle
                ),
                TIMEOUT,
                "the caBundle the reconciler patches",
            )
        secret = core_v1.read_namespaced_secret(f"{name}-webhook-tls", namespace).data
        assert secret

        second = {**first, "replicaCount": 3}
        upgraded = helm(
            "upgrade", release, str(package), "--values", str(_values_file(tmp_path, "2", second)),
            *where,
        )  # fmt: skip
        assert upgraded.returncode == 0, upgraded.stderr
        _check_released(api, second, release, namespace)
        configuration = admission.read_mutating_webhook_configuration(name)
        assert configuration.webhooks[0].client_config.ca_bundle == bundle
        assert core_v1.read_namespaced_secret(f"{name}-webhook-tls", namespace).data == secret
    finally:
        helm("uninstall", release, *where)  # the webhook configuration must not outlive the test
    with pytest.raises(ApiException) as gone:
        admission.read_mutating_webhook_configuration(name)
    assert gone.value.status == 404


def test_ct_install_installs_and_uninstalls_the_chart_with_its_ci_values(
    scheduling_control_plane: LocalControlPlane,
    scheduling_core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """chart-testing's `ct install`: a release per ci/*-values.yaml in a namespace of its own,
    `helm install --wait` (every pod Ready), `helm test`, uninstall, namespace deleted."""
    nodes = [f"{unique_name}-{i}" for i in range(2)]
    for name in nodes:
        linux = {"kubernetes.io/os": "linux"}
        create_node(scheduling_core_v1, SimNode(name=name, labels=linux, kwok=True))
    tools = [ensure_helm_built().parent, ensure_kubectl_built().parent, Path(sys.executable).parent]
    try:
        ran = subprocess.run(
            [
                str(ensure_chart_testing_built()),
                "install",
                "--charts",
                str(CHART),
                "--helm-extra-args",
                "--timeout 120s",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={
                "CT_CONFIG_DIR": str(paths.chart_testing_config()),
                "PATH": os.pathsep.join([*map(str, tools), "/usr/bin", "/bin"]),
                "HOME": str(tmp_path),
                "KUBECONFIG": str(scheduling_control_plane.kubeconfig_path),
            },
        )
    finally:
        for name in nodes:
            delete_node(scheduling_core_v1, name)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert "All charts installed successfully" in ran.stdout
