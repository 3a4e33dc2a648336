"""`--help` that reads well in an 80-column terminal and in a wide one.

typer's rich panels squeeze a six-column option table into the width, so at 80 columns long
flags are cut (`--rules-poll-secon…`) and help text breaks mid-word. Here help is click's plain
layout (no colour, so nothing to strip in a pipe), wrapped at spaces only: a flag, a default
(`no-dry-run`) or a path is never split, and each command's whole first sentence is shown, not
cut at the width. Lines are at most `MAX_WIDTH` wide on a wide terminal.

typer's own notation is turned into click's (`plain_usage`, `plain_term`): an argument is
`FILES...` (not `{files}...`), a repeatable option `--daemon-sets <path>` with "Repeatable." in
its help (not `<list[Path]>`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from nodegate.cli import click_api as click  # the click typer carries, by its public names
from nodegate.cli.lazy_coercion import coerce_when_given

MAX_WIDTH = 120


def wrap(text: str, width: int) -> list[str]:
    """Paragraphs (blank-line separated) filled to `width`, breaking at spaces only."""
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if lines:
            lines.append("")
        lines += textwrap.wrap(
            " ".join(paragraph.split()),
            max(width, 10),
            break_on_hyphens=False,
            break_long_words=False,
        )
    return lines


_ARGUMENT = re.compile(r"\{([a-z][\w-]*)\}|\[([a-z][\w-]*)\]")
_LIST_TYPE = re.compile(r"<list\[(\w+)\]>")
_ARGUMENT_TERM = re.compile(r"^([a-z][\w-]*)(\.\.\.)?( |$)")
REPEATABLE = "Repeatable."


def plain_usage(args: str) -> str:
    """The usage line's arguments as click writes them: `{files}...` is `FILES...`, `[node]`
    `[NODE]`."""
    return _ARGUMENT.sub(
        lambda m: m.group(1).upper() if m.group(1) else f"[{m.group(2).upper()}]", args
    )


def plain_term(term: str, text: str, argument: bool = False) -> tuple[str, str]:
    """A help row as click writes it: an `argument`'s `files... <list[Path]>` is
    `FILES... <path>`, and an option taking a list (`--daemon-sets <list[Path]>`) says it is
    repeatable. Other rows (commands) are left as they are."""
    repeatable = _LIST_TYPE.search(term) is not None
    term = _LIST_TYPE.sub(lambda m: f"<{m.group(1).lower()}>", term)
    if argument:
        term = _ARGUMENT_TERM.sub(lambda m: m.group(0).upper(), term, count=1)
    elif term.startswith("-") and repeatable and "repeatable" not in text.lower():
        said, extra, bracket = text.rpartition("  [") if text.endswith("]") else (text, "", "")
        said = f"{said} {REPEATABLE}" if said else REPEATABLE
        text = f"{said}{extra}{bracket}"
    return term, text


class HelpFormatter(click.HelpFormatter):
    def __init__(self, indent_increment: int = 2, width: int | None = None, **kw: Any) -> None:
        super().__init__(indent_increment, width, max_width=MAX_WIDTH)
        self._heading = ""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, plain_usage(args), prefix)

    def write_heading(self, heading: str) -> None:
        self._heading = heading  # which rows `write_dl` writes next (arguments, options...)
        super().write_heading(heading)

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        for line in wrap(text, self.width - self.current_indent):
            self.write(f"{indent}{line}\n" if line else "\n")

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        arguments = self._heading == "Arguments"
        rows = [plain_term(term, text, arguments) for term, text in rows]
        first_col = min(max((len(term) for term, _ in rows), default=0), col_max) + col_spacing
        indent = " " * self.current_indent
        pad = " " * (first_col + self.current_indent)
        text_width = max(self.width - first_col - self.current_indent, 20)
        for term, text in rows:
            head = f"{indent}{term:<{first_col}}"
            if len(term) > first_col - col_spacing:  # a line of its own, the text below it
                self.write(f"{indent}{term}\n")
                head = pad
            lines = wrap(text, text_width) or [""]
            self.write(f"{head}{lines[0]}".rstrip() + "\n")
            for line in lines[1:]:
                self.write(f"{pad}{line}".rstrip() + "\n")


class Context(click.Context):
    formatter_class = HelpFormatter


class _Coerced(click.Command):
    """A command (or group) that builds no pydantic adapter for options left out."""

    context_class = Context

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        coerce_when_given(params)  # a TAB or --help builds no pydantic adapter for unset options
        return params


class Command(_Coerced, TyperCommand):
    pass


class Group(_Coerced, TyperGroup):
    """A command group whose command list shows each command's whole first sentence."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def typer_app(cls: type[Group] = Group, **settings: Any) -> typer.Typer:
    """A typer app (or sub-app) with this help (`cls`: a kind of `Group`, such as
    `nodegate.cli.lazy_group.LazyGroup`); give its commands `cls=Command`."""
    return typer.Typer(cls=cls, rich_markup_mode=None, **settings)
