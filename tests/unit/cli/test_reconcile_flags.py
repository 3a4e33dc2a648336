"""`nodegate reconcile`'s flags are the settings model's fields: one per field, each with the
field's default and docstring, parsed back into exactly those fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from nodegate.cli import reconcile_cmd
from nodegate.cli.lazy_group import LazyCommand
from nodegate.cli.main import app
from nodegate.core.text.flags import flags
from nodegate.reconciler.settings import ReconcilerSettings

runner = CliRunner()


def _leaf_fields(model: type[BaseModel], path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every settings field that holds a value (nested settings models walked into)."""
    leaves: set[tuple[str, ...]] = set()
    for name, field in model.model_fields.items():
        nested = [
            a
            for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        leaves |= _leaf_fields(nested[0], (*path, name)) if nested else {(*path, name)}
    return leaves


def _cli_options() -> dict[str, TyperOption]:
    """The reconcile command's options as its parser sees them, by name (`--no-x` included)."""
    command = typer.main.get_command(app)
    assert isinstance(command, TyperGroup)
    listed = command.commands["reconcile"]
    assert isinstance(listed, LazyCommand)  # imported when it runs: load it as running it would
    reconcile = listed.load()
    return {
        opt.lstrip("-"): param
        for param in reconcile.params
        if isinstance(param, TyperOption)
        for opt in (*param.opts, *param.secondary_opts)
    }


def _settings_from(args: list[str], monkeypatch: pytest.MonkeyPatch) -> ReconcilerSettings:
    captured: list[ReconcilerSettings] = []

    def fake_run(settings: ReconcilerSettings) -> int:
        captured.append(settings)
        return 0

    monkeypatch.setattr(reconcile_cmd, "run", fake_run)
    result = runner.invoke(app, ["reconcile", *args])
    assert result.exit_code == 0, result.output
    return captured[0]


def test_every_settings_field_has_a_flag_the_cli_offers() -> None:
    specs = flags(ReconcilerSettings)
    options = _cli_options()

    assert {spec.path for spec in specs} == _leaf_fields(ReconcilerSettings)
    assert [spec.name for spec in specs if spec.name not in options] == []


def test_every_flag_shows_its_fields_default_and_docstring() -> None:
    options = _cli_options()
    for spec in flags(ReconcilerSettings):
        option = options[spec.name]
        assert option.help is not None
        assert option.help.startswith(spec.help), spec.name
        assert option.default == spec.default or (spec.repeatable and not option.default)


def test_the_existing_flags_keep_their_names() -> None:
    # Scripts, the shipped manifests and the Ansible role pass these.
    names = set(_cli_options())
    assert {
        "kubeconfig",
        "rules-file",
        "rules-configmap",
        "rules-key",
        "dry-run",
        "resync-seconds",
        "workers",
        "http-port",
        "leader-elect",
        "no-leader-elect",
        "lease-namespace",
        "lease-name",
        "lease-duration-seconds",
        "renew-deadline-seconds",
        "retry-period-seconds",
        "write-qps",
        "write-burst",
        "max-untaint-share",
        "confirm-rules",
        "state-namespace",
        "list-page-size",
        "webhook-port",
        "webhook-service",
        "webhook-host",
        "webhook-configuration",
        "webhook-tls-secret",
        "webhook-cert-dir",
    } <= names


def test_flags_left_out_take_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _settings_from(["--rules-configmap=ns/rules"], monkeypatch)

    expected = ReconcilerSettings(rules_configmap="ns/rules")
    identity = {"leader_election": {"identity"}}
    assert parsed.model_dump(exclude=identity) == expected.model_dump(exclude=identity)
    assert parsed.webhook is None


def test_leader_election_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _settings_from(["--rules-file=r.yaml", "--no-leader-elect"], monkeypatch)

    assert parsed.leader_election.enabled is False
    assert parsed.rules_file == Path("r.yaml")


def test_webhook_port_serves_the_webhook_with_every_repeated_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _settings_from(
        [
            "--rules-configmap=ns/rules",
            "--webhook-port=0",
            "--webhook-host=127.0.0.1",
            "--webhook-host=localhost",
            "--webhook-cert-dir=/certs",
        ],
        monkeypatch,
    )

    assert parsed.webhook is not None
    assert (parsed.webhook.port, parsed.webhook.hosts) == (0, ("127.0.0.1", "localhost"))
    assert parsed.webhook.cert_dir == Path("/certs")


def test_webhook_flags_without_webhook_port_serve_no_webhook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _settings_from(["--rules-configmap=ns/rules", "--webhook-service=x"], monkeypatch)

    assert parsed.webhook is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers=0"], "--workers: Input should be greater than or equal to 1"),
        (["--webhook-port=70000"], "--webhook-port: Input should be less than or equal to 65535"),
        (
            ["--lease-duration-seconds=3"],
            "need leaseDuration > renewDeadline > 1.2 * retryPeriod",
        ),
    ],
    ids=["workers", "webhook-port", "lease-timings"],
)
def test_an_invalid_value_names_its_flag_and_exits_2(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(reconcile_cmd, "run", ran.append)

    result = runner.invoke(app, ["reconcile", "--rules-configmap=ns/rules", *args])

    assert result.exit_code == 2
    assert result.stderr == f"nodegate reconcile: {message}\n"
    assert ran == []


def test_log_level_and_format_are_flags_with_their_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _settings_from(
        ["--rules-file=r.yaml", "--log-level=debug", "--log-format=text"], monkeypatch
    )

    assert (parsed.log_level, parsed.log_format) == ("debug", "text")
    assert "--log-format <json|text>" in runner.invoke(app, ["reconcile", "-h"]).stdout


def test_logs_are_json_at_info_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _settings_from(["--rules-file=r.yaml"], monkeypatch)

    assert (parsed.log_level, parsed.log_format) == ("info", "json")


@pytest.mark.parametrize(
    ("flag", "offered"),
    [("--log-format=xml", "'json', 'text'"), ("--log-level=trace", "'debug', 'info'")],
    ids=["format", "level"],
)
def test_a_log_setting_outside_its_choices_is_refused_naming_them(
    flag: str, offered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(reconcile_cmd, "run", ran.append)

    result = runner.invoke(app, ["reconcile", "--rules-file=r.yaml", flag])

    assert result.exit_code == 2
    assert f"Invalid value for '{flag.partition('=')[0]}'" in result.stderr
    assert offered in result.stderr
    assert ran == []
