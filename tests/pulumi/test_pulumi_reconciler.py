"""The Reconciler component in each example stack: the builder's objects, declared as they are."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from nodegate.core.rules.loader import RulesDocument
from nodegate.infra.cloud_inputs import PATCH_FORCE
from nodegate.manifests.build import build_manifests, rules_object
from nodegate.manifests.settings import DeploySettings
from tests.pulumi.harness import (
    REPO,
    Declared,
    ProgramRun,
    example_rules_data,
    run_program,
    stack_file_config,
    write_rules,
)

COMPONENT = "nodegate:index:Reconciler"
PROVIDER = "pulumi:providers:kubernetes"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
STACKS = ["oke-example", "aks-example"]


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _config(stack: str) -> dict[str, Any]:
    return stack_file_config(stack)


def _kubernetes(run: ProgramRun) -> list[Declared]:
    return [r for r in run.resources if r.typ.startswith("kubernetes:")]


def _one(run: ProgramRun, kind: str, name: str | None = None) -> Declared:
    found = [
        r
        for r in _kubernetes(run)
        if r.inputs["kind"] == kind and name in (None, r.inputs["metadata"]["name"])
    ]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def _expected(stack: str) -> list[dict[str, Any]]:
    """What the one builder makes for the stack's rules and `nodegate:reconciler`, each object
    annotated as owned by the stack (`pulumi.com/patchForce`)."""
    config = _config(stack)
    section = {k: v for k, v in config["nodegate:reconciler"].items() if k != "kubeconfig"}
    text = (REPO / config["nodegate:rules"]).read_text(encoding="utf-8")
    document = RulesDocument.parse(text, "rules")
    settings = DeploySettings.model_validate(section)
    objects = build_manifests(document, settings)
    if settings.rules_source == "objects":
        objects.append(rules_object(document, settings))
    for obj in objects:
        obj["metadata"].setdefault("annotations", {})[PATCH_FORCE] = "true"
    return objects


def test_declares_exactly_the_builders_objects_with_their_inputs(stack: str) -> None:
    run = run_program(_config(stack), stack=stack)

    assert run.error is None
    declared = {
        (r.inputs["kind"], r.inputs["metadata"]["name"]): r.inputs for r in _kubernetes(run)
    }
    expected = {(o["kind"], o["metadata"]["name"]): o for o in _expected(stack)}
    assert declared.keys() == expected.keys()
    for key, inputs in declared.items():
        assert inputs == expected[key], key  # Pulumi's numbers are floats: 2.0 == 2


def test_every_object_takes_back_what_a_hand_edit_changed(stack: str) -> None:
    """`kubectl scale` of the Deployment made the next `pulumi preview` fail on a server-side
    apply conflict (the real engine, tests/e2e/test_pulumi_stack.py): every object is applied
    with force, and the builder's own annotations stay."""
    run = run_program(_config(stack), stack=stack)

    assert run.error is None
    expected = {(o["kind"], o["metadata"]["name"]): o for o in _expected(stack)}
    for r in _kubernetes(run):
        annotations = r.inputs["metadata"]["annotations"]
        assert annotations[PATCH_FORCE] == "true", r.name
        key = (r.inputs["kind"], r.inputs["metadata"]["name"])
        assert annotations == expected[key]["metadata"]["annotations"], key


def test_every_object_is_a_child_of_the_component(stack: str) -> None:
    run = run_program(_config(stack), stack=stack)

    assert len(run.of_type(COMPONENT)) == 1
    children = [u for u in run.urns if u.rsplit("::", 1)[-1].startswith("reconciler-")]
    assert len(children) == len(_kubernetes(run)) + 1  # and the provider
    assert all(f"::{COMPONENT}$" in u for u in children)


def test_rbac_has_no_secrets_and_no_wildcards(stack: str) -> None:
    run = run_program(_config(stack), stack=stack)

    rules = [*_one(run, "ClusterRole").inputs["rules"], *_one(run, "Role").inputs["rules"]]
    for rule in rules:
        assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]], rule
        assert "secrets" not in rule["resources"], rule


def test_the_fence_policy_is_declared_and_bound_to_the_reconcilers_lease(stack: str) -> None:
    run = run_program(_config(stack), stack=stack)

    policy = _one(run, "ValidatingAdmissionPolicy").inputs
    binding = _one(run, "ValidatingAdmissionPolicyBinding").inputs
    assert policy["spec"]["paramKind"] == {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["paramRef"]["name"] == "nodegate-reconciler"
    assert binding["spec"]["validationActions"] == ["Deny"]
    args = _one(run, "Deployment").inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--fence-policy={policy['metadata']['name']}" in args


def test_on_the_rules_configmap_it_carries_exactly_the_stacks_rules_file(stack: str) -> None:
    config = _config(stack)
    config["nodegate:reconciler"]["rulesSource"] = "configmap"

    run = run_program(config, stack=stack)

    data = _one(run, "ConfigMap", "nodegate-rules").inputs["data"]
    assert data == {"rules.yaml": (REPO / "examples" / "rules.yaml").read_text(encoding="utf-8")}


def test_deployment_runs_non_root_read_only_with_the_configured_image(stack: str) -> None:
    run = run_program(_config(stack), stack=stack)

    pod = _one(run, "Deployment").inputs["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    repository = _config(stack)["nodegate:reconciler"]["image"]["repository"]
    assert container["image"].startswith(f"{repository}:")


def test_provider_targets_the_configured_cluster_and_updates_configmaps_in_place(
    stack: str,
) -> None:
    run = run_program(_config(stack), stack=stack)

    [provider] = run.of_type(PROVIDER)
    assert provider.inputs["enableConfigMapMutable"] == "true"
    expected = Path(_config(stack)["nodegate:reconciler"]["kubeconfig"]).expanduser()
    assert provider.inputs["kubeconfig"] == str(expected)


def test_relative_kubeconfig_is_resolved_against_the_project(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    oke_example["nodegate:reconciler"]["kubeconfig"] = "kube/config"

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    [provider] = run.of_type(PROVIDER)
    assert provider.inputs["kubeconfig"] == str(project / "kube" / "config")


@pytest.mark.parametrize(
    ("source", "holder"),
    [
        ("objects", "reconciler-noderules-example"),
        ("configmap", "reconciler-configmap-nodegate-rules"),
    ],
)
def test_rules_edit_changes_only_what_holds_the_rules(
    oke_example: dict[str, Any], project: Path, source: str, holder: str
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    oke_example["nodegate:reconciler"]["rulesSource"] = source
    before = run_program(oke_example, stack="oke-example", project_dir=project)
    data = example_rules_data()
    data["spec"]["conditionTaints"][0]["for"] = "45s"
    write_rules(project, data)

    after = run_program(oke_example, stack="oke-example", project_dir=project)

    assert before.error is None
    assert after.error is None
    old = {r.name: r.canonical() for r in before.resources}
    new = {r.name: r.canonical() for r in after.resources}
    assert old.keys() == new.keys()
    changed = {name for name in old if old[name] != new[name]}
    assert changed == {holder}
    assert _one(before, "Deployment").canonical() == _one(after, "Deployment").canonical()


def test_on_the_rules_configmap_rules_that_drop_init_pod_gates_drop_pod_access(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    oke_example["nodegate:reconciler"]["rulesSource"] = "configmap"
    data = example_rules_data()
    del data["spec"]["startupGates"][0]["readyWhen"]["pods"]
    write_rules(project, data)

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    resources = [r["resources"][0] for r in _one(run, "ClusterRole").inputs["rules"]]
    assert "pods" not in resources
    assert resources[:2] == ["nodes", "events"]


def test_the_deployment_tolerates_a_noexecute_gate_of_the_stacks_rules(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "rules.yaml"
    data = example_rules_data()
    gate = data["spec"]["startupGates"][0]["taint"]
    gate["effect"] = "NoExecute"
    write_rules(project, data)

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert run.error is None
    tolerations = _one(run, "Deployment").inputs["spec"]["template"]["spec"]["tolerations"]
    assert tolerations[0] == {"key": gate["key"], "operator": "Exists", "effect": "NoExecute"}
    # Any other NoExecute taint (a dead node's) for a while only.
    blanket = [t for t in tolerations if t["effect"] == "NoExecute" and "key" not in t]
    assert [t.get("tolerationSeconds") for t in blanket] == [300]


def test_dashboard_and_alerts_are_declared_when_asked(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:reconciler"]["grafanaDashboard"] = {}
    oke_example["nodegate:reconciler"]["prometheusRule"] = {"labels": {"release": "kps"}}

    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    [rule] = run.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert rule.inputs["spec"]["groups"][0]["rules"]
    assert _one(run, "ConfigMap", "nodegate-reconciler-dashboard").inputs["data"]


def test_monitors_and_network_policy_are_declared_when_asked(oke_example: dict[str, Any]) -> None:
    oke_example["nodegate:reconciler"]["serviceMonitor"] = {"labels": {"release": "kps"}}
    oke_example["nodegate:reconciler"]["podMonitor"] = {}
    oke_example["nodegate:reconciler"]["networkPolicy"] = {"apiServerPorts": [443]}

    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    [service_monitor] = run.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    assert service_monitor.inputs["metadata"]["labels"]["release"] == "kps"
    assert run.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
    [policy] = run.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert policy.inputs["spec"]["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"}]}]


def test_on_rules_objects_the_rules_are_a_noderules_object_applied_after_the_crd(
    oke_example: dict[str, Any], example_rules_text: str
) -> None:
    """rulesSource objects (the default): the rules file as the NodeRules object (its spec as
    written, the installation's labels), on the CRD, and no rules ConfigMap; the Deployment,
    told to read the objects, does not wait for it."""

    run = run_program(oke_example, stack="oke-example")

    assert run.error is None
    rules = _one(run, "NodeRules")
    assert rules.typ == "kubernetes:nodegate.dev/v1:NodeRules"
    assert rules.inputs["spec"] == example_rules_data()["spec"]
    section = {k: v for k, v in oke_example["nodegate:reconciler"].items() if k != "kubeconfig"}
    settings = DeploySettings.model_validate(section)
    expected = rules_object(RulesDocument.parse(example_rules_text, "rules"), settings)
    expected["metadata"]["annotations"] = {PATCH_FORCE: "true"}
    assert rules.inputs == expected
    urns = {u.rsplit("::", 1)[-1]: u for u in run.urns}
    crd = _one(run, "CustomResourceDefinition", "noderules.nodegate.dev")
    assert urns[crd.name] in run.dependencies[rules.name]
    deployment = _one(run, "Deployment")
    assert urns[rules.name] not in run.dependencies[deployment.name]
    assert (
        "--rules-objects" in deployment.inputs["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    configmaps = [r.inputs["metadata"]["name"] for r in run.of_type(CONFIGMAP)]
    assert settings.rules_config_map not in configmaps
    digest = hashlib.sha256(example_rules_text.encode("utf-8")).hexdigest()
    assert run.outputs["reconciler"]["rulesSha256"] == digest
