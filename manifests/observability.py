"""Monitoring that ships with the reconciler: a Grafana dashboard and Prometheus alerts.

Both read only the metrics the reconciler exports (reconciler/nodes/metrics.py; a unit test checks
every metric name here against a live registry). The dashboard JSON is a file in the package
(`grafana-dashboard.json`), importable into Grafana by hand or shipped as a ConfigMap for
Grafana's dashboard sidecar; the alerts are a PrometheusRule for the Prometheus Operator.
"""

from __future__ import annotations

from datetime import timedelta
from importlib.resources import files
from typing import Any

from nodegate.core.reports.gate_census import (
    GATE_AGE_WARNING,
    GATED_COUNT_WARNING,
    GATED_SHARE_WARNING,
)
from nodegate.core.rules.autoscalers import CA_MAX_TOTAL_UNREADY_PERCENTAGE, CA_STARTUP_WINDOW
from nodegate.manifests.settings import DeploySettings, Manifest
from nodegate.manifests.webhook import WEBHOOK_NAME

DASHBOARD_FILE = "grafana-dashboard.json"


def dashboard_json() -> str:
    """The Grafana dashboard, as shipped (datasource and namespace are template variables)."""
    return files("nodegate.manifests").joinpath(DASHBOARD_FILE).read_text(encoding="utf-8")


def dashboard_configmap(settings: DeploySettings) -> Manifest:
    """The dashboard as a ConfigMap labelled for Grafana's sidecar."""
    assert settings.grafana_dashboard is not None
    dashboard = settings.grafana_dashboard
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{settings.name}-dashboard",
            "namespace": dashboard.namespace or settings.namespace,
            "labels": {**settings.labels, **dashboard.labels},
        },
        "data": {"nodegate-reconciler.json": dashboard_json()},
    }


def _alert(
    name: str, expr: str, duration: str, severity: str, summary: str, fix: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": duration,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": fix},
    }


def alert_rules(namespace: str, webhook: bool = False) -> list[dict[str, Any]]:
    """The alerts, for the reconciler running in `namespace` (and serving the Node admission
    webhook, when `webhook`)."""
    ns = f'namespace="{namespace}"'
    late = GATE_AGE_WARNING.total_seconds()
    minute = timedelta(minutes=1)
    late_minutes, window = GATE_AGE_WARNING // minute, CA_STARTUP_WINDOW // minute
    # Gated nodes older than the warning age: those cluster-autoscaler counts as unready within
    # 5 minutes (all of them minus the bucket at the warning age; `le` spelled as
    # client_python spells it, checked by a unit test).
    age = "nodegate_gated_node_age_seconds_bucket"
    late_nodes = f'(max({age}{{{ns},le="+Inf"}}) - max({age}{{{ns},le="{late!r}"}}))'
    reconciler = [
        _alert(
            "NodegateNoLeader",
            f"sum(nodegate_is_leader{{{ns}}}) < 1 or absent(nodegate_is_leader{{{ns}}})",
            "5m",
            "critical",
            "No nodegate reconciler replica holds the leader Lease: nothing reconciles nodes.",
            f"Check the reconciler pods (kubectl -n {namespace} get pods) and their logs; a "
            "replica that cannot renew its Lease exits with code 3.",
        ),
        _alert(
            "NodegateRulesRejected",
            f"min(nodegate_rules_last_update_valid{{{ns}}}) == 0",
            "5m",
            "warning",
            "The latest rules update was refused; the last good rules stay in force.",
            "Run `nodegate validate` on the rules ConfigMap's rules.yaml; the Warning Event on "
            "the ConfigMap names every problem.",
        ),
        _alert(
            "NodegateRulesHeld",
            f"max(nodegate_rules_held{{{ns}}}) == 1",
            "15m",
            "warning",
            "A valid rules update is held by the blast-radius guard: it would untaint too many "
            "nodes at once.",
            "Read the held-rules Event (it names the digest); confirm the update by annotating "
            "the rules ConfigMap nodegate.dev/confirm-rules=<digest>, or fix the rules.",
        ),
        _alert(
            "NodegateEvictionsWaiting",
            f"max by (rule) (nodegate_evictions_waiting{{{ns}}}) > 0",
            "1m",
            "warning",
            "NoExecute taints of rule {{ $labels.rule }} wait for the eviction budget: more "
            "nodes wanted them within the budget's window than it allows (a condition storm?).",
            "Read the EvictionBudgetSpent Event on the rules ConfigMap: it names the share and "
            "the nodes waiting. They are tainted as the window allows, and not at all if their "
            "condition recovers first. To let them through now, give the rule its own "
            "evictionBudget (or 'unlimited'); docs/rules.md, 'Eviction budget'.",
        ),
        _alert(
            "NodegateServerClockDisagrees",
            f"max(abs(nodegate_server_clock_disagreement_seconds{{{ns}}})) > 5",
            "10m",
            "warning",
            "The API server's clock disagrees with nodegate's by over 5 s: nodegate follows it at "
            "1% (a `for` hold or gate timeout may end up to 1% early or late while it does), or "
            "not at all while its readings disagree among themselves.",
            "Check NTP on the API server hosts (every replica: one behind the load balancer "
            "running ahead is enough) and the reconciler's log line 'the API server's clock "
            "disagrees'; docs/reconciler.md, 'Time: one clock'.",
        ),
        _alert(
            "NodegateNodeAgentCannotRun",
            f'max by (rule, daemonset) (nodegate_node_agents_cannot_run{{{ns},action="wait"}}) > 0',
            "15m",
            "warning",
            "Nodes keep node-agent rule {{ $labels.rule }}'s taint waiting for DaemonSet "
            "{{ $labels.daemonset }}, which the DaemonSet controller will not run on them "
            "(cannotRun: wait).",
            "Read the NodeAgentCannotRun Event on the rules' source: it names a node and what "
            "keeps the DaemonSet away (a taint it does not tolerate, its nodeSelector). Let it run "
            "there, narrow the rule's match, or set cannotRun: skip; docs/agents.md.",
        ),
        _alert(
            "NodegateNodeAgentSkipped",
            f'max by (rule, daemonset) (nodegate_node_agents_cannot_run{{{ns},action="skip"}}) > 0',
            "1h",
            "info",
            "Node-agent rule {{ $labels.rule }} lifts its taint on some nodes without waiting for "
            "DaemonSet {{ $labels.daemonset }}, which the DaemonSet controller will not run on "
            "them (cannotRun: skip).",
            "If those nodes should run it, read the NodeAgentCannotRun Event (what keeps it away) "
            "and fix the DaemonSet's tolerations or nodeSelector; if not, narrow the rule's match "
            "to the nodes it runs on.",
        ),
        _alert(
            "NodegateNodeWriteErrors",
            f'sum(rate(nodegate_node_writes_total{{{ns},result="error"}}[10m])) > 0',
            "10m",
            "warning",
            "Node writes are failing: taints and labels are not being corrected.",
            "Check the reconciler's logs for the API error (RBAC, admission webhooks, API "
            "server availability).",
        ),
        _alert(
            "NodegatePermanentErrors",
            f'sum(increase(nodegate_errors_total{{{ns},kind="permanent"}}[15m])) > 0',
            "0m",
            "warning",
            "The reconciler hit errors that retrying cannot fix.",
            "The reconciler's logs and Warning Events name the object and the refusal.",
        ),
        _alert(
            "NodegateFenceViewStale",
            f'sum(increase(nodegate_writes_fenced_total{{{ns},verdict="stale_view"}}[10m])) > 0',
            "0m",
            "critical",
            "The API server refuses the leader's writes: its view of the leader Lease has not "
            "caught up for over 10 s, so no node change lands.",
            "kube-apiserver stops its Lease param informer once the fence binding was deleted "
            "for a second (kubernetes/kubernetes#130887), e.g. by an uninstall and reinstall. "
            "Restart the API servers, or delete the reconciler's "
            "ValidatingAdmissionPolicyBinding (<installation name>-fence; writes are then fenced "
            "on the client only) and create it again after the restart; docs/reconciler.md, "
            "'One writer'.",
        ),
        _alert(
            "NodegateStateUnavailable",
            f"sum by (kind) (increase(nodegate_errors_total{{{ns},"
            'kind=~"ledger|sightings|status|history"}[10m])) > 0',
            "10m",
            "warning",
            "The reconciler cannot read or write its state ({{ $labels.kind }}) in its "
            "namespace: with the eviction ledger out, every budgeted evicting taint waits; "
            "with the others, a restart loses what they keep.",
            f"Check the reconciler's logs and its Role's access to its ConfigMaps in "
            f"{namespace} (nodegate-eviction-ledger, nodegate-sightings, nodegate-status, "
            "nodegate-taint-history); an unreadable one must be repaired or deleted "
            "(docs/reconciler.md, 'Restarts and failovers').",
        ),
        _alert(
            "NodegateLabelRestoresFailing",
            f"sum(increase(nodegate_label_restore_failures_total{{{ns}}}[15m])) > 0 and "
            f"sum(increase(nodegate_label_restores_total{{{ns}}}[15m])) == 0",
            "15m",
            "warning",
            "Persisted labels are not being put back on re-created nodes.",
            "The failures' 'reason' label and the reconciler's logs say why (API errors, "
            "quarantined records); nodes wait without their persisted labels until it succeeds.",
        ),
        _alert(
            "NodegateWritesThrottled",
            f"sum(rate(nodegate_write_throttle_seconds_total{{{ns}}}[10m])) > 0.5",
            "15m",
            "info",
            "Node writes spend more than half their time waiting for the client-side rate "
            "limit: changes reach nodes late.",
            "Expected during a large rollout; if it persists, raise --write-qps/--write-burst.",
        ),
        _alert(
            "NodegateStartupGatesTimingOut",
            f"sum(increase(nodegate_gate_timeouts_total{{{ns}}}[30m])) > 0",
            "0m",
            "warning",
            "Nodes reached a startup gate's timeout without their init pod becoming Ready.",
            "The node's StartupGateTimedOut Event names the gate; check that gate's init "
            "DaemonSet pods on those nodes (onTimeout says whether the gate was kept).",
        ),
        # Before cluster-autoscaler's thresholds (docs/gates.md, core/reports/gate_census.py): a
        # node still gated 15 minutes after its creation counts as unready and keeps its scale-up
        # pending until it times out (the node group then backs off); more than 3 unready
        # nodes that are also more than 45 % of all nodes stop it from scaling at all.
        _alert(
            "NodegateGateHeldNearAutoscalerStartupWindow",
            f"max by (gate, pool) (nodegate_gate_oldest_seconds{{{ns}}}) > {late:.0f}",
            "1m",
            "warning",
            "A node has carried startup gate {{ $labels.gate }} (pool {{ $labels.pool }}) for "
            f"over {late_minutes} minutes; at {window} minutes "
            "cluster-autoscaler counts it as unready, and a scale-up waiting for it times out "
            "and backs the pool off.",
            "Find it with `kubectl get nodes -l nodegate.dev/pool={{ $labels.pool }}` and check "
            "the gate's init pod on it; `nodegate explain` says what the gate waits for. If "
            f"init is slow by design, keep the gate's timeout under {window} minutes.",
        ),
        _alert(
            "NodegateGatedShareNearAutoscalerHalt",
            f"{late_nodes} > {GATED_COUNT_WARNING} "
            f"and on() {late_nodes} / max(nodegate_nodes{{{ns}}}) > {GATED_SHARE_WARNING}",
            "1m",
            "critical",
            f"More than {GATED_COUNT_WARNING} nodes, and more than "
            f"{GATED_SHARE_WARNING * 100:.0f} % of all nodes, have carried a startup gate for "
            f"over {late_minutes} minutes: at {window} minutes they turn unready, and "
            f"cluster-autoscaler stops scaling the whole cluster when more than "
            f"{GATED_COUNT_WARNING} unready nodes are over {CA_MAX_TOTAL_UNREADY_PERCENTAGE} % "
            "of all nodes.",
            "Check the init DaemonSets of the gates in nodegate_gated_nodes (a broken image or "
            "a missing toleration holds every new node) and that the reconciler is leading; "
            "lifting the gates (or a gate timeout with onTimeout: lift) keeps the autoscaler "
            "running.",
        ),
        _alert(
            "NodegateWebhookErrors",
            f'sum(rate(nodegate_webhook_reviews_total{{{ns},result="error"}}[10m])) > 0',
            "5m",
            "warning",
            "The Node admission webhook failed on some reviews and admitted those nodes "
            "unchanged: they were born without their startup gates and persisted labels.",
            "The webhook's log line 'admission patch failed' has the traceback; the reconciler "
            "restores labels right after, and backfill (if on) gates idle nodes.",
        ),
        _alert(
            "NodegateWebhookSlow",
            "histogram_quantile(0.99, sum by (le) "
            f"(rate(nodegate_webhook_review_duration_seconds_bucket{{{ns}}}[10m]))) > 1",
            "10m",
            "warning",
            "Node admission reviews take over a second (p99); past the webhook's timeout "
            "(2 s) the API server applies failurePolicy: nodes born ungated (Ignore) or "
            "refused (Fail).",
            "Check the reconciler pods' CPU and the record lookups "
            "(nodegate_webhook_record_lookups_total by result).",
        ),
        _alert(
            "NodegateWebhookRecordLookupsFailing",
            "sum(rate(nodegate_webhook_record_lookups_total"
            f'{{{ns},result=~"error|timeout|unreadable"}}[10m])) > 0',
            "15m",
            "info",
            "The webhook could not read some persisted-label records: those nodes were born "
            "without their persisted labels (the reconciler restores them after).",
            "Check the reconciler's RBAC (get on its namespace's ConfigMaps) and the API "
            "server's latency; unreadable records are quarantined (nodegate labels list).",
        ),
        _alert(
            "NodegateOciListingStale",
            f"max(nodegate_oci_last_poll_timestamp_seconds{{{ns}}}) > 0 and "
            f"time() - max(nodegate_oci_last_poll_timestamp_seconds{{{ns}}}) > 600",
            "5m",
            "warning",
            "The OCI instance listing has not answered for every compartment in over 10 "
            "minutes: preemptions and maintenance reboots go unseen on some nodes.",
            "Read nodegate_oci_errors_total by kind and the leader's 'ListInstances failed' "
            "log (auth: the IAM policy or the workload identity; not_found: a compartment OCID; "
            "throttled: a longer --oci-poll-seconds); docs/reconciler.md, 'OCI instance events'.",
        ),
        _alert(
            "NodegateOciErrors",
            f"sum by (kind) (increase(nodegate_oci_errors_total{{{ns}}}[10m])) > 0",
            "15m",
            "warning",
            "OCI instance conditions keep failing ({{ $labels.kind }}) for 15 minutes.",
            "setup or auth: check the reconciler's OCI auth and IAM policy; write: its RBAC "
            "(patch on nodes/status); the leader's log says each kind once, with the error.",
        ),
        _alert(
            "NodegateLoopFailed",
            f"max(nodegate_loop_failed{{{ns}}}) == 1",
            "2m",
            "critical",
            "A reconciler loop ended unexpectedly; /healthz fails and the pod will restart.",
            "Read the logs of the failing pod (the loop is in the 'loop' label).",
        ),
    ]
    return reconciler + (_api_server_webhook_alerts() if webhook else [])


def _api_server_webhook_alerts() -> list[dict[str, Any]]:
    """What only the API server sees: calls to the webhook that failed (process down, no
    endpoint, TLS or caBundle mismatch, timeout). The reconciler's own metrics stay silent."""
    hook = f'name="{WEBHOOK_NAME}"'
    return [
        _alert(
            "NodegateWebhookFailingOpen",
            f"sum(increase(apiserver_admission_webhook_fail_open_count{{{hook}}}[10m])) > 0",
            "1m",
            "warning",
            f"The API server could not call the Node webhook {WEBHOOK_NAME} and, under "
            "failurePolicy Ignore, admitted nodes unchanged: born without their startup gates "
            "and persisted labels.",
            "Check the webhook Service's endpoints and the reconciler pods, and the API "
            "server's 'failed calling webhook' message (certificate, caBundle, timeout). The "
            "reconciler restores labels after; backfill (if on) gates idle nodes.",
        ),
        _alert(
            "NodegateWebhookRefusingNodes",
            "sum(increase(apiserver_admission_webhook_rejection_count"
            f'{{{hook},error_type="calling_webhook_error"}}[10m])) > 0',
            "1m",
            "critical",
            f"The API server could not call the Node webhook {WEBHOOK_NAME} and, under "
            "failurePolicy Fail, refused node registrations: new nodes cannot join.",
            "Check the webhook Service's endpoints and the reconciler pods, and the API "
            "server's 'failed calling webhook' message (certificate, caBundle, timeout). To "
            "let nodes join meanwhile, set the configuration's failurePolicy to Ignore.",
        ),
    ]


def prometheus_rule(settings: DeploySettings) -> Manifest:
    """The alerts as a monitoring.coreos.com/v1 PrometheusRule."""
    assert settings.prometheus_rule is not None
    rules = alert_rules(settings.namespace, webhook=settings.webhook is not None)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": settings.name,
            "namespace": settings.namespace,
            "labels": {**settings.labels, **settings.prometheus_rule.labels},
        },
        "spec": {"groups": [{"name": "nodegate", "rules": rules}]},
    }


def monitors(settings: DeploySettings) -> list[Manifest]:
    """The Prometheus Operator's two ways of scraping the same /metrics, each when it is on: a
    monitoring.coreos.com/v1 ServiceMonitor for the metrics Service, a PodMonitor for the pods'
    http port. They differ in kind, the port they name and what their endpoints list is called."""
    kinds = (
        ("ServiceMonitor", settings.service_monitor, "http-metrics", "endpoints"),
        ("PodMonitor", settings.pod_monitor, "http", "podMetricsEndpoints"),
    )
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": kind,
            "metadata": {
                "name": settings.name,
                "namespace": settings.namespace,
                "labels": {**settings.labels, **monitor.labels},
            },
            "spec": {
                "selector": {"matchLabels": settings.selector},
                "namespaceSelector": {"matchNames": [settings.namespace]},
                endpoints: [{"port": port, "path": "/metrics", "interval": monitor.interval}],
            },
        }
        for kind, monitor, port, endpoints in kinds
        if monitor is not None
    ]
