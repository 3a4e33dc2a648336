"""`nodegate demo`: the whole lifecycle on the embedded local control plane, no cloud account.

The rules are checked here; the control plane and the story are development tooling
(`nodegate.demo` and `nodegate.localcluster`, in the `nodegate-harness` distribution under
harness/), which the product package and the image do not ship. They are imported only when the
demo runs, so `nodegate reconcile` never loads them; without them the command says how to get
them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer

from nodegate.cli.inputs import exit_on_problems

HARNESS = "nodegate.demo"
"""The harness package `nodegate demo` plays (harness/demo in the repository)."""

HARNESS_MISSING = (
    "nodegate demo: the demo harness is not installed (it is development tooling, not part of "
    "the nodegate package or image). From a clone of the repository run `make demo`, or "
    "`pip install -e ./harness` next to nodegate."
)


def demo(
    rules: Annotated[
        Path | None,
        typer.Option(help="Rules file to play (default: the shipped examples/rules.yaml)."),
    ] = None,
    keep: Annotated[
        bool, typer.Option(help="Leave the cluster running and print how to reach it.")
    ] = False,
) -> None:
    """Play nodegate's whole job on a local cluster: born tainted, gated, kept true."""
    # Imported when it runs: a TAB on the options reads this module only.
    from rich.console import Console  # noqa: PLC0415

    from nodegate.core.rules.loader import parse_rules  # noqa: PLC0415

    text = (
        rules.read_text(encoding="utf-8")
        if rules
        else files("nodegate.examples").joinpath("rules.yaml").read_text("utf-8")
    )
    source = str(rules or "examples/rules.yaml")
    with exit_on_problems():
        parse_rules(text, source)
    try:
        # Lazy on purpose: the harness is not shipped with the product (see the module doc).
        from nodegate.demo.play import play  # noqa: PLC0415
    # Only the harness itself missing is explained; a broken harness shows its own error.
    except ModuleNotFoundError as err:
        if err.name not in {HARNESS, f"{HARNESS}.play"}:
            raise
        typer.echo(HARNESS_MISSING, err=True)
        raise typer.Exit(2) from err
    if not play(text, Console(), keep=keep):
        raise typer.Exit(1)
