"""A parameter left out builds no pydantic coercion (`cli/lazy_coercion.py`), and the command
receives what typer's own coercion gives it, left out or given."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer import _click as click
from typer.core import TyperGroup, _TyperParameter

from nodegate.cli.help_format import Command, typer_app
from nodegate.cli.lazy_coercion import CoercedWhenGiven


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def command(cls: type[Command] | None) -> tuple[TyperGroup, dict[str, Any]]:
    """A command taking one of each kind of parameter nodegate's commands take, and what it
    received; `cls=None`: typer's own command class, as typer builds it."""
    received: dict[str, Any] = {}

    def run(
        files: Annotated[list[Path] | None, typer.Argument()] = None,
        count: Annotated[int | None, typer.Option()] = None,
        names: Annotated[list[str] | None, typer.Option("--name")] = None,
        out: Annotated[Path, typer.Option()] = Path("plan.txt"),
        colour: Annotated[Colour, typer.Option()] = Colour.red,
        seconds: Annotated[float, typer.Option(min=0)] = 1.5,
        dry_run: Annotated[bool, typer.Option("--dry-run/--no-dry-run")] = False,
    ) -> None:
        received.update(
            files=files,
            count=count,
            names=names,
            out=out,
            colour=colour,
            seconds=seconds,
            dry_run=dry_run,
        )

    if cls is None:
        app = typer.Typer()
        app.command("run")(run)
    else:
        app = typer_app()
        app.command("run", cls=cls)(run)
    app.command("other")(lambda: None)  # two commands: `run` is a subcommand
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return group, received


def invoke(cls: type[Command] | None, args: list[str]) -> dict[str, Any]:
    group, received = command(cls)
    group.main(["run", *args], prog_name="nodegate", standalone_mode=False)
    return {name: (value, type(value)) for name, value in received.items()}


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["a.yaml", "b.yaml", "--count", "3", "--name", "x", "--name", "y", "--out", "o.txt"],
        ["--colour", "blue", "--seconds", "2", "--dry-run"],
    ],
    ids=["none-given", "given", "choice-number-flag"],
)
def test_the_command_receives_what_typers_own_coercion_gives(args: list[str]) -> None:
    assert invoke(Command, args) == invoke(None, args)


def test_a_value_out_of_range_is_refused_as_typer_refuses_it() -> None:
    with pytest.raises(click.exceptions.BadParameter, match="greater than or equal to 0"):
        invoke(Command, ["--seconds", "-1"])


def test_a_parameter_left_out_builds_no_coercion() -> None:
    group, _ = command(Command)
    group.main(["run", "--count", "3"], prog_name="nodegate", standalone_mode=False)
    run = group.get_command(click.Context(group), "run")
    assert run is not None

    coercions = {
        param.name: param._runtime_param
        for param in run.params
        if isinstance(param, _TyperParameter)
    }
    built = {
        name: bool(coercion.built)
        for name, coercion in coercions.items()
        if isinstance(coercion, CoercedWhenGiven)
    }

    assert built == {
        "files": False,
        "count": True,
        "names": False,
        "out": True,  # its default is a value: coerced as typer coerces a default
        "colour": True,
        "seconds": True,
        "dry_run": False,  # a flag's bool is passed as it is (typer's own shortcut)
    }


def test_a_tabs_parse_converts_nothing() -> None:
    # click parses the words before the cursor with resilient_parsing to complete the next one.
    group, _ = command(Command)
    run = group.get_command(click.Context(group), "run")
    assert run is not None

    ctx = run.make_context("run", ["--count", "3", "--colour", "blue"], resilient_parsing=True)

    assert (ctx.params["count"], ctx.params["colour"], ctx.params["files"]) == ("3", "blue", ())
    assert [p.name for p in run.params if p.name and _built(p)] == []


def _built(param: click.Parameter) -> bool:
    coercion = param._runtime_param if isinstance(param, _TyperParameter) else None
    return isinstance(coercion, CoercedWhenGiven) and bool(coercion.built)
