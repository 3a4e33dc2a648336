"""The Deployment's container args are real `nodegate reconcile` flags, read as meant."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.manifests.args import ReconcileFlags
from tests.unit.manifests.support import build, one


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

    assert settings.rules_configmap == "ops/nodegate-rules"
    assert settings.rules_file is None
    assert settings.http_port == 9090
    assert settings.leader_election.enabled is True
    assert settings.leader_election.lease_namespace == "ops"
    assert settings.leader_election.lease_name == "nodegate-reconciler"


def test_a_misspelt_flag_is_refused_by_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodegate.cli import reconcile_cmd

    monkeypatch.setattr(reconcile_cmd, "run", lambda settings: 0)

    result = CliRunner().invoke(app, ["reconcile", "--rules-config-map=a/b"])

    assert result.exit_code == 2


def test_flags_are_written_as_kebab_case_options() -> None:
    flags = ReconcileFlags(
        rules_configmap="ns/rules", lease_namespace="ns", lease_name="l", http_port=1
    )

    assert flags.argv() == [
        "--rules-configmap=ns/rules",
        "--lease-namespace=ns",
        "--lease-name=l",
        "--http-port=1",
    ]
