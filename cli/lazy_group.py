"""Commands imported when they run: `nodegate --help` or a TAB pays for no command's imports.

Each command module imports what its command needs (the Kubernetes client, the reconciler, the
webhook's cryptography, jinja2, the chart generator); imported all at once, every `nodegate`
process paid about a second before it did anything. Here a command is named in a table with its
module and its one-line help: the list in `--help` and the candidates of a TAB come from the
table, and the module is imported the first time its command is looked up.

This is click's own pattern ("Lazily Loading Subcommands" in click's documentation: a Group
whose `get_command` imports on demand); typer has no lazy registration of its own, so the group
below is that pattern on typer's group, and each loaded command is built by typer's public
`typer.main.get_command` / `get_group`, exactly as an eagerly registered one would be.
`tests/unit/cli/test_lazy_commands.py` loads every entry, so a moved module or a help line that
no longer matches its command's docstring fails there, not in a user's shell.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup

from nodegate.cli import click_api as click  # the click typer carries, by its public names
from nodegate.cli.click_api import CompletionItem
from nodegate.cli.help_format import Command, Group, typer_app


@dataclass(frozen=True)
class LazyCommand:
    """A command named by where it lives, imported when it is first looked up."""

    name: str
    target: str
    """`module:attribute`: a command function (typer reads its options from its signature) or
    a typer app (a group of commands, such as `labels`)."""
    short_help: str
    """The line `nodegate --help` and a TAB show: the first sentence of the command's help."""

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


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name: the names are known at once, each command is built (and its
    module imported) when it is first read. click's and typer's own code keep reading
    `group.commands` (a typo's did-you-mean lists its keys), so it stays a mapping."""

    def __init__(self, loaded: MutableMapping[str, click.Command], lazy: tuple[LazyCommand, ...]):
        self._loaded = dict(loaded)
        self._lazy = {command.name: command for command in lazy}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            self._loaded[name] = self._lazy[name].load()  # KeyError: no such command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._loaded
        yield from (name for name in self._lazy if name not in self._loaded)

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._lazy.keys())

    def short_help(self, name: str) -> str | None:
        """The table's line for a command not imported yet (None: look at the command)."""
        lazy = self._lazy.get(name)
        return lazy.short_help if lazy is not None and name not in self._loaded else None


class LazyGroup(Group):
    """A command group whose `lazy_commands` are imported when they are looked up; name the
    table in a subclass and give it to `typer_app(cls=...)`."""

    lazy_commands: tuple[LazyCommand, ...] = ()

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.commands = LazyCommands(self.commands, self.lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def command_help(self, ctx: click.Context, name: str) -> str | None:
        """From the table, where the command is not imported yet."""
        assert isinstance(self.commands, LazyCommands)
        line = self.commands.short_help(name)
        return line if line is not None else super().command_help(ctx, name)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        # TyperGroup's own would import every command to read its help; the group's options
        # are completed as click completes any command's.
        commands = [
            CompletionItem(name, help=line) for name, line in self.command_helps(ctx, incomplete)
        ]
        return commands + super(TyperGroup, self).shell_complete(ctx, incomplete)
