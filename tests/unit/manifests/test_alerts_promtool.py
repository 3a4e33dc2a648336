"""The shipped alerts, tested as Prometheus users test theirs: `promtool check rules` on the
PrometheusRule's groups, and `promtool test rules` with, for every alert, one series that makes
it fire (labels and rendered annotations checked) and one healthy series that keeps it quiet.

The rules file is the PrometheusRule `nodegate manifests --prometheus-rule` ships (webhook on, so
the API server's alerts are in), written as a Prometheus rule file. promtool is built from the
Prometheus Go module and cached (`make promtool`, nodegate.localcluster.build); without it these
tests fail, and say why, unless the machine has no Go at all.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodegate.localcluster.build import ensure_promtool
from nodegate.manifests.webhook import WEBHOOK_NAME
from tests.unit.manifests.support import build, built_tool, one
from tests.unit.manifests.test_manifests_observability import dashboard_expressions

NS = "nodegate-system"
"""The namespace the default settings deploy to, which every reconciler alert selects."""


def _shipped_groups() -> list[dict[str, Any]]:
    rule = one(build(prometheusRule={}, webhook={}), "PrometheusRule")
    assert rule["metadata"]["namespace"] == NS
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


GROUPS = _shipped_groups()
RULES: dict[str, dict[str, Any]] = {r["alert"]: r for g in GROUPS for r in g["rules"]}


@dataclass(frozen=True)
class Scenario:
    """Series (promtool's expanding notation, one sample a minute) and when to evaluate."""

    series: dict[str, str]
    at: str
    fires_with: dict[str, str] | None = None
    """The alert's own labels (beyond severity) when it should fire; None: it must stay quiet."""


def _ns(metric: str, **labels: str) -> str:
    """A reconciler series: the namespace label Prometheus's pod scrape adds, plus `labels`."""
    pairs = {"namespace": NS, "pod": "nodegate-0", **labels}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def _apiserver(metric: str, **labels: str) -> str:
    pairs = {"job": "apiserver", **labels}
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


REVIEW_BUCKETS = ("0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5")


def _review_latency(seconds: float, per_minute: int, minutes: int) -> dict[str, str]:
    """nodegate_webhook_review_duration_seconds_bucket when every review takes `seconds`."""
    series = {}
    for le in (*REVIEW_BUCKETS, "+Inf"):
        within = le == "+Inf" or float(le) >= seconds
        series[_ns("nodegate_webhook_review_duration_seconds_bucket", le=le)] = (
            f"0+{per_minute}x{minutes}" if within else f"0x{minutes}"
        )
    return series


def _gated_ages(all_gated: int, young: int, nodes: int, minutes: int) -> dict[str, str]:
    """The gated-age histogram (cumulative buckets) and the node count, held steady."""
    age = "nodegate_gated_node_age_seconds_bucket"
    return {
        _ns(age, le="600.0"): f"{young}x{minutes}",
        _ns(age, le="+Inf"): f"{all_gated}x{minutes}",
        _ns("nodegate_nodes"): f"{nodes}x{minutes}",
    }


CASES: dict[str, tuple[Scenario, Scenario]] = {
    # (fires on, stays quiet on)
    "NodegateNoLeader": (
        Scenario(
            {
                _ns("nodegate_is_leader", pod="nodegate-0"): "0x20",
                _ns("nodegate_is_leader", pod="nodegate-1"): "0x20",
            },
            at="10m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_is_leader", pod="nodegate-0"): "1x20",
                _ns("nodegate_is_leader", pod="nodegate-1"): "0x20",
            },
            at="10m",
        ),
    ),
    "NodegateRulesRejected": (
        Scenario({_ns("nodegate_rules_last_update_valid"): "1x5 0x15"}, at="15m", fires_with={}),
        Scenario({_ns("nodegate_rules_last_update_valid"): "1x20"}, at="15m"),
    ),
    "NodegateFenceViewStale": (
        Scenario(
            {_ns("nodegate_writes_fenced_total", verdict="stale_view"): "0x5 1+1x10"},
            at="10m",
            fires_with={},
        ),
        Scenario(  # a takeover's first writes, refused while the view catches up
            {_ns("nodegate_writes_fenced_total", verdict="lagging"): "0x5 2x10"}, at="10m"
        ),
    ),
    "NodegateStateUnavailable": (
        Scenario(
            {_ns("nodegate_errors_total", kind="ledger"): "0+12x30"},
            at="25m",
            fires_with={"kind": "ledger"},
        ),
        Scenario(  # one failed write, then none: not an outage
            {_ns("nodegate_errors_total", kind="ledger"): "0x5 1x25"}, at="25m"
        ),
    ),
    "NodegateServerClockDisagrees": (
        # A lasting step of 15 minutes, followed at 1 %: still far off after 10 minutes.
        Scenario(
            {_ns("nodegate_server_clock_disagreement_seconds"): "0.2x5 900-6x20"},
            at="25m",
            fires_with={},
        ),
        # One stepped reading, then agreement again: nothing to say.
        Scenario(
            {_ns("nodegate_server_clock_disagreement_seconds"): "0.2x5 900 -0.3x20"}, at="25m"
        ),
    ),
    "NodegateNodeAgentCannotRun": (
        Scenario(
            {
                _ns(
                    "nodegate_node_agents_cannot_run",
                    rule="logs",
                    daemonset="logging/fluent-bit",
                    action="wait",
                ): "0x5 2x20"
            },
            at="25m",
            fires_with={"rule": "logs", "daemonset": "logging/fluent-bit"},
        ),
        Scenario(  # skipped, not held: the info alert's business, not this one's
            {
                _ns(
                    "nodegate_node_agents_cannot_run",
                    rule="logs",
                    daemonset="logging/fluent-bit",
                    action="skip",
                ): "0x5 2x20"
            },
            at="25m",
        ),
    ),
    "NodegateNodeAgentSkipped": (
        Scenario(
            {
                _ns(
                    "nodegate_node_agents_cannot_run",
                    rule="gpu",
                    daemonset="gpu/driver",
                    action="skip",
                ): "0x5 3x80"
            },
            at="85m",
            fires_with={"rule": "gpu", "daemonset": "gpu/driver"},
        ),
        Scenario(  # a node that could not run it for a while, then could
            {
                _ns(
                    "nodegate_node_agents_cannot_run",
                    rule="gpu",
                    daemonset="gpu/driver",
                    action="skip",
                ): "0x5 1x30 0x50"
            },
            at="85m",
        ),
    ),
    "NodegateRulesHeld": (
        Scenario({_ns("nodegate_rules_held"): "0x5 1x25"}, at="25m", fires_with={}),
        Scenario({_ns("nodegate_rules_held"): "0x5 1x5 0x20"}, at="25m"),  # confirmed in time
    ),
    "NodegateEvictionsWaiting": (
        Scenario(
            {_ns("nodegate_evictions_waiting", rule="gpu-health"): "0x2 4x10"},
            at="8m",
            fires_with={"rule": "gpu-health"},
        ),
        Scenario({_ns("nodegate_evictions_waiting", rule="gpu-health"): "0x12"}, at="8m"),
    ),
    "NodegateNodeWriteErrors": (
        Scenario(
            {
                _ns("nodegate_node_writes_total", result="ok"): "0+10x40",
                _ns("nodegate_node_writes_total", result="error"): "0+1x40",
            },
            at="30m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_node_writes_total", result="ok"): "0+10x40",
                _ns("nodegate_node_writes_total", result="error"): "3x40",
            },
            at="30m",
        ),
    ),
    "NodegatePermanentErrors": (
        Scenario(
            {
                _ns("nodegate_errors_total", kind="temporary"): "0+2x30",
                _ns("nodegate_errors_total", kind="permanent"): "0x10 1x20",
            },
            at="15m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_errors_total", kind="temporary"): "0+2x30",
                _ns("nodegate_errors_total", kind="permanent"): "0x30",
            },
            at="15m",
        ),
    ),
    "NodegateLabelRestoresFailing": (
        Scenario(
            {
                _ns("nodegate_label_restores_total"): "5x60",
                _ns("nodegate_label_restore_failures_total", reason="api_error"): "0+1x60",
            },
            at="45m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_label_restores_total"): "0+1x60",
                _ns("nodegate_label_restore_failures_total", reason="api_error"): "0x60",
            },
            at="45m",
        ),
    ),
    "NodegateWritesThrottled": (
        # 48 s of every minute waiting: 0.8 of the time.
        Scenario(
            {_ns("nodegate_write_throttle_seconds_total"): "0+48x60"}, at="40m", fires_with={}
        ),
        Scenario({_ns("nodegate_write_throttle_seconds_total"): "0+6x60"}, at="40m"),
    ),
    "NodegateStartupGatesTimingOut": (
        Scenario(
            {_ns("nodegate_gate_timeouts_total", gate="cni", action="lift"): "0x10 1x20"},
            at="15m",
            fires_with={},
        ),
        Scenario(
            {_ns("nodegate_gate_timeouts_total", gate="cni", action="lift"): "0x30"}, at="15m"
        ),
    ),
    "NodegateGateHeldNearAutoscalerStartupWindow": (
        # The oldest gated node ages a minute a minute: past 10 minutes at 11m.
        Scenario(
            {_ns("nodegate_gate_oldest_seconds", gate="cni", pool="gpu"): "0+60x20"},
            at="15m",
            fires_with={"gate": "cni", "pool": "gpu"},
        ),
        # Nodes come and lift their gate within 5 minutes.
        Scenario(
            {_ns("nodegate_gate_oldest_seconds", gate="cni", pool="gpu"): "0+60x5 0+60x5 0+60x9"},
            at="15m",
        ),
    ),
    "NodegateGatedShareNearAutoscalerHalt": (
        # 8 of 20 nodes gated for over 10 minutes: more than 3, and 40 % > 30 %.
        Scenario(_gated_ages(all_gated=10, young=2, nodes=20, minutes=15), at="10m", fires_with={}),
        # 10 of 20 nodes gated, all of them for under 10 minutes.
        Scenario(_gated_ages(all_gated=10, young=10, nodes=20, minutes=15), at="10m"),
    ),
    "NodegateWebhookErrors": (
        Scenario(
            {
                _ns("nodegate_webhook_reviews_total", result="patched"): "0+5x30",
                _ns("nodegate_webhook_reviews_total", result="error"): "0+1x30",
            },
            at="20m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_webhook_reviews_total", result="patched"): "0+5x30",
                _ns("nodegate_webhook_reviews_total", result="error"): "0x30",
            },
            at="20m",
        ),
    ),
    "NodegateWebhookSlow": (
        Scenario(_review_latency(2.0, per_minute=10, minutes=40), at="30m", fires_with={}),
        Scenario(_review_latency(0.04, per_minute=10, minutes=40), at="30m"),
    ),
    "NodegateWebhookRecordLookupsFailing": (
        Scenario(
            {
                _ns("nodegate_webhook_record_lookups_total", result="found"): "0+5x40",
                _ns("nodegate_webhook_record_lookups_total", result="timeout"): "0+1x40",
            },
            at="30m",
            fires_with={},
        ),
        Scenario(
            {
                _ns("nodegate_webhook_record_lookups_total", result="found"): "0+5x40",
                _ns("nodegate_webhook_record_lookups_total", result="absent"): "0+5x40",
            },
            at="30m",
        ),
    ),
    # The gauge is unix seconds; promtool's clock starts at 0, one sample a minute.
    "NodegateOciListingStale": (
        Scenario(
            {_ns("nodegate_oci_last_poll_timestamp_seconds"): "60+60x4 300x25"},
            at="25m",  # stale past 600 s from 16m, for 5m
            fires_with={},
        ),
        Scenario({_ns("nodegate_oci_last_poll_timestamp_seconds"): "60+60x29"}, at="25m"),
    ),
    "NodegateOciErrors": (
        Scenario(
            {_ns("nodegate_oci_errors_total", kind="auth"): "0+1x30"},
            at="25m",
            fires_with={"kind": "auth"},
        ),
        # One throttled listing, retried and answered: not an alert.
        Scenario({_ns("nodegate_oci_errors_total", kind="throttled"): "0x5 1x25"}, at="25m"),
    ),
    "NodegateLoopFailed": (
        Scenario({_ns("nodegate_loop_failed", loop="nodes"): "0x2 1x10"}, at="8m", fires_with={}),
        Scenario({_ns("nodegate_loop_failed", loop="nodes"): "0x12"}, at="8m"),
    ),
    "NodegateWebhookFailingOpen": (
        Scenario(
            {
                _apiserver(
                    "apiserver_admission_webhook_fail_open_count", name=WEBHOOK_NAME, type="admit"
                ): "0x5 1x15",
            },
            at="10m",
            fires_with={},
        ),
        # Another webhook failing open is not nodegate's.
        Scenario(
            {
                _apiserver(
                    "apiserver_admission_webhook_fail_open_count", name=WEBHOOK_NAME, type="admit"
                ): "0x20",
                _apiserver(
                    "apiserver_admission_webhook_fail_open_count",
                    name="other.example.com",
                    type="admit",
                ): "0+1x20",
            },
            at="10m",
        ),
    ),
    "NodegateWebhookRefusingNodes": (
        Scenario(
            {
                _apiserver(
                    "apiserver_admission_webhook_rejection_count",
                    name=WEBHOOK_NAME,
                    error_type="calling_webhook_error",
                    rejection_code="500",
                    type="admit",
                ): "0x5 1x15",
            },
            at="10m",
            fires_with={},
        ),
        # The webhook answering and refusing (error_type no_error) is its decision, not a
        # failed call.
        Scenario(
            {
                _apiserver(
                    "apiserver_admission_webhook_rejection_count",
                    name=WEBHOOK_NAME,
                    error_type="no_error",
                    rejection_code="403",
                    type="admit",
                ): "0+1x20",
            },
            at="10m",
        ),
    ),
}


def _render(template: str, labels: dict[str, str]) -> str:
    """The annotation as Prometheus renders it: these templates only read `$labels.<name>`."""
    rendered = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)
    assert "{{" not in rendered, f"a template this test cannot render: {template}"
    return rendered


def _unit_test(alert: str, scenario: Scenario) -> dict[str, Any]:
    """One promtool test: the scenario's series and what `alert` must show at its eval time."""
    expected: list[dict[str, Any]] = []
    if scenario.fires_with is not None:
        rule = RULES[alert]
        labels = {**scenario.fires_with, **rule["labels"]}
        expected.append(
            {
                "exp_labels": labels,
                "exp_annotations": {
                    key: _render(value, labels) for key, value in rule["annotations"].items()
                },
            }
        )
    return {
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in scenario.series.items()],
        "alert_rule_test": [{"eval_time": scenario.at, "alertname": alert, "exp_alerts": expected}],
    }


@pytest.fixture(scope="module")
def promtool() -> Path:
    return built_tool(ensure_promtool, "promtool", "promtool")


@pytest.fixture(scope="module")
def rules_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("alerts") / "nodegate-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": GROUPS}, sort_keys=False), encoding="utf-8")
    yield path


def _promtool(promtool: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *map(str, args)], capture_output=True, text=True, check=False, timeout=60
    )


def _run_tests(promtool: Path, rules_file: Path, alert: str, scenario: Scenario) -> str:
    """promtool's output for one scenario of one alert; fails the test when promtool does."""
    tests = (
        rules_file.parent
        / f"{alert}-{'fires' if scenario.fires_with is not None else 'quiet'}.yaml"
    )
    document = {
        "rule_files": [rules_file.name],
        "evaluation_interval": "1m",
        "tests": [_unit_test(alert, scenario)],
    }
    tests.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    result = _promtool(promtool, "test", "rules", tests)
    assert result.returncode == 0, (
        f"promtool test rules {tests.name}:\n{result.stdout}{result.stderr}"
    )
    return result.stdout


def test_every_shipped_alert_has_a_firing_and_a_quiet_case() -> None:
    assert set(CASES) == set(RULES)


def test_promtool_checks_the_shipped_rules_clean(promtool: Path, rules_file: Path) -> None:
    result = _promtool(promtool, "check", "rules", "--lint=all", "--lint-fatal", rules_file)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in result.stdout


@pytest.mark.parametrize("alert", sorted(CASES))
def test_the_alert_fires_on_the_series_it_is_about(
    promtool: Path, rules_file: Path, alert: str
) -> None:
    firing, _ = CASES[alert]

    assert "SUCCESS" in _run_tests(promtool, rules_file, alert, firing)


@pytest.mark.parametrize("alert", sorted(CASES))
def test_the_alert_stays_quiet_on_a_healthy_series(
    promtool: Path, rules_file: Path, alert: str
) -> None:
    _, quiet = CASES[alert]

    assert "SUCCESS" in _run_tests(promtool, rules_file, alert, quiet)


def test_the_oci_listing_alert_stays_quiet_where_oci_conditions_are_off(
    promtool: Path, rules_file: Path
) -> None:
    # Every reconciler exports the gauge, at 0 until a full poll (none with OCI off).
    off = Scenario({_ns("nodegate_oci_last_poll_timestamp_seconds"): "0x29"}, at="25m")

    assert "SUCCESS" in _run_tests(promtool, rules_file, "NodegateOciListingStale", off)


def test_promtool_parses_every_dashboard_expression(promtool: Path, tmp_path: Path) -> None:
    """Each panel's PromQL as a recording rule (Grafana's variables given values), so a typo
    in the dashboard fails here rather than as an empty panel."""
    grafana = {"$namespace": NS, "$__rate_interval": "1m"}
    recorded = []
    for number, panel_expr in enumerate(dashboard_expressions()):
        expr = panel_expr
        for variable, value in grafana.items():
            expr = expr.replace(variable, value)
        recorded.append({"record": f"nodegate:dashboard_panel_{number}", "expr": expr})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))

    result = _promtool(promtool, "check", "rules", path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(recorded)} rules found" in result.stdout
