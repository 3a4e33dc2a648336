"""The click the CLI builds on is typer's own copy, reached by typer's public names: a typer
that reshapes its private `typer._click` fails here, in one place, not in every command."""

from __future__ import annotations

import pytest
from typer import _click as typers_click  # the test alone compares with the private module
from typer._click.shell_completion import CompletionItem

from nodegate.cli import click_api


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Command", typers_click.Command),
        ("HelpFormatter", typers_click.HelpFormatter),
        ("Parameter", typers_click.Parameter),
        ("CompletionItem", CompletionItem),
    ],
    ids=["Command", "HelpFormatter", "Parameter", "CompletionItem"],
)
def test_each_name_is_the_class_of_the_click_typer_runs_on(name: str, expected: type) -> None:
    assert getattr(click_api, name) is expected


def test_the_context_is_a_click_context_of_typers_copy() -> None:
    assert issubclass(click_api.Context, typers_click.Context)
