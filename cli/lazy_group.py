"""Commands imported when they run: `nodegate --help` or a TAB pays for no command's imports.

Each command module imports what its command needs (the Kubernetes client, the reconciler, the
webhook's cryptography, jinja2, the chart generator); imported all at once, every `nodegate`
process paid about a second before it did anything. Here a command is named in a table with its
module and its one-line help: the list in `--help` and the candidates of a TAB come from the
table, and the module is imported when the command's own context is made (it runs, or its
`--help` or a TAB on its options reads its options). So a command module imports what its
command runs on (core, pydantic, the Kubernetes client, rich) in its functions, when it runs.

click documents the pattern ("Lazily Loading Subcommands": a group's get_command imports); typer
has no lazy registration of its own, so here each table entry stands in the group's `commands`
for its command until then, and the loaded command is built by typer's public
`typer.main.get_command` / `get_group`, exactly as an eagerly registered one would be (click's
and typer's own code keep reading `group.commands`: a typo's did-you-mean lists its keys).
`tests/unit/cli/test_lazy_commands.py` loads every entry, so a moved module or a help line that
no longer matches its command's docstring fails there, not in a user's shell.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand

from nodegate.cli import click_api as click  # the click typer carries, by its public names
from nodegate.cli.help_format import Command, Group, typer_app


class LazyCommand(TyperCommand):
    """A command named by where it lives, imported when its context is first made."""

    name: str

    def __init__(self, name: str, target: str, short_help: str) -> None:
        """`target`: `module:attribute`, a command function (typer reads its options from its
        signature) or a typer app (a group of commands, such as `labels`). `short_help`: the
        line `nodegate --help` and a TAB show, the first sentence of the command's help."""
        super().__init__(name, short_help=short_help)
        self.target = target

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        found = getattr(importlib.import_module(module), attribute)
        if isinstance(found, typer.Typer):
            command: click.Command = typer.main.get_group(found)
        else:
            single = typer_app(add_completion=False)
            single.command(self.name, cls=Command)(found)
            command = typer.main.get_command(single)
        command.name = self.name
        return command

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """The command's own: running it, its `--help` and a TAB on its options start here."""
        return self.load().make_context(info_name, args, parent, **extra)


class LazyGroup(Group):
    """A command group whose `lazy_commands` are imported when they run; name the table in a
    subclass and give it to `typer_app(cls=...)`."""

    lazy_commands: tuple[LazyCommand, ...] = ()

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        for command in self.lazy_commands:
            self.add_command(command)
