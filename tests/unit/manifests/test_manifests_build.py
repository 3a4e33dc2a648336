"""The one manifest builder: which objects it makes, and the properties each must have."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP
from nodegate.core.objects.sightings_record import SIGHTINGS_CONFIGMAP
from nodegate.core.objects.status_record import STATUS_CONFIGMAP
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.core.rules.loader import RulesDocument
from nodegate.manifests.build import build_manifests, rules_object
from nodegate.manifests.rbac import cluster_rules
from nodegate.manifests.settings import DeploySettings, SettingsError
from tests.unit.manifests.support import (
    EXAMPLE_RULES,
    NO_POD_GATES,
    ON_CONFIGMAP,
    build,
    every_option,
    example_document,
    one,
    settings,
)

RBAC_KINDS = ("ClusterRole", "Role")


def _policy_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for o in objects if o["kind"] in RBAC_KINDS for rule in o["rules"]]


def test_objects_come_crd_and_namespace_first_in_apply_order() -> None:
    kinds = [o["kind"] for o in build()]

    assert kinds == [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]


def test_every_namespaced_object_lives_in_the_reconcilers_namespace() -> None:
    objects = build(namespace="ops")
    cluster_scoped = {
        "CustomResourceDefinition",
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }

    assert one(objects, "Namespace")["metadata"]["name"] == "ops"
    for obj in objects:
        assert obj["metadata"].get("namespace") == (
            None if obj["kind"] in cluster_scoped else "ops"
        ), obj["kind"]


def test_rbac_grants_no_secrets_no_wildcards_and_no_delete_but_of_label_records() -> None:
    objects = build_manifests(example_document(), every_option())
    rules = _policy_rules(objects)
    record_rule = {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["list", "watch", "update", "patch", "delete"],
    }

    assert rules
    assert record_rule in one(objects, "Role")["rules"]  # the example persists labels
    for rule in rules:
        values = [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
        assert "*" not in values, rule
        assert "secrets" not in rule["resources"], rule
        forbidden = {"deletecollection", "escalate", "bind", "impersonate"}
        if rule != record_rule:
            forbidden.add("delete")
        assert not forbidden & set(rule["verbs"]), rule


def test_without_persistent_labels_nothing_may_be_deleted() -> None:
    document = example_document()
    without = RulesDocument(
        document.text, document.rules.model_copy(update={"persistent_labels": None})
    )
    for rule in _policy_rules(build_manifests(without, every_option(**ON_CONFIGMAP))):
        assert "delete" not in rule["verbs"], rule


def test_cluster_role_is_exactly_nodes_events_gate_pods_and_the_fence_policy() -> None:
    role = one(build(**ON_CONFIGMAP), "ClusterRole")

    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        *(
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": [resource],
                "verbs": ["get"],
                "resourceNames": ["nodegate-reconciler-fence"],
            }
            for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
        ),
    ]


def test_pods_are_granted_only_when_a_gate_waits_for_init_pods() -> None:
    without = RulesDocument.parse(NO_POD_GATES, "no-pod-gates.yaml")

    granted = [r["resources"][0] for r in cluster_rules(without.rules, settings(**ON_CONFIGMAP))]

    assert example_document().rules.startup_gates[0].ready_when.pods is not None
    assert granted == ["nodes", "events"]


def test_role_limits_configmaps_and_lease_to_the_reconcilers_own_by_name() -> None:
    role = one(
        build(rulesConfigMap="my-rules", leaderElection={"leaseName": "my-lease"}, **ON_CONFIGMAP),
        "Role",
    )

    by_name = {
        (r["resources"][0], tuple(r["verbs"])): r.get("resourceNames") for r in role["rules"]
    }
    assert by_name == {
        # the example rules persist labels: records are listed by label, GC'd by delete (after
        # a mark with the leader's term: core/decisions/fencing.py)
        ("configmaps", ("list", "watch", "update", "patch", "delete")): None,
        ("configmaps", ("get", "list", "watch")): ["my-rules"],
        ("configmaps", ("create",)): None,  # RBAC cannot restrict create by name
        ("configmaps", ("get", "update", "patch")): [
            HISTORY_CONFIGMAP,
            STATUS_CONFIGMAP,
            LEDGER_CONFIGMAP,
            SIGHTINGS_CONFIGMAP,
        ],
        ("leases", ("create",)): None,
        ("leases", ("get", "update")): ["my-lease"],
        ("events", ("create", "patch")): None,
    }


def test_history_configmap_name_is_the_one_the_reconciler_writes() -> None:
    # The reconciler's taint record lands with the lead's reconciler work (issue 9).
    history = pytest.importorskip("nodegate.reconciler.nodes.records.taint_history")

    assert history.HISTORY_CONFIGMAP == HISTORY_CONFIGMAP


def test_bindings_bind_the_service_account_to_its_roles() -> None:
    objects = build(name="ng")
    subject = {"kind": "ServiceAccount", "name": "ng", "namespace": "nodegate-system"}

    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        obj = one(objects, binding)
        assert obj["subjects"] == [subject]
        assert obj["roleRef"]["kind"] == role
        assert obj["roleRef"]["name"] == one(objects, role)["metadata"]["name"] == "ng"
    assert one(objects, "ServiceAccount")["metadata"]["name"] == "ng"


def test_rules_configmap_carries_exactly_the_validated_rules_text() -> None:
    text = EXAMPLE_RULES.read_text(encoding="utf-8")

    configmap = one(build(**ON_CONFIGMAP), "ConfigMap", "nodegate-rules")

    assert configmap["data"] == {"rules.yaml": text}


def test_deployment_depends_on_the_rules_only_through_the_gates_it_tolerates() -> None:
    same_gate = EXAMPLE_RULES.read_text(encoding="utf-8").replace("timeout: 10m", "timeout: 5m")
    other_gate = RulesDocument.parse(NO_POD_GATES, "other.yaml")

    assert one(build(RulesDocument.parse(same_gate, "r.yaml")), "Deployment") == one(
        build(), "Deployment"
    )
    changed = one(build(other_gate), "Deployment")
    changed["spec"]["template"]["spec"].pop("tolerations")
    example = one(build(), "Deployment")
    example["spec"]["template"]["spec"].pop("tolerations")
    assert changed == example


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_deployment_runs_two_replicas_under_its_service_account() -> None:
    deployment = one(build(), "Deployment")

    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "nodegate-reconciler"
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"


def test_container_is_non_root_read_only_without_capabilities() -> None:
    pod = _pod(build())
    container = pod["containers"][0]

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_probes_hit_healthz_and_readyz_on_the_http_port() -> None:
    container = _pod(build(httpPort=9090))["containers"][0]

    assert container["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert "--http-port=9090" in container["args"]


def test_pod_name_and_namespace_come_from_the_downward_api() -> None:
    env = _pod(build())["containers"][0]["env"]

    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in env} == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
    }


def test_replicas_spread_over_nodes_and_zones_without_becoming_unschedulable() -> None:
    spread = _pod(build())["topologySpreadConstraints"]

    assert [c["topologyKey"] for c in spread] == [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    ]
    assert {c["whenUnsatisfiable"] for c in spread} == {"ScheduleAnyway"}


def test_budget_and_service_select_the_deployments_pods() -> None:
    objects = build()
    pods = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]

    for selector in (
        one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        one(objects, "Service")["spec"]["selector"],
        one(objects, "Deployment")["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= pods.items()


def test_metrics_service_can_be_left_out() -> None:
    kinds = [o["kind"] for o in build(metrics={"service": False})]

    assert "Service" not in kinds


def test_dashboard_and_alerts_are_optional_objects() -> None:
    objects = build_manifests(example_document(), every_option())

    dashboard = one(objects, "ConfigMap", "nodegate-reconciler-dashboard")
    rule = one(objects, "PrometheusRule")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert {o["kind"] for o in build()} & {"PrometheusRule"} == set()


def test_pull_secrets_reach_the_service_account() -> None:
    account = one(build_manifests(example_document(), every_option()), "ServiceAccount")

    assert account["imagePullSecrets"] == [{"name": "regcred"}]


def test_priority_class_can_be_cleared() -> None:
    assert "priorityClassName" not in _pod(build(priorityClassName=None))


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        pytest.param({}, "registry.example.com/nodegate:{version}", id="package-version"),
        pytest.param({"tag": "dev"}, "registry.example.com/nodegate:dev", id="tag"),
        pytest.param(
            {"digest": "sha256:" + "a" * 64},
            "registry.example.com/nodegate@sha256:" + "a" * 64,
            id="digest",
        ),
        pytest.param(
            {"tag": "1.0", "digest": "sha256:" + "b" * 64},
            "registry.example.com/nodegate:1.0@sha256:" + "b" * 64,
            id="tag-and-digest",
        ),
    ],
)
def test_image_reference_defaults_to_the_package_version(
    image: dict[str, str], reference: str
) -> None:
    from importlib.metadata import version

    chosen = settings(image={"repository": "registry.example.com/nodegate", **image})

    assert _pod(build_manifests(example_document(), chosen))["containers"][0]["image"] == (
        reference.format(version=version("nodegate"))
    )


@pytest.mark.parametrize(
    "name", [HISTORY_CONFIGMAP, STATUS_CONFIGMAP, LEDGER_CONFIGMAP, SIGHTINGS_CONFIGMAP]
)
def test_the_rules_configmap_may_not_take_a_name_the_reconciler_writes(name: str) -> None:
    with pytest.raises(ValueError, match=f"'{name}' is the name of the reconciler's own"):
        build(rulesConfigMap=name)


def test_every_object_name_fits_its_kind_at_the_longest_installation_name() -> None:
    longest = "n" * 55
    objects = build(name=longest, webhook={}, grafanaDashboard={}, prometheusRule={})

    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert len(services) == 2
    assert all(len(name) <= 63 for name in services)
    with pytest.raises(ValueError, match="at most 55 characters"):
        settings(name="n" * 56)


def test_monitors_select_the_metrics_service_and_the_pods() -> None:
    objects = build(serviceMonitor={"labels": {"release": "kps"}}, podMonitor={"interval": "1m"})

    service_monitor = one(objects, "ServiceMonitor")
    pod_monitor = one(objects, "PodMonitor")
    metrics = one(objects, "Service", "nodegate-reconciler-metrics")
    assert service_monitor["metadata"]["labels"]["release"] == "kps"
    assert service_monitor["spec"]["endpoints"][0]["port"] == metrics["spec"]["ports"][0]["name"]
    assert service_monitor["spec"]["selector"]["matchLabels"].items() <= (
        metrics["metadata"]["labels"].items()
    )
    assert pod_monitor["spec"]["podMetricsEndpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "1m"}
    ]
    assert not {"ServiceMonitor", "PodMonitor"} & {o["kind"] for o in build()}


def test_a_service_monitor_without_the_metrics_service_is_refused() -> None:
    with pytest.raises(ValueError, match="serviceMonitor selects the metrics Service"):
        settings(serviceMonitor={}, metrics={"service": False})


def test_network_policy_admits_the_named_ports_and_reaches_only_the_api_server() -> None:
    objects = build(networkPolicy={"apiServerPorts": [443]}, webhook={})

    policy = one(objects, "NetworkPolicy")
    container = _pod(objects)["containers"][0]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert (
        policy["spec"]["podSelector"]["matchLabels"]
        == (one(objects, "Deployment")["spec"]["selector"]["matchLabels"])
    )
    admitted = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert admitted == {p["name"] for p in container["ports"]} == {"http", "webhook"}
    assert policy["spec"]["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"}]}]
    assert "NetworkPolicy" not in {o["kind"] for o in build()}


def test_affinity_is_copied_into_the_pods_when_given() -> None:
    affinity: dict[str, Any] = {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
    }

    assert _pod(build(affinity=affinity))["affinity"] == affinity
    assert "affinity" not in _pod(build())


def test_csinodes_are_granted_only_when_a_gate_waits_for_csi_drivers() -> None:
    waiting = NO_POD_GATES.replace(
        "readyWhen: {annotation: example.com/ready=true}",
        "readyWhen: {csiDrivers: [{name: ebs.csi.aws.com}]}",
    )
    rules = RulesDocument.parse(waiting, "csi-gates.yaml").rules

    assert {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["csinodes"],
        "verbs": [
            "list",
            "watch",
        ],
    } in cluster_rules(rules, settings(**ON_CONFIGMAP))
    assert not any(
        r["resources"] == ["csinodes"]
        for r in cluster_rules(example_document().rules, settings(**ON_CONFIGMAP))
    )


def test_daemon_sets_and_pods_are_granted_only_when_a_node_agent_waits_for_daemon_sets() -> None:
    agents = RulesDocument.parse(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nnodeAgents:\n  - name: cni\n"
        "    daemonSets: [{namespace: kube-system, name: cilium}]\n"
        "    taint: {key: example.com/cni-not-ready, effect: NoSchedule}\n",
        "agents.yaml",
    ).rules
    granted = cluster_rules(agents, settings(**ON_CONFIGMAP))

    assert {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list", "watch"]} in (
        granted
    )
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]} in granted
    assert not any(
        r["resources"] == ["daemonsets"]
        for r in cluster_rules(example_document().rules, settings(**ON_CONFIGMAP))
    )


def test_node_status_is_granted_only_with_oci_conditions_and_they_are_passed_as_flags() -> None:
    statuses = [
        r for r in one(build(), "ClusterRole")["rules"] if r["resources"] == ["nodes/status"]
    ]
    assert statuses == []
    oci = {
        "compartments": "ocid1.compartment.oc1..a,ocid1.compartment.oc1..b",
        "region": "eu-frankfurt-1",
    }
    objects = build_manifests(example_document(), settings(oci=oci))
    granted = [r for r in one(objects, "ClusterRole")["rules"] if "nodes/status" in r["resources"]]
    assert granted == [{"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    args = _pod(objects)["containers"][0]["args"]
    assert f"--oci-compartments={oci['compartments']}" in args
    assert "--oci-region=eu-frankfurt-1" in args and "--oci-auth=workload_identity" in args


def test_oci_conditions_need_a_compartment() -> None:
    with pytest.raises(ValueError, match="at least one compartment"):
        settings(oci={})


@pytest.mark.parametrize("auth", ["workload_identity", "instance_principal"])
def test_the_network_policy_lets_the_oci_auth_reach_where_it_gets_its_token(auth: str) -> None:
    oci = {"compartments": "ocid1.compartment.oc1..a", "auth": auth}
    policy = one(build(networkPolicy={"apiServerPorts": [443]}, oci=oci), "NetworkPolicy")
    dns_and_https = [
        {"port": 53, "protocol": "UDP"},
        {"port": 53, "protocol": "TCP"},
        {"port": 443, "protocol": "TCP"},
    ]
    assert policy["spec"]["egress"][1:] == [
        {"ports": dns_and_https},
        {"ports": [{"port": 12250, "protocol": "TCP"}]},  # OKE's proxymux: workload identity
        {  # the instance metadata service: instance principals
            "to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}],
            "ports": [{"port": 80, "protocol": "TCP"}],
        },
    ]


def _on_objects() -> DeploySettings:  # the default
    return settings()


def test_on_rules_objects_no_rules_configmap_is_built_and_the_reconciler_reads_the_objects() -> (
    None
):
    objects = build_manifests(example_document(), _on_objects())
    assert not [o for o in objects if o["kind"] == "ConfigMap"]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--rules-objects" in args
    assert not [a for a in args if a.startswith("--rules-configmap")]


def test_on_rules_objects_the_reconciler_may_read_them_and_write_only_their_status() -> None:
    objects = build_manifests(example_document(), _on_objects())
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    granted = [r for r in role["rules"] if r["apiGroups"] == ["nodegate.dev"]]
    assert granted == [
        {
            "apiGroups": ["nodegate.dev"],
            "resources": ["noderules"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["nodegate.dev"], "resources": ["noderules/status"], "verbs": ["patch"]},
    ]
    [namespaced] = [o for o in objects if o["kind"] == "Role"]
    assert not [r for r in namespaced["rules"] if r.get("resourceNames") == ["nodegate-rules"]]


def test_on_the_rules_configmap_nothing_is_granted_on_rules_objects() -> None:
    objects = build_manifests(example_document(), settings(**ON_CONFIGMAP))
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert not [r for r in role["rules"] if r["apiGroups"] == ["nodegate.dev"]]


def test_the_rules_object_is_the_rules_file_with_the_installations_labels() -> None:
    found = rules_object(example_document(), _on_objects())
    example = yaml.safe_load(EXAMPLE_RULES.read_text(encoding="utf-8"))
    assert found["metadata"]["name"] == example["metadata"]["name"] == "example"
    assert found["spec"] == example["spec"]
    assert found["metadata"]["labels"]["app.kubernetes.io/name"] == "nodegate-reconciler"


def test_rules_of_the_shape_before_objects_are_named_after_the_installation() -> None:
    flat = RulesDocument.parse(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints: []\n", "flat.yaml"
    )
    found = rules_object(flat, _on_objects())
    assert (found["metadata"]["name"], found["spec"]) == (
        "nodegate-reconciler",
        {"labelTaints": []},
    )


READS = {
    ("", "pods"): "pods",
    ("apps", "daemonsets"): "daemonSets",
    ("storage.k8s.io", "csinodes"): "csiNodes",
}


def _reads(objects: list[dict[str, Any]]) -> set[str]:
    return {
        READS[(r["apiGroups"][0], r["resources"][0])]
        for r in one(objects, "ClusterRole")["rules"]
        if (r["apiGroups"][0], r["resources"][0]) in READS
    }


def test_on_rules_objects_any_rules_are_served_without_a_rules_file() -> None:
    without_rules = build_manifests(None, settings())

    assert _reads(without_rules) == {"pods", "daemonSets", "csiNodes"}
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["list", "watch", "update", "patch", "delete"],
    } in one(without_rules, "Role")["rules"]
    no_gates = RulesDocument.parse(NO_POD_GATES.partition("startupGates:")[0], "r.yaml")
    assert one(without_rules, "Deployment") == one(
        build_manifests(no_gates, settings()), "Deployment"
    )


def test_on_the_rules_configmap_rules_are_required() -> None:
    with pytest.raises(SettingsError, match="rulesSource configmap: give the rules"):
        build_manifests(None, settings(**ON_CONFIGMAP))


def test_access_withholds_a_read_from_any_rules_that_arrive_later() -> None:
    chosen = settings(access={"pods": False, "csiNodes": False})
    without_pods = build_manifests(RulesDocument.parse(NO_POD_GATES, "r.yaml"), chosen)

    assert _reads(without_pods) == {"daemonSets"}


def test_on_rules_objects_label_records_are_always_kept() -> None:
    """Any object may persist labels, and no rule acts before the records are read."""
    no_persistence = RulesDocument.parse(NO_POD_GATES, "r.yaml")
    assert no_persistence.rules.persistent_labels is None
    for document in (None, no_persistence):
        assert {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["list", "watch", "update", "patch", "delete"],
        } in one(build_manifests(document, settings()), "Role")["rules"]


def test_access_grants_a_read_the_configmap_rules_do_not_need() -> None:
    chosen = settings(access={"csiNodes": True}, **ON_CONFIGMAP)

    assert _reads(build_manifests(example_document(), chosen)) == {"pods", "csiNodes"}


AGENTS_AND_CSI = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
nodeAgents:
  - name: cni
    daemonSets: [{namespace: kube-system, name: cilium}]
    csiDrivers: [{name: ebs.csi.aws.com}]
    taint: {key: example.com/cni-not-ready, effect: NoSchedule}
"""


@pytest.mark.parametrize("source", ["objects", "configmap"])
@pytest.mark.parametrize("access", ["pods", "daemonSets", "csiNodes"])
def test_withholding_what_the_given_rules_read_is_refused_with_the_fix(
    source: str, access: str
) -> None:
    chosen = settings(access={access: False}, rulesSource=source)
    reads_all = RulesDocument.parse(AGENTS_AND_CSI, "agents.yaml")

    with pytest.raises(SettingsError, match=rf"access\.{access} is false, but the rules read it"):
        build_manifests(reads_all, chosen)
