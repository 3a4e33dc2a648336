"""The habits of a Unix tool: `--version`, a `version` command that says which image tag would
be deployed, and `-h` wherever `--help` is."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.manifests.settings import ImageSettings
from nodegate.manifests.version import package_version

runner = CliRunner()


def test_version_option_prints_the_version_and_exits_0() -> None:
    result = runner.invoke(app, ["--version"])

    assert result.exit_code == 0
    assert result.stdout == f"nodegate {package_version()}\n"


def test_version_option_wins_over_a_command_after_it() -> None:
    result = runner.invoke(app, ["--version", "reconcile"])

    assert result.exit_code == 0
    assert result.stdout == f"nodegate {package_version()}\n"


def test_version_command_prints_the_image_tag_the_manifests_deploy() -> None:
    deployed = ImageSettings(repository="registry.example.com/nodegate").reference

    result = runner.invoke(app, ["version"])

    assert result.exit_code == 0
    first, second = result.stdout.splitlines()
    assert first == f"nodegate {package_version()}"
    tag = second.split()[2]
    assert second.startswith(f"image tag {tag} ")
    assert deployed == f"registry.example.com/nodegate:{tag}"


@pytest.mark.parametrize(
    "command",
    [[], ["validate"], ["reconcile"], ["labels"], ["labels", "hand-over"], ["migrate", "tainter"]],
    ids=["nodegate", "validate", "reconcile", "labels", "labels-hand-over", "migrate-tainter"],
)
def test_h_is_help_everywhere(command: list[str]) -> None:
    long = runner.invoke(app, [*command, "--help"])
    short = runner.invoke(app, [*command, "-h"])

    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout
    assert "-h, --help" in short.stdout
