"""The dashboard and the alerts read only metrics the reconciler exports."""

from __future__ import annotations

import json
import re

from prometheus_client import CollectorRegistry

from nodegate.manifests.observability import alert_rules, dashboard_expressions, dashboard_json
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.webhook import WebhookMetrics

PENDING_FROM_RECONCILER_WORK: set[str] = set()
"""Metrics a dashboard panel or alert already reads before the reconciler work that exports
them is merged (the startup-gates timeouts, when they land); empty means the check is exact."""


def _exported() -> set[str]:
    """Every sample name a fresh reconciler's registry can expose (with a label child each)."""
    metrics = Metrics(registry=CollectorRegistry())
    WebhookMetrics(metrics.registry)  # the webhook's, on the same registry when it runs
    names: set[str] = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(
            family.name + suffix for suffix in ("_total", "_bucket", "_sum", "_count", "_created")
        )
    return names


def _referenced(expressions: list[str]) -> set[str]:
    return set(re.findall(r"\bnodegate_[a-z_]+", " ".join(expressions)))


def test_every_metric_in_the_dashboard_is_exported() -> None:
    missing = _referenced(dashboard_expressions()) - _exported()

    assert missing <= PENDING_FROM_RECONCILER_WORK, missing


def test_every_metric_in_the_alerts_is_exported() -> None:
    missing = _referenced([r["expr"] for r in alert_rules("ns")]) - _exported()

    assert missing <= PENDING_FROM_RECONCILER_WORK, missing


def test_dashboard_covers_what_an_operator_watches() -> None:
    expressions = " ".join(dashboard_expressions())

    for metric in (
        "nodegate_node_changes_total",
        "nodegate_node_writes_total",
        "nodegate_write_conflicts_total",
        "nodegate_queue_depth",
        "nodegate_reconcile_duration_seconds_bucket",
        "nodegate_rules_last_update_valid",
        "nodegate_is_leader",
        "nodegate_label_restore_failures_total",
    ):
        assert metric in expressions, metric


def test_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    dashboard = json.loads(dashboard_json())

    variables = {v["name"]: v["type"] for v in dashboard["templating"]["list"]}
    assert variables["datasource"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])


def test_alerts_are_scoped_to_the_reconcilers_namespace() -> None:
    for rule in alert_rules("ops"):
        assert 'namespace="ops"' in rule["expr"], rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
