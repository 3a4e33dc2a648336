"""The Node admission webhook's objects: off by default; when on, exactly what it needs."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.core.rules.loader import RulesDocument
from nodegate.manifests.webhook import CERT_DIR
from tests.unit.manifests.support import NO_POD_GATES, ON_CONFIGMAP, build, one
from tests.unit.manifests.test_manifests_args import _parse_with_the_real_cli

SELF_SIGNED: dict[str, Any] = {"webhook": {}}
CERT_MANAGER: dict[str, Any] = {"webhook": {"certManager": {"name": "ca-issuer"}}}


def _webhook(objects: list[dict[str, Any]]) -> dict[str, Any]:
    configuration = one(objects, "MutatingWebhookConfiguration")
    webhooks: list[dict[str, Any]] = configuration["webhooks"]
    assert len(webhooks) == 1
    return webhooks[0]


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


def _secret_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        rule
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
        for rule in o["rules"]
        if "secrets" in rule["resources"] or "mutatingwebhookconfigurations" in rule["resources"]
    ]


def test_the_webhook_is_off_by_default() -> None:
    objects = build()
    kinds = {o["kind"] for o in objects}
    assert "MutatingWebhookConfiguration" not in kinds and "Secret" not in kinds
    assert not any("webhook" in arg for arg in _container(objects)["args"])
    assert _secret_rules(objects) == []


def test_the_configuration_takes_node_creates_only_and_fails_open_by_default() -> None:
    webhook = _webhook(build(**SELF_SIGNED))
    assert webhook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["nodes"],
            "scope": "Cluster",
        }
    ]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["sideEffects"] == "None"
    assert webhook["timeoutSeconds"] == 2
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    assert "namespaceSelector" not in webhook and "objectSelector" not in webhook
    assert webhook["clientConfig"] == {
        "service": {
            "name": "nodegate-reconciler-webhook",
            "namespace": "nodegate-system",
            "path": "/mutate-nodes",
            "port": 443,
        }
    }


def test_fail_and_timeout_are_configurable() -> None:
    webhook = _webhook(build(webhook={"failurePolicy": "Fail", "timeoutSeconds": 5}))
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Fail", 5)


def test_self_signed_grants_one_secret_and_one_configuration_by_name() -> None:
    objects = build(**SELF_SIGNED)
    assert _secret_rules(objects) == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "verbs": ["get", "patch"],
            "resourceNames": ["nodegate-reconciler"],
        },
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "update"],
            "resourceNames": ["nodegate-reconciler-webhook-tls"],
        },
    ]
    secret = one(objects, "Secret")
    assert "data" not in secret and "stringData" not in secret  # re-applying keeps the replicas'
    assert "caBundle" not in _webhook(objects)["clientConfig"]


def test_the_service_reaches_every_replica_on_the_webhook_port() -> None:
    objects = build(**SELF_SIGNED)
    service = one(objects, "Service", "nodegate-reconciler-webhook")
    assert service["spec"]["ports"] == [
        {"name": "https-webhook", "port": 443, "targetPort": "webhook"}
    ]
    assert (
        service["spec"]["selector"] == one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in _container(objects)[
        "ports"
    ]


def test_cert_manager_issues_the_certificate_and_the_reconciler_reads_no_secret() -> None:
    objects = build(**CERT_MANAGER)
    certificate = one(objects, "Certificate")
    assert certificate["spec"]["secretName"] == "nodegate-reconciler-webhook-tls"
    assert "nodegate-reconciler-webhook.nodegate-system.svc" in certificate["spec"]["dnsNames"]
    annotations = one(objects, "MutatingWebhookConfiguration")["metadata"]["annotations"]
    assert annotations == {
        "cert-manager.io/inject-ca-from": "nodegate-system/nodegate-reconciler-webhook"
    }
    assert _secret_rules(objects) == []
    assert {"name": "webhook-tls", "mountPath": CERT_DIR, "readOnly": True} in _container(objects)[
        "volumeMounts"
    ]


@pytest.mark.parametrize("chosen", [SELF_SIGNED, CERT_MANAGER], ids=["self-signed", "cert-manager"])
def test_the_webhook_flags_parse_into_matching_settings(
    chosen: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _parse_with_the_real_cli(_container(build(**chosen))["args"], monkeypatch)
    webhook = settings.webhook
    assert webhook.port == 9443
    assert webhook.service == "nodegate-reconciler-webhook"
    if chosen is SELF_SIGNED:
        assert webhook.configuration == "nodegate-reconciler"
        assert webhook.tls_secret == "nodegate-reconciler-webhook-tls"
        assert webhook.cert_dir is None
    else:
        assert str(webhook.cert_dir) == CERT_DIR


def test_records_are_read_by_name_at_admission_only_when_labels_may_persist() -> None:
    get_any = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    no_persistence = RulesDocument.parse(NO_POD_GATES, "rules")
    assert get_any in one(build(**SELF_SIGNED), "Role")["rules"]  # the example persists labels
    assert get_any not in one(build(), "Role")["rules"]  # no webhook
    # Rules from objects may persist labels later; from the ConfigMap, only as these rules do.
    assert get_any in one(build(no_persistence, **SELF_SIGNED), "Role")["rules"]
    configmap_rules = one(build(no_persistence, **SELF_SIGNED, **ON_CONFIGMAP), "Role")
    assert get_any not in configmap_rules["rules"]


def test_the_prometheus_rule_watches_the_webhook_from_the_api_server_when_it_is_served() -> None:
    def alerts(**overrides: Any) -> set[str]:
        rule = one(build(prometheusRule={}, **overrides), "PrometheusRule")
        return {r["alert"] for r in rule["spec"]["groups"][0]["rules"]}

    assert "NodegateWebhookFailingOpen" in alerts(webhook={})
    assert "NodegateWebhookFailingOpen" not in alerts()
