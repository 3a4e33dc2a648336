"""`--help` in click's plain notation, not typer's internals: arguments as `FILES...`, a
repeatable option's type as `<path>` with "Repeatable." in its help."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from nodegate.cli.help_format import plain_term, plain_usage
from nodegate.cli.main import app

runner = CliRunner()
COMMANDS = [
    [],
    ["validate"],
    ["explain"],
    ["plan"],
    ["render"],
    ["manifests"],
    ["reconcile"],
    ["migrate"],
    ["migrate", "nidhogg"],
    ["migrate", "node-readiness-controller"],
    ["migrate", "tainter"],
    ["labels"],
    ["labels", "forget"],
]


def help_of(command: list[str]) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "nodegate")
def test_help_shows_no_python_type_and_no_braces_around_an_argument(command: list[str]) -> None:
    text = help_of(command)

    assert not re.search(r"<list\[|<[A-Z]\w*>|\{[a-z][\w-]*\}", text), text


def test_an_argument_is_written_in_capitals_in_the_usage_and_in_its_row() -> None:
    text = help_of(["validate"])

    assert "Usage: nodegate validate [OPTIONS] FILES...\n" in text
    assert "  FILES... <path>  Rules files to check. [required]\n" in text


def test_a_repeatable_option_shows_its_items_type_and_says_it_is_repeatable() -> None:
    text = " ".join(help_of(["explain"]).split())

    assert (
        "--ready-gate <str> Offline: treat this startup gate's init pod as Ready. Repeatable."
        in (text)
    )


@pytest.mark.parametrize(
    ("typer_usage", "plain"),
    [
        ("[OPTIONS] {files}...", "[OPTIONS] FILES..."),
        ("[OPTIONS] {config}", "[OPTIONS] CONFIG"),
        ("[OPTIONS] [node]", "[OPTIONS] [NODE]"),
        ("[OPTIONS] [NODE]", "[OPTIONS] [NODE]"),
    ],
)
def test_usage_arguments_are_as_click_writes_them(typer_usage: str, plain: str) -> None:
    assert plain_usage(typer_usage) == plain


def test_a_command_row_is_left_as_it_is() -> None:
    assert plain_term("validate", "Check rules files.") == ("validate", "Check rules files.")


def test_repeatable_goes_before_the_bracketed_default_and_is_said_once() -> None:
    assert plain_term("--host <list[str]>", "More names.  [default: a]") == (
        "--host <str>",
        "More names. Repeatable.  [default: a]",
    )
    assert plain_term("--host <list[str]>", "More names (repeatable).") == (
        "--host <str>",
        "More names (repeatable).",
    )
