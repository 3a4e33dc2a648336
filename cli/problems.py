"""How a command stops on input it cannot use: every problem of the `RulesError`, each with its
place (FILE:LINE:COL, as `nodegate validate` prints them), then its exit code.

core is imported when a command runs, not with this module: a TAB or `--help` loads neither core
nor pydantic (tests/unit/cli/test_lazy_commands.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from nodegate.core.rules.model import NodeRules


@contextmanager
def exit_on_problems(code: int = 1) -> Iterator[None]:
    """A `RulesError` raised inside: its problems on stderr, and exit `code`."""
    from nodegate.core.text.errors import RulesError  # noqa: PLC0415  (see the module docstring)

    try:
        yield
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(code) from err


def rules_or_exit(path: Path) -> NodeRules:
    """The rules of a rules file, or its problems and exit 1."""
    from nodegate.core.rules.loader import load_rules  # noqa: PLC0415  (see the module docstring)

    with exit_on_problems():
        return load_rules(path)
