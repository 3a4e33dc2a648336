"""The Deployment's container args are real `nodegate reconcile` flags, read as meant."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.manifests.args import reconcile_argv
from nodegate.manifests.build import reconcile_settings
from nodegate.reconciler.settings import ReconcilerSettings
from tests.unit.manifests.support import build, one, settings


def _parse_with_the_real_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run `nodegate reconcile <args>` with the controller replaced: what settings result?"""
    from nodegate.cli import reconcile_cmd

    captured: list[Any] = []

    def fake_run(settings: Any) -> int:
        captured.append(settings)
        return 0

    monkeypatch.setattr(reconcile_cmd, "run", fake_run)
    result = CliRunner().invoke(app, ["reconcile", *args])
    assert result.exit_code == 0, result.output
    assert len(captured) == 1
    return captured[0]


def test_deployment_args_parse_into_the_intended_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    container = one(build(namespace="ops", httpPort=9090), "Deployment")["spec"]["template"][
        "spec"
    ]["containers"][0]

    settings = _parse_with_the_real_cli(container["args"], monkeypatch)

    assert settings.rules_objects is True
    assert (settings.rules_configmap, settings.rules_file) == (None, None)
    assert settings.http_port == 9090
    assert settings.leader_election.enabled is True
    assert settings.leader_election.lease_namespace == "ops"
    assert settings.leader_election.lease_name == "nodegate-reconciler"


def test_on_the_rules_configmap_the_args_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    pod = one(build(namespace="ops", rulesSource="configmap"), "Deployment")["spec"]["template"]
    settings = _parse_with_the_real_cli(pod["spec"]["containers"][0]["args"], monkeypatch)

    assert (settings.rules_configmap, settings.rules_objects) == ("ops/nodegate-rules", False)


def test_the_log_deploy_settings_are_the_reconcilers_log_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default = one(build(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    asked = one(build(logLevel="warning", logFormat="text"), "Deployment")["spec"]["template"][
        "spec"
    ]["containers"][0]

    assert {"--log-level=info", "--log-format=json"} <= set(default["args"])
    settings = _parse_with_the_real_cli(asked["args"], monkeypatch)
    assert (settings.log_level, settings.log_format) == ("warning", "text")


def test_a_misspelt_flag_is_refused_by_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodegate.cli import reconcile_cmd

    monkeypatch.setattr(reconcile_cmd, "run", lambda settings: 0)

    result = CliRunner().invoke(app, ["reconcile", "--rules-config-map=a/b"])

    assert result.exit_code == 2


def test_flags_are_written_as_kebab_case_options() -> None:
    argv = reconcile_argv(
        {
            "rules_configmap": "ns/rules",
            "http_port": 1,
            "leader_election": {"lease_namespace": "ns", "lease_name": "l"},
        }
    )

    assert argv == [
        "--rules-configmap=ns/rules",
        "--http-port=1",
        "--lease-name=l",
        "--lease-namespace=ns",
    ]


DEPLOYMENTS = {
    "defaults": {},
    "namespace-and-port": {"namespace": "ops", "httpPort": 9090},
    "own-lease": {"leaderElection": {"leaseName": "ng-lease"}},
    "webhook-self-signed": {"webhook": {"port": 10250}},
    "webhook-cert-manager": {"webhook": {"certManager": {"name": "issuer"}}},
    "text-logs-at-debug": {"logLevel": "debug", "logFormat": "text"},
}


@pytest.mark.parametrize("overrides", DEPLOYMENTS.values(), ids=DEPLOYMENTS.keys())
def test_deployment_args_round_trip_through_the_cli_into_the_same_settings(
    overrides: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = reconcile_settings(settings(**overrides))
    container = one(build(**overrides), "Deployment")["spec"]["template"]["spec"]["containers"][0]

    parsed = _parse_with_the_real_cli(container["args"], monkeypatch)

    identity = {"leader_election": {"identity"}}
    assert parsed.model_dump(exclude=identity) == ReconcilerSettings.model_validate(
        values
    ).model_dump(exclude=identity)


def test_settings_the_cli_would_refuse_never_become_deployment_args() -> None:
    with pytest.raises(ValueError, match="namespace/name"):
        reconcile_argv({"rules_configmap": "no-namespace"})
