"""Role nodegate.nodegate.reconciler against the real local control plane (the e2e harness).

examples/ansible/reconciler.yml runs three times in one module fixture: the example rules
(over a stale rules ConfigMap someone else wrote), then the rules with one more label taint,
then invalid rules. The objects are compared with
what the one builder (nodegate.manifests.build.build_manifests) makes for the same inputs, and the
API server itself is asked what the reconciler's ServiceAccount may do. Once more on
`rulesSource: objects`: the rules are a NodeRules object (nodegate.manifests.build.rules_object),
applied once the CRD is Established, and there is no rules ConfigMap.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import PLURAL
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.manifests.build import build_manifests, rules_object
from nodegate.manifests.crd import GROUP, VERSION
from nodegate.manifests.settings import DeploySettings
from tests.ansible.playbooks import ROOT, PlaybookRun, inventory, run_playbook
from tests.unit.manifests.support import ON_CONFIGMAP

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

RULES = ROOT / "examples" / "rules.yaml"
RULES_OBJECT_TASK = "Apply the rules as a NodeRules object"
CRD_WAIT_TASK = "Wait for the NodeRules CRD to be Established"
EXTRA_RULE = """\
    - name: arm-only
      match: {labels: {kubernetes.io/arch: arm64}}
      taint: {key: example.com/arch, value: arm64, effect: NoSchedule}
      nodeMayLift: true
"""
Manifest = dict[str, Any]
ObjectKey = tuple[str, str, str | None]


@dataclass(frozen=True)
class DeployRuns:
    """The three runs, the inputs they were given, and what the cluster held after each."""

    settings: dict[str, Any]
    first: PlaybookRun
    changed_rules: str
    second: PlaybookRun
    after_second: dict[ObjectKey, Manifest]
    invalid_rules: Path
    invalid: PlaybookRun
    after_invalid: dict[ObjectKey, Manifest]


def _key(obj: Manifest) -> ObjectKey:
    return (obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))


def _built(rules_text: str, settings: dict[str, Any]) -> list[Manifest]:
    document = RulesDocument.parse(rules_text, "rules.yaml")
    return build_manifests(document, DeploySettings.model_validate(settings))


def _live(plane: LocalControlPlane, objects: list[Manifest]) -> dict[ObjectKey, Manifest]:
    """Each object as the API server holds it now ({} if it does not exist)."""
    dynamic = DynamicClient(plane.client)  # type: ignore[no-untyped-call]
    live: dict[ObjectKey, Manifest] = {}
    for obj in objects:
        api = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        try:
            found = api.get(name=meta["name"], namespace=meta.get("namespace"))
        except NotFoundError:
            live[_key(obj)] = {}
            continue
        live[_key(obj)] = found.to_dict()
    return live


def _written_by_someone_else(plane: LocalControlPlane, settings: dict[str, Any]) -> None:
    """The namespace and a stale rules ConfigMap, as a hand edit or `kubectl apply` leaves them
    (another field manager owns `data`)."""
    core = k8s_client.CoreV1Api(plane.client)
    namespace = settings["namespace"]
    core.create_namespace(k8s_client.V1Namespace(metadata=k8s_client.V1ObjectMeta(name=namespace)))
    core.create_namespaced_config_map(
        namespace,
        k8s_client.V1ConfigMap(
            metadata=k8s_client.V1ObjectMeta(name="nodegate-rules"),
            data={"rules.yaml": "# stale\n"},
        ),
    )


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, collections: Path, control_plane: LocalControlPlane
) -> DeployRuns:
    work = tmp_path_factory.mktemp("reconciler-role")
    suffix = uuid.uuid4().hex[:6]
    settings: dict[str, Any] = {
        "image": {"repository": "registry.example.com/nodegate"},
        "namespace": f"nodegate-ansible-{suffix}",
        "name": f"nodegate-ansible-{suffix}",  # ClusterRole names are cluster-wide
        **ON_CONFIGMAP,
    }
    hosts = inventory(work, {"ungrouped": {}})
    rules = work / "rules.yaml"

    def play(text: str) -> PlaybookRun:
        rules.write_text(text, encoding="utf-8")
        extra = {
            "nodegate_rules_file": str(rules),
            "nodegate_reconciler": settings,
            "nodegate_kubeconfig": str(control_plane.kubeconfig_path),
            "nodegate_reconciler_wait": False,  # no kubelet runs the pods here
        }
        return run_playbook(work, collections, "reconciler.yml", hosts, extra)

    _written_by_someone_else(control_plane, settings)
    example = RULES.read_text(encoding="utf-8")
    first = play(example)
    changed = example.replace("labelTaints:\n", "labelTaints:\n" + EXTRA_RULE, 1)
    second = play(changed)
    after_second = _live(control_plane, _built(changed, settings))
    invalid = play(changed.replace("effect: NoSchedule}", "effect: NoSchedul}", 1))
    return DeployRuns(
        settings,
        first,
        changed,
        second,
        after_second,
        rules,
        invalid,
        _live(control_plane, _built(changed, settings)),
    )


def test_the_first_run_takes_over_objects_another_manager_wrote(runs: DeployRuns) -> None:
    assert runs.first.returncode == 0, runs.first.text()


def test_the_objects_exist_as_the_builder_makes_them(runs: DeployRuns) -> None:
    assert runs.second.returncode == 0, runs.second.text()
    for obj in _built(runs.changed_rules, runs.settings):
        live = runs.after_second[_key(obj)]
        assert live, f"{_key(obj)} does not exist"
        for field in ("rules", "roleRef", "subjects", "data"):
            assert live.get(field) == obj.get(field), (_key(obj), field)


def test_the_service_account_gets_exactly_the_built_rbac(
    runs: DeployRuns, control_plane: LocalControlPlane
) -> None:
    """Asked of the API server's own authorizer (SubjectAccessReview)."""
    namespace, name = runs.settings["namespace"], runs.settings["name"]
    authz = k8s_client.AuthorizationV1Api(control_plane.client)

    def allowed(verb: str, resource: str, ns: str | None = None) -> bool:
        review = k8s_client.V1SubjectAccessReview(
            spec=k8s_client.V1SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{namespace}:{name}",
                resource_attributes=k8s_client.V1ResourceAttributes(
                    verb=verb, resource=resource, namespace=ns
                ),
            )
        )
        status = authz.create_subject_access_review(review).status
        assert status is not None
        return bool(status.allowed)

    assert allowed("patch", "nodes")
    assert allowed("watch", "nodes")
    assert not allowed("delete", "nodes")
    assert not allowed("list", "secrets", namespace)
    assert not allowed("get", "configmaps", "kube-system")


def test_a_rules_change_updates_the_configmap_and_leaves_the_deployment_alone(
    runs: DeployRuns,
) -> None:
    assert runs.second.changed >= 1
    [configmap] = [v for k, v in runs.after_second.items() if k[0] == "ConfigMap"]
    assert configmap.get("data", {}).get("rules.yaml") == runs.changed_rules
    [deployment] = [v for k, v in runs.after_second.items() if k[0] == "Deployment"]
    assert deployment["metadata"]["generation"] == 1  # no rollout for a rules edit


def test_the_deployed_pods_tolerate_the_rules_gates_as_the_builder_says(runs: DeployRuns) -> None:
    [deployment] = [v for k, v in runs.after_second.items() if k[0] == "Deployment"]
    [built] = [o for o in _built(runs.changed_rules, runs.settings) if o["kind"] == "Deployment"]
    live = deployment["spec"]["template"]["spec"]["tolerations"]

    assert live == built["spec"]["template"]["spec"]["tolerations"]
    assert live[0] == {  # the example rules' gate (manifests/tolerations.py)
        "key": "startup-taint.cluster-autoscaler.kubernetes.io/initializing",
        "operator": "Exists",
        "effect": "NoSchedule",
    }


def test_invalid_rules_fail_the_play_before_any_object_is_changed(runs: DeployRuns) -> None:
    assert runs.invalid.returncode != 0
    validate = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "validate", str(runs.invalid_rules)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = validate.stderr.splitlines()
    assert lines
    assert all(line in runs.invalid.text() for line in lines)
    before = {k: v.get("metadata", {}).get("resourceVersion") for k, v in runs.after_second.items()}
    after = {k: v.get("metadata", {}).get("resourceVersion") for k, v in runs.after_invalid.items()}
    assert after == before


def test_on_rules_configmap_no_noderules_object_is_applied(runs: DeployRuns) -> None:
    for task in (CRD_WAIT_TASK, RULES_OBJECT_TASK):
        result = runs.second.task(task)
        assert result is not None and result.get("skipped") is True, (task, result)


def test_on_rules_objects_the_rules_are_a_noderules_object_applied_after_the_crd(
    tmp_path: Path, collections: Path, control_plane: LocalControlPlane
) -> None:
    """The role on `rulesSource: objects`: the NodeRules object exists as rules_object makes it
    (the rules file's spec, the installation's labels), applied by the role's field manager
    once the CRD was Established; the installation has no rules ConfigMap and its reconciler
    reads the objects."""
    suffix = uuid.uuid4().hex[:6]
    settings: dict[str, Any] = {
        "image": {"repository": "registry.example.com/nodegate"},
        "namespace": f"nodegate-ansible-objects-{suffix}",
        "name": f"nodegate-ansible-objects-{suffix}",
        "rulesSource": "objects",
    }
    name = f"rules-{suffix}"  # NodeRules objects are cluster-wide: every reconciler reads them
    example = RULES.read_text(encoding="utf-8")
    text = example.replace("metadata:\n  name: example\n", f"metadata:\n  name: {name}\n", 1)
    assert text != example
    rules = tmp_path / "rules.yaml"
    rules.write_text(text, encoding="utf-8")
    extra = {
        "nodegate_rules_file": str(rules),
        "nodegate_reconciler": settings,
        "nodegate_kubeconfig": str(control_plane.kubeconfig_path),
        "nodegate_reconciler_wait": False,  # no kubelet runs the pods here
    }
    custom = k8s_client.CustomObjectsApi(control_plane.client)
    try:
        run = run_playbook(
            tmp_path, collections, "reconciler.yml", inventory(tmp_path, {"ungrouped": {}}), extra
        )

        assert run.returncode == 0, run.text()
        found: Manifest = custom.get_cluster_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, PLURAL, name
        )
        deploy = DeploySettings.model_validate(settings)
        expected = rules_object(RulesDocument.parse(text, "rules.yaml"), deploy)
        assert found["spec"] == expected["spec"]
        assert found["metadata"]["labels"] == expected["metadata"]["labels"]
        managers = {field["manager"] for field in found["metadata"]["managedFields"]}
        assert managers == {"nodegate-ansible"}
        waited = run.task(CRD_WAIT_TASK)
        assert waited is not None and not waited.get("skipped"), waited
        [crd] = waited["resources"]
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        installation = _built(text, settings)
        live = _live(control_plane, installation)
        assert [key for key, obj in live.items() if not obj] == []
        assert not [key for key in live if key[0] == "ConfigMap"]
        core = k8s_client.CoreV1Api(control_plane.client)
        configmaps = core.list_namespaced_config_map(settings["namespace"]).items
        assert deploy.rules_config_map not in [c.metadata.name for c in configmaps if c.metadata]
        [deployment] = [v for k, v in live.items() if k[0] == "Deployment"]
        assert "--rules-objects" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    finally:  # another test's reconciler on this control plane would merge it into its rules
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as err:
            if err.status != 404:
                raise


def test_settings_that_withhold_what_the_rules_read_fail_the_play_naming_the_variable(
    tmp_path: Path, collections: Path, control_plane: LocalControlPlane
) -> None:
    suffix = uuid.uuid4().hex[:6]
    settings: dict[str, Any] = {
        "image": {"repository": "registry.example.com/nodegate"},
        "namespace": f"nodegate-ansible-withheld-{suffix}",
        "name": f"nodegate-ansible-withheld-{suffix}",
        "access": {"pods": False},  # the example's gate waits for init pods
    }
    extra = {
        "nodegate_rules_file": str(RULES),
        "nodegate_reconciler": settings,
        "nodegate_kubeconfig": str(control_plane.kubeconfig_path),
        "nodegate_reconciler_wait": False,
    }

    run = run_playbook(
        tmp_path, collections, "reconciler.yml", inventory(tmp_path, {"ungrouped": {}}), extra
    )

    assert run.returncode != 0
    assert "nodegate_reconciler: access.pods is false, but the rules read it" in run.text()
    assert "Traceback" not in run.text()
    namespaces = k8s_client.CoreV1Api(control_plane.client).list_namespace().items
    assert settings["namespace"] not in [n.metadata.name for n in namespaces if n.metadata]
