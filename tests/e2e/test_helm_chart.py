"""The chart, packaged as `make chart` packages it, installed with the real helm (v3 and v4, built
from their Go modules, `make helm`) on a real kube-apiserver, with the reconciler running as the
release deployed it.

There is no kubelet to run the released Deployment's pods here, so its container runs as a
local process, as tests/e2e/test_deploy_manifests.py runs the builder's: the args of the live
Deployment helm wrote, the downward-API environment, and a token of the ServiceAccount helm
created (kube-apiserver enforces the release's RBAC).

* helm 3: install into the release namespace (`-n`, `--create-namespace`, no `namespace` value:
  every object lands there), the reconciler taints a labelled node and keeps its persisted label,
  upgrade with a rules change (picked up live from the ConfigMap: the Deployment's pods are not
  rolled, as docs/reconciler.md says), rollback, uninstall: every object of the release is gone;
  what the reconciler wrote at run time (its taint record, the persisted-label record, the
  node's taints) is kept, as NOTES.txt says.
* helm 4 (server-side apply by default): install with the webhook (and an explicit `namespace`
  value other than the release's, which the chart makes), the reconciler fills the webhook's
  Secret and patches its caBundle (fields the chart does not render), and an upgrade neither
  conflicts with them nor resets them; uninstall deletes the namespace.
"""

from __future__ import annotations

import json
import subprocess
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

from nodegate.core.decisions.persisted_labels import RECORD_LABEL
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.core.rules.loader import RulesDocument
from nodegate.localcluster.build import ensure_helm_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.localcluster.versions import HELM4_VERSION, HELM_VERSION
from nodegate.manifests.build import build_manifests
from nodegate.manifests.chart.values import default_values, release_settings, rules_text
from tests.e2e.support.reconciler_fixtures import TIMEOUT, wait_for_taints
from tests.e2e.support.reconciler_process import ReconcilerProcess, free_port, running_reconciler
from tests.e2e.support.shipped_manifests import service_account_kubeconfig, service_account_token
from tests.unit.manifests.support import REPO, REPOSITORY, example_document

CHART = REPO / "charts" / "nodegate"
Helm = Callable[..., subprocess.CompletedProcess[str]]

UPGRADE_RULE = """\
  - name: added-by-the-upgrade
    match: {labels: {example.com/upgraded: "yes"}}
    taint: {key: example.com/upgraded, value: "yes", effect: NoSchedule}
    nodeMayLift: true
"""


def _helm(plane: LocalControlPlane, home: Path, version: str) -> Helm:
    binary = ensure_helm_built(version=version)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "KUBECONFIG": str(plane.kubeconfig_path)}
        return subprocess.run(
            [str(binary), *args],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env=env,
        )

    return run


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart packaged once, as `make chart` packages it."""
    home = tmp_path_factory.mktemp("helm-package")
    out = tmp_path_factory.mktemp("charts")
    packaged = subprocess.run(
        [str(ensure_helm_built()), "package", str(CHART), "--destination", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    assert packaged.returncode == 0, packaged.stderr
    (found,) = out.glob("nodegate-*.tgz")
    return found


def _values(tmp_path: Path, label: str, **overrides: Any) -> tuple[dict[str, Any], Path]:
    values = {**default_values(), "rules": example_document().text, **overrides}
    values["image"] = {**values["image"], "repository": REPOSITORY}
    path = tmp_path / f"{label}.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return values, path


def _check_released(api: k8s_client.ApiClient, values: dict[str, Any], release: str) -> None:
    """The live objects carry what the builder builds for these values, released in namespace
    `release`."""
    settings = release_settings(values, release)
    built = build_manifests(RulesDocument.parse(rules_text(values), "rules"), settings)
    namespace = settings.namespace
    deployment = next(o for o in built if o["kind"] == "Deployment")
    live = k8s_client.AppsV1Api(api).read_namespaced_deployment(settings.name, namespace).spec
    assert live is not None and live.template.spec is not None
    assert live.replicas == deployment["spec"]["replicas"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert live.template.spec.containers[0].args == container["args"]
    assert live.template.spec.containers[0].image == container["image"]
    rules = k8s_client.CoreV1Api(api).read_namespaced_config_map(
        values["rulesConfigMap"], namespace
    )
    assert rules.data == next(o for o in built if o["kind"] == "ConfigMap")["data"]


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


@pytest.fixture
def namespace(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[str]:
    """The release namespace, which helm makes (`--create-namespace`) and keeps after uninstall,
    so what the reconciler keeps in it can be seen; deleted after the test."""
    name = unique_name[:40].rstrip("-")
    yield name
    try:
        core_v1.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


def test_helm3_release_reconciles_upgrades_live_rolls_back_and_uninstalls(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Any,
    package: Path,
    namespace: str,
    tmp_path: Path,
) -> None:
    api = control_plane.client
    helm = _helm(control_plane, tmp_path / "home", HELM_VERSION)
    release = namespace
    common = {"name": release}  # no namespace value: the release namespace
    first, first_file = _values(tmp_path, "first", **common)
    assert first["namespace"] == ""
    on = ["--namespace", namespace]

    made = "--create-namespace"  # with the chart's default createNamespace: no conflict
    installed = helm("install", release, str(package), "--values", str(first_file), *on, made)
    assert installed.returncode == 0, installed.stderr
    assert f"kubectl -n {namespace} get deploy" in installed.stdout  # NOTES.txt
    assert "keeps, on purpose" in installed.stdout
    released = _release_objects(helm, release, namespace)
    assert "Namespace" not in {o["kind"] for o in released}  # helm's, not the release's
    elsewhere = [o for o in released if o["metadata"].get("namespace", namespace) != namespace]
    assert not elsewhere, f"objects outside the release namespace: {elsewhere}"
    missing = [f"{o['kind']}/{o['metadata']['name']}" for o in released if _gone(api, o)]
    assert not missing, f"not created: {missing}"
    _check_released(api, first, namespace)
    generation: Any = k8s_client.AppsV1Api(api).read_namespaced_deployment(release, namespace)

    labels = {"example.com/dedicated": "ci", "example.com/upgraded": "yes"}
    node = make_node(labels={**labels, "example.com/rack": "r7"}, provider_id=f"test://{release}")
    with _released_reconciler(control_plane, namespace, release, tmp_path) as process:
        wait_for_taints(core_v1, node, lambda t: ("example.com/dedicated", "NoSchedule") in t)

        second, second_file = _values(tmp_path, "second", **common, rules=_add_rule(first))
        upgraded = helm("upgrade", release, str(package), "--values", str(second_file), *on)
        assert upgraded.returncode == 0, upgraded.stderr
        _check_released(api, second, namespace)
        # Picked up live from the ConfigMap, by the same process: no pod was rolled.
        wait_for_taints(core_v1, node, lambda t: ("example.com/upgraded", "NoSchedule") in t)
        after: Any = k8s_client.AppsV1Api(api).read_namespaced_deployment(release, namespace)
        assert after.metadata.generation == generation.metadata.generation
        assert process.metric("nodegate_errors_total") == 0
        assert "Forbidden" not in process.logs()

        rolled = helm("rollback", release, "1", *on)
        assert rolled.returncode == 0, rolled.stderr
        _check_released(api, first, namespace)
        wait_until(
            lambda: (
                core_v1.list_namespaced_config_map(namespace, label_selector=RECORD_LABEL).items
            ),
            TIMEOUT,
            "the persisted-label record",
        )

    objects = _release_objects(helm, release, namespace)
    uninstalled = helm("uninstall", release, *on)
    assert uninstalled.returncode == 0, uninstalled.stderr
    left = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if not _gone(api, o)]
    assert not left, f"uninstall left {left}"
    listed = helm("list", "--all", "--short", *on)
    assert release not in listed.stdout.split()
    # Kept on purpose: what the reconciler wrote, which helm never owned.
    core_v1.read_namespaced_config_map(HISTORY_CONFIGMAP, namespace)
    records = core_v1.list_namespaced_config_map(namespace, label_selector=RECORD_LABEL)
    assert records.items
    assert ("example.com/dedicated", "NoSchedule") in _taints(core_v1, node)


def _add_rule(values: dict[str, Any]) -> str:
    """The rules with one more label taint rule (a gate-neutral edit the chart accepts)."""
    data = yaml.safe_load(values["rules"])
    data["spec"]["labelTaints"].append(yaml.safe_load(UPGRADE_RULE)[0])
    return str(yaml.safe_dump(data, sort_keys=False))


def _taints(core_v1: k8s_client.CoreV1Api, name: str) -> set[tuple[str, str]]:
    node: Any = core_v1.read_node(name)
    taints = node.spec.taints or []
    return {(t.key, t.effect) for t in taints}


def test_helm4_server_side_apply_leaves_the_reconcilers_own_fields_alone(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    package: Path,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """The webhook's Secret data and the configuration's caBundle are the reconciler's: the
    chart renders neither, so helm 4's server-side apply neither conflicts with nor resets them
    on upgrade. The objects go to an explicit `namespace` value other than the release's, which
    the chart makes (createNamespace, the default), and uninstall deletes it."""
    api = control_plane.client
    helm = _helm(control_plane, tmp_path / "home", HELM4_VERSION)
    namespace = release = unique_name[:40].rstrip("-")
    common: dict[str, Any] = {
        "namespace": namespace,
        "name": release,
        "webhook": {**default_values()["webhook"], "enabled": True, "port": free_port()},
        "networkPolicy": {"enabled": True, "apiServerPorts": [443, 6443]},
        "image": {"pullSecrets": ["regcred"], "digest": "sha256:" + "c" * 64},
    }
    first, first_file = _values(tmp_path, "first", **common)
    first["image"] = {**default_values()["image"], **common["image"], "repository": REPOSITORY}
    first_file.write_text(json.dumps(first), encoding="utf-8")
    on = ["--namespace", "default"]  # the release record; the objects go to `namespace`
    admission: Any = k8s_client.AdmissionregistrationV1Api(api)
    try:
        installed = helm("install", release, str(package), "--values", str(first_file), *on)
        assert installed.returncode == 0, installed.stderr
        _check_released(api, first, "default")

        with _released_reconciler(control_plane, namespace, release, tmp_path):
            bundle = wait_until(
                lambda: (
                    admission.read_mutating_webhook_configuration(release)
                    .webhooks[0]
                    .client_config.ca_bundle
                ),
                TIMEOUT,
                "the caBundle the reconciler patches",
            )
        secret = core_v1.read_namespaced_secret(f"{release}-webhook-tls", namespace).data
        assert secret

        second = {**first, "replicas": 3}
        second_file = tmp_path / "second.json"
        second_file.write_text(json.dumps(second), encoding="utf-8")
        upgraded = helm("upgrade", release, str(package), "--values", str(second_file), *on)
        assert upgraded.returncode == 0, upgraded.stderr
        _check_released(api, second, "default")
        configuration = admission.read_mutating_webhook_configuration(release)
        assert configuration.webhooks[0].client_config.ca_bundle == bundle
        assert core_v1.read_namespaced_secret(f"{release}-webhook-tls", namespace).data == secret
    finally:
        helm("uninstall", release, *on)  # the webhook configuration must not outlive the test
    with pytest.raises(ApiException) as gone:
        admission.read_mutating_webhook_configuration(release)
    assert gone.value.status == 404
    try:  # deleted; Terminating for ever here, where no namespace controller empties it
        left: Any = core_v1.read_namespace(namespace)
        assert left.metadata.deletion_timestamp is not None
    except ApiException as error:
        assert error.status == 404
