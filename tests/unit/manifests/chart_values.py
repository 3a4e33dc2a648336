"""The chart's values as the manifest builder's settings: what `helm template` of charts/nodegate
must equal, object for object (tests/unit/manifests/test_chart_helm.py, the e2e installs).

The chart is written by hand; the builder (`build_manifests`) stays the source of truth for which
objects an installation needs. A release R in namespace N is the builder's installation named
after the release (the chart's `nodegate.fullname`) in N, on NodeRules objects, with the
Namespace made by helm; the NodeRules objects the values give are `rules_object`s of it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import API_VERSION, KIND
from nodegate.manifests.build import build_manifests, rules_object
from nodegate.manifests.crd import noderules_crd
from nodegate.manifests.observability import alert_rules, dashboard_json
from nodegate.manifests.settings import DeploySettings, Manifest
from nodegate.manifests.tolerations import gate_tolerations

CHART = Path(__file__).resolve().parents[3] / "charts" / "nodegate"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/version", "app.kubernetes.io/managed-by")
"""Labels only the chart writes (the builder's objects are not Helm's)."""
CHART_ONLY_DEFAULTS: dict[str, Any] = {
    "nameOverride": "",
    "fullnameOverride": "",
    "serviceAccount": {"create": True, "name": "", "annotations": {}},
    "rbac": {"create": True},
    "podAnnotations": {},
    "podLabels": {},
    "extraArgs": [],
    "env": [],
    "topologySpreadConstraints": None,
    "podDisruptionBudget": {"enabled": True},
    "dryRun": False,
}
"""The values with no deploy setting behind them, at their defaults: only there does the
chart render exactly the builder's objects (helm-unittest tests them off their defaults)."""


def chart_defaults() -> dict[str, Any]:
    """charts/nodegate/values.yaml."""
    loaded: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    return loaded


def coalesced(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The values a template sees: helm merges maps into values.yaml's (a null drops a key);
    lists and scalars replace."""
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if value is None and defaults.get(key) is not None:
            merged.pop(key)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = coalesced(merged[key], value)
        else:
            merged[key] = value
    return merged


def fullname(values: dict[str, Any], release: str) -> str:
    """The chart's `nodegate.fullname`: cut to 63 characters, without a trailing '-'.

    The chart cuts the Services' suffixed names (`<name>-metrics`, `<name>-webhook`) to 63
    characters too; the builder does not (it writes `settings.name` + suffix), so the two
    agree while the name is at most 55 characters (any release name of at most 46)."""
    if values["fullnameOverride"]:
        whole = str(values["fullnameOverride"])
    else:
        name = values["nameOverride"] or "nodegate"
        whole = release if name in release else f"{release}-{name}"
    cut = whole[:63]
    return cut[:-1] if cut.endswith("-") else cut


def _document(value: Any, where: str) -> RulesDocument:
    text = value if isinstance(value, str) else yaml.safe_dump(value, sort_keys=False)
    return RulesDocument.parse(text, where)


def documents(values: dict[str, Any]) -> tuple[RulesDocument | None, list[RulesDocument]]:
    """The `rules` value's document (None: none) and each of `nodeRules`'."""
    rules = values.get("rules")
    given = _document(rules, "rules") if rules is not None else None
    kind = {"apiVersion": API_VERSION, "kind": KIND}  # what the chart writes of each
    objects = [
        _document({**kind, **v}, f"nodeRules[{i}]") for i, v in enumerate(values["nodeRules"])
    ]
    return given, objects


def _pull_secrets(values: dict[str, Any]) -> list[str]:
    return [s["name"] if isinstance(s, dict) else s for s in values["imagePullSecrets"]]


def _section(values: dict[str, Any], key: str, *fields: str) -> dict[str, Any] | None:
    """An optional section (`enabled`) as its setting: its fields, or None when off (a field
    given null is gone from the coalesced values: None)."""
    section = values[key]
    return {f: section.get(f) for f in fields} if section["enabled"] else None


def quantity(value: Any) -> str:
    """A quantity of `resources` as the chart writes it (`nodegate.quantity`): a number as its
    digits, as a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not value.is_integer():
        return str(value)
    return str(int(value))


def _resources(values: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        kind: {name: quantity(q) for name, q in quantities.items() if q is not None}
        for kind, quantities in values["resources"].items()
    }


def settings_for(values: dict[str, Any], release: str, namespace: str) -> DeploySettings:
    """The deploy settings these (coalesced) values stand for, released as `release` in
    `namespace`."""
    for key, default in CHART_ONLY_DEFAULTS.items():
        assert values[key] == default, f"{key} has no deploy setting: keep it at its default"
    image = values["image"]
    _, objects = documents(values)
    webhook = values["webhook"]
    issuer = webhook["certManager"]
    dashboard = _section(values, "grafanaDashboard", "labels", "namespace")
    if dashboard is not None:
        dashboard["namespace"] = dashboard["namespace"] or None
        dashboard["labels"] = dashboard["labels"] or {}
    return DeploySettings.model_validate(
        {
            "image": {
                "repository": image["repository"],
                "tag": str(image["tag"]) if image["tag"] else None,
                "digest": image["digest"] or None,
                "pullPolicy": image["pullPolicy"],
                "pullSecrets": _pull_secrets(values),
            },
            "namespace": namespace,
            "createNamespace": False,  # helm's (-n, --create-namespace)
            "name": fullname(values, release),
            "rulesSource": "objects",
            "replicas": values["replicaCount"],
            "resources": _resources(values),
            "priorityClassName": values["priorityClassName"] or None,
            "httpPort": values["httpPort"],
            "logLevel": values["logLevel"],
            "logFormat": values["logFormat"],
            "nodeSelector": values["nodeSelector"],
            # The rules' gates come first (`pod_tolerations`); the other objects' next.
            "tolerations": [
                *(t.model_dump(by_alias=True) for d in objects for t in gate_tolerations(d.rules)),
                *values["tolerations"],
            ],
            "unknownGateSeconds": values.get("unknownGateSeconds"),
            "affinity": values["affinity"],
            "access": values["access"],
            "leaderElection": values["leaderElection"],
            "metrics": values["metrics"],
            "serviceMonitor": _section(values, "serviceMonitor", "labels", "interval"),
            "podMonitor": _section(values, "podMonitor", "labels", "interval"),
            "networkPolicy": _section(values, "networkPolicy", "apiServerPorts"),
            "grafanaDashboard": dashboard,
            "prometheusRule": _section(values, "prometheusRule", "labels"),
            "webhook": (
                {
                    "port": webhook["port"],
                    "failurePolicy": webhook["failurePolicy"],
                    "timeoutSeconds": webhook["timeoutSeconds"],
                    "reinvocationPolicy": webhook["reinvocationPolicy"],
                    "certManager": (
                        {"name": issuer["name"], "kind": issuer["kind"]}
                        if issuer["enabled"]
                        else None
                    ),
                }
                if webhook["enabled"]
                else None
            ),
            "oci": _section(values, "oci", "compartments", "auth", "region", "pollSeconds"),
        }
    )


def expected_objects(values: dict[str, Any], release: str, namespace: str) -> list[Manifest]:
    """What `helm template --include-crds` of these (coalesced) values must render: the
    builder's installation and the values' NodeRules objects."""
    settings = settings_for(values, release, namespace)
    given, others = documents(values)
    objects = build_manifests(given, settings)
    objects += [rules_object(d, settings) for d in ([given] if given else []) + others]
    return objects


def without_helm_labels(manifest: Manifest) -> Manifest:
    """The object without the labels only Helm writes (on it and on its pod template)."""
    manifest = copy.deepcopy(manifest)
    holders = [manifest["metadata"]]
    template = (
        manifest.get("spec", {}).get("template") if manifest["kind"] == "Deployment" else None
    )
    if template:
        holders.append(template["metadata"])
    for metadata in holders:
        for label in HELM_ONLY_LABELS:
            metadata.get("labels", {}).pop(label, None)
    return manifest


ALERTS_HEAD = """\
# nodegate's alerts, as nodegate.manifests.observability writes them for the namespace
# RELEASE_NAMESPACE (templates/prometheusrule.yaml puts the release namespace there).
# tests/unit/manifests/test_chart_helm.py keeps them equal; rewrite with
# `.venv/bin/python -m tests.unit.manifests.chart_values`.
"""
WEBHOOK_ALERTS_HEAD = """\
# nodegate's alerts on the API server's calls to the Node admission webhook, as
# nodegate.manifests.observability writes them; tests/unit/manifests/test_chart_helm.py keeps
# them equal; rewrite with `.venv/bin/python -m tests.unit.manifests.chart_values`.
"""
CRD_HEAD = """\
# The NodeRules CRD, as nodegate.manifests.crd.noderules_crd() builds it (what `nodegate
# manifests` applies too); tests/unit/manifests/test_chart_helm.py keeps them equal; rewrite with
# `.venv/bin/python -m tests.unit.manifests.chart_values`.
"""


def builder_files() -> dict[str, str]:
    """The chart's files that hold the builder's data, by path in the chart."""

    def dump(data: Any) -> str:
        return str(yaml.safe_dump(data, sort_keys=False, width=10**6, allow_unicode=True))

    namespace = "RELEASE_NAMESPACE"
    alerts = alert_rules(namespace)
    webhook = alert_rules(namespace, webhook=True)[len(alerts) :]
    return {
        "crds/noderules.nodegate.dev.yaml": CRD_HEAD + dump(noderules_crd()),
        "files/alerts.yaml": ALERTS_HEAD + dump(alerts),
        "files/webhook-alerts.yaml": WEBHOOK_ALERTS_HEAD + dump(webhook),
        "files/grafana-dashboard.json": dashboard_json(),
    }


if __name__ == "__main__":
    for relative, text in builder_files().items():
        (CHART / relative).write_text(text, encoding="utf-8")
        print(f"wrote {CHART / relative}")
