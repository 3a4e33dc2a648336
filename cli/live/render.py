"""Tables that read well at 80 columns and at 160, colour only on a terminal.

A column holding names, taints or labels never wraps (a taint split mid-word is unreadable);
only prose columns (`why`, a message) wrap, at spaces. When even that does not fit the terminal,
each row is printed as a short block of `column: value` lines instead of a squeezed table.
rich colours only when it writes to a terminal, so pipes and CI logs get plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Column:
    name: str
    wrap: bool = False
    """Prose: may wrap at spaces. Others never wrap."""
    right: bool = False


def print_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Text]],
    title: str | None = None,
) -> None:
    """`rows` (plain text, never read as markup; a `Text` keeps its style) as a table if it fits
    the console, else as blocks."""
    if title:
        console.print(Text(title, style="bold"))
    if not rows:
        console.print(Text("  (none)", style="dim"))
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(
            column.name,
            no_wrap=not column.wrap,
            overflow="fold" if column.wrap else "ellipsis",
            justify="right" if column.right else "left",
        )
    for row in rows:
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    if Measurement.get(console, console.options, table).minimum <= console.width:
        console.print(table)
        return
    for row in rows:
        if str(row[0]):
            console.print(Text(str(row[0]), style="bold"))
        for column, cell in zip(columns[1:], row[1:], strict=True):
            if str(cell):
                console.print(Text.assemble(f"  {column.name}: ", cell))


def print_facts(console: Console, facts: Sequence[tuple[str, str]]) -> None:
    """`name  value` lines; values wrap at spaces, aligned under each other."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in facts:
        table.add_row(name, Text(value))
    console.print(table)
