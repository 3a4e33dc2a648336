"""The click the CLI builds on is typer's own copy, reached by typer's public names: a typer
that reshapes its private `typer._click` fails here, in one place, not in every command."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer import _click as typers_click  # the test alone compares with the private module

from nodegate.cli import click_api


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Command", typers_click.Command),
        ("HelpFormatter", typers_click.HelpFormatter),
        ("Parameter", typers_click.Parameter),
    ],
    ids=["Command", "HelpFormatter", "Parameter"],
)
def test_each_name_is_the_class_of_the_click_typer_runs_on(name: str, expected: type) -> None:
    assert getattr(click_api, name) is expected


def test_the_context_is_a_click_context_of_typers_copy() -> None:
    assert issubclass(click_api.Context, typers_click.Context)


def _runtime_imports_of_typers_click(path: Path) -> list[int]:
    """Lines of `path` that import typer's private click outside an `if TYPE_CHECKING:` block."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for_checkers: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for inner in node.body:
                for_checkers |= {n.lineno for n in ast.walk(inner) if hasattr(n, "lineno")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        private = any(n == "typer._click" or n.startswith("typer._click.") for n in names)
        if private and node.lineno not in for_checkers:
            found.append(node.lineno)
    return found


def test_no_module_of_the_cli_imports_typers_private_click_at_run_time() -> None:
    # A typer that moves `typer._click` then breaks cli/click_api.py's test above, not the
    # import of every command.
    cli = Path(click_api.__file__).resolve().parent
    found = {
        str(path.relative_to(cli)): lines
        for path in sorted(cli.rglob("*.py"))
        if (lines := _runtime_imports_of_typers_click(path))
    }
    assert found == {}
