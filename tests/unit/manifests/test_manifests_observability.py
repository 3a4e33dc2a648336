"""The dashboard and the alerts read only metrics the reconciler exports."""

from __future__ import annotations

import json
import re

from prometheus_client import CollectorRegistry

from nodegate.manifests.observability import (
    alert_rules,
    dashboard_json,
)
from nodegate.manifests.webhook import WEBHOOK_NAME
from nodegate.reconciler.nodes.metrics import AGE_BUCKET_LABELS, Metrics
from nodegate.reconciler.webhook.admission import WebhookMetrics
from tests.unit.manifests.support import API_SERVER_METRICS

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


def _referenced(expressions: list[str], prefix: str = "nodegate_") -> set[str]:
    return set(re.findall(rf"\b{prefix}[a-z_]+", " ".join(expressions)))


ALL_ALERTS = alert_rules("ns", webhook=True)


def test_every_metric_in_the_dashboard_is_exported() -> None:
    missing = _referenced(dashboard_expressions()) - _exported()

    assert missing <= PENDING_FROM_RECONCILER_WORK, missing


def test_every_metric_in_the_alerts_is_exported() -> None:
    missing = _referenced([r["expr"] for r in ALL_ALERTS]) - _exported()

    assert missing <= PENDING_FROM_RECONCILER_WORK, missing


def test_the_api_servers_metrics_read_are_the_ones_checked_on_a_real_api_server() -> None:
    """tests/e2e/test_webhook.py sees each of API_SERVER_METRICS move on kube-apiserver."""
    expressions = [r["expr"] for r in ALL_ALERTS] + dashboard_expressions()

    assert _referenced(expressions, "apiserver_") == set(API_SERVER_METRICS)


def test_the_age_buckets_the_alerts_select_are_ones_the_reconciler_exports() -> None:
    expressions = " ".join(r["expr"] for r in ALL_ALERTS) + " ".join(dashboard_expressions())
    selected = set(
        re.findall(r'nodegate_gated_node_age_seconds_bucket\{[^}]*le="([^"]+)"', expressions)
    )

    assert selected, "no alert reads the gated-age buckets"
    assert selected <= {*AGE_BUCKET_LABELS, "+Inf"}, selected


def test_the_api_server_webhook_alerts_come_only_with_the_webhook() -> None:
    without = {r["alert"] for r in alert_rules("ns")}
    with_webhook = {r["alert"] for r in ALL_ALERTS}

    assert with_webhook - without == {"NodegateWebhookFailingOpen", "NodegateWebhookRefusingNodes"}


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
        "nodegate_gated_nodes",
        "nodegate_gate_oldest_seconds",
        "nodegate_gated_node_age_seconds_bucket",
        "nodegate_nodes",
        "nodegate_leader_fence_held",
        "nodegate_server_fence",
        "nodegate_writes_fenced_total",
        "nodegate_watch_stalls_total",
        "nodegate_gate_timeouts_total",
        "nodegate_label_keys_contested",
        "nodegate_webhook_refused_total",
        "nodegate_oci_errors_total",
        "nodegate_oci_condition_writes_total",
        "nodegate_oci_last_poll_timestamp_seconds",
        *API_SERVER_METRICS,
    ):
        assert metric in expressions, metric


def test_dashboard_is_grafana_json_with_a_datasource_variable() -> None:
    dashboard = json.loads(dashboard_json())

    variables = {v["name"]: v["type"] for v in dashboard["templating"]["list"]}
    assert variables["datasource"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])


def test_alerts_are_scoped_to_the_reconcilers_namespace_or_its_webhooks_name() -> None:
    """The API server's series carry no namespace: its alerts select the webhook by name."""
    for rule in alert_rules("ops", webhook=True):
        scope = f'name="{WEBHOOK_NAME}"' if "apiserver_" in rule["expr"] else 'namespace="ops"'
        assert scope in rule["expr"], rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}


def test_dashboard_panels_do_not_overlap() -> None:
    panels = json.loads(dashboard_json())["panels"]
    cells = [
        (x, y)
        for panel in panels
        for x in range(panel["gridPos"]["x"], panel["gridPos"]["x"] + panel["gridPos"]["w"])
        for y in range(panel["gridPos"]["y"], panel["gridPos"]["y"] + panel["gridPos"]["h"])
    ]

    assert len(cells) == len(set(cells))
    assert len({panel["id"] for panel in panels}) == len(panels)


def dashboard_expressions() -> list[str]:
    """Every PromQL expression of the dashboard (for the metric-name checks)."""
    panels = json.loads(dashboard_json())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]
