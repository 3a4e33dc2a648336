"""The parts of click the CLI builds on, each reached through a name typer makes public.

typer (0.29) runs on a copy of click it carries as a private module, `typer._click`, and exports
few of its names. The CLI subclasses click's help formatter, context and command
(help_format.py) and annotates with click's Command, Context and Parameter; here each is taken
from typer's public API at run time, so no module of the CLI imports the private one, and a
typer that reshapes it fails here, in one place (tests/unit/cli/test_click_api.py), not in
every command. Type checkers read the same classes from typer's copy of click, which has no
public stub: that import is for them alone.

typer stays bounded (<0.30, pyproject.toml): cli/lazy_coercion.py builds on typer's internals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter, Parameter
else:
    Context = typer.Context
    """typer's documented Context, click's with nothing added."""
    HelpFormatter = typer.Context.formatter_class
    """click's documented hook: the class a Context formats help with."""
    Command = TyperCommand.__base__
    """The click Command typer's public TyperCommand is."""
    Parameter = typer.CallbackParam.__base__
    """The click Parameter typer's public CallbackParam is."""

__all__ = ["Command", "Context", "HelpFormatter", "Parameter"]
