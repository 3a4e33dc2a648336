"""Every object the manifest builder makes is accepted by a real kube-apiserver, field by field.

Server-side dry run (`dryRun=All`) runs the API server's full validation and admission without
storing anything; `fieldValidation=Strict` makes an unknown or misspelt field an error instead
of a silently dropped one. The Namespace is created for real first, since namespaced objects
must name an existing namespace. The PrometheusRule needs its CRD: the test installs a
structural schema of its `spec.groups[].rules[]` (the Prometheus Operator's own CRD is not
reachable from here), so a misspelt alert field fails too.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from nodegate.core.rules.loader import RulesDocument
from nodegate.localcluster.nodes import wait_crd_established
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings, Manifest
from tests.unit.manifests.support import EXAMPLE_RULES, NO_POD_GATES

STRICT = [("dryRun", "All"), ("fieldValidation", "Strict")]
"""Query parameters of every create below: validate and admit, store nothing, and refuse
unknown fields. Sent raw through the dynamic client: the typed client would validate bodies
client-side first, which is not what this test is about."""

_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["expr"],
    "properties": {
        "alert": {"type": "string"},
        "record": {"type": "string"},
        "expr": {"x-kubernetes-int-or-string": True},
        "for": {"type": "string"},
        "keep_firing_for": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
PROMETHEUS_RULE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "prometheusrules.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {
            "plural": "prometheusrules",
            "singular": "prometheusrule",
            "kind": "PrometheusRule",
            "listKind": "PrometheusRuleList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "groups": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "interval": {"type": "string"},
                                                "rules": {"type": "array", "items": _RULE_SCHEMA},
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def prometheus_rule_crd(api_client: k8s_client.ApiClient) -> Iterator[None]:
    """The PrometheusRule CRD, established, for the module's tests."""
    try:
        _create(api_client, PROMETHEUS_RULE_CRD, dry_run=False)
    except DynamicApiError as err:
        if err.status != 409:  # another module of the session already installed it
            raise
    wait_crd_established(api_client, PROMETHEUS_RULE_CRD["metadata"]["name"])
    yield


@pytest.fixture
def namespace(core_v1: k8s_client.CoreV1Api) -> Iterator[str]:
    name = f"ng-dry-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        core_v1.delete_namespace(name)
    except ApiException as err:
        if err.status != 404:
            raise


def _settings(namespace: str, **extra: Any) -> DeploySettings:
    return DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate", "pullSecrets": ["regcred"]},
            "namespace": namespace,
            "name": namespace,  # cluster-scoped names must not collide across tests
            **extra,
        }
    )


def _create(api_client: k8s_client.ApiClient, obj: Manifest, *, dry_run: bool = True) -> None:
    """POST `obj` as is to the API server (raises ApiException if the server refuses it)."""
    dynamic = DynamicClient(api_client)  # type: ignore[no-untyped-call]
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    dynamic.create(  # type: ignore[no-untyped-call]
        resource,
        body=obj,
        namespace=obj["metadata"].get("namespace"),
        query_params=list(STRICT) if dry_run else [("fieldValidation", "Strict")],
    )


def _create_all(api_client: k8s_client.ApiClient, objects: list[Manifest]) -> None:
    """The Namespace for real, then every other object dry run. The NodeRules CRD is shared by
    every installation, and an earlier test of the session may have made it: then it is
    dry-run applied over itself, as `kubectl apply` would, with the same strict checks."""
    namespace = next(o for o in objects if o["kind"] == "Namespace")
    _create(api_client, namespace, dry_run=False)
    for obj in objects:
        if obj is namespace:
            continue
        try:
            _create(api_client, obj)
        except DynamicApiError as err:
            if err.status != 409 or obj["kind"] != "CustomResourceDefinition":
                raise
            dynamic = DynamicClient(api_client)  # type: ignore[no-untyped-call]
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            dynamic.server_side_apply(  # type: ignore[no-untyped-call]
                resource, body=obj, field_manager="nodegate-test", query_params=list(STRICT)
            )


@pytest.mark.usefixtures("prometheus_rule_crd")
@pytest.mark.parametrize("rules_text", ["example", "no-pod-gates"])
def test_every_object_passes_server_side_validation(
    api_client: k8s_client.ApiClient, namespace: str, rules_text: str
) -> None:
    text = EXAMPLE_RULES.read_text(encoding="utf-8") if rules_text == "example" else NO_POD_GATES
    settings = _settings(
        namespace,
        grafanaDashboard={},
        prometheusRule={"labels": {"a": "b"}},
        networkPolicy={},
        oci={"compartments": "ocid1.compartment.oc1..a,ocid1.compartment.oc1..b"},
        affinity={
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                ]
            }
        },
    )
    objects = build_manifests(RulesDocument.parse(text, rules_text), settings)
    assert {o["kind"] for o in objects} >= {
        "CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole",
        "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment",
        "PodDisruptionBudget", "Service", "PrometheusRule", "NetworkPolicy",
    }  # fmt: skip

    _create_all(api_client, objects)  # raises on the first object the server refuses


def test_a_misspelt_field_is_refused_so_the_check_above_can_fail(
    api_client: k8s_client.ApiClient, namespace: str
) -> None:
    objects = build_manifests(
        RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules"),
        _settings(namespace),
    )
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True

    with pytest.raises(DynamicApiError) as failure:
        _create_all(api_client, objects)

    assert failure.value.status == 400
    message = json.loads(str(failure.value.body))["message"]
    assert 'unknown field "spec.template.spec.containers[0].readOnlyRootFileSystem"' in message


@pytest.mark.parametrize(
    "webhook",
    [{}, {"failurePolicy": "Fail", "timeoutSeconds": 5, "reinvocationPolicy": "Never"}],
    ids=["defaults", "fail"],
)
def test_the_webhook_objects_pass_server_side_validation(
    api_client: k8s_client.ApiClient, namespace: str, webhook: dict[str, Any]
) -> None:
    """The self-signed webhook's Service, Secret, configuration and RBAC (cert-manager's
    Certificate needs its CRD, which is not reachable here)."""
    objects = build_manifests(
        RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules"),
        _settings(namespace, webhook=webhook),
    )
    assert {"MutatingWebhookConfiguration", "Secret"} <= {o["kind"] for o in objects}

    _create_all(api_client, objects)
