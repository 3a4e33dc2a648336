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
from rich.padding import Padding
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
    if _needed_width(columns, rows) <= console.width:
        console.print(table)
        return
    for row in rows:
        if str(row[0]):
            console.print(Text(str(row[0]), style="bold"))
        for column, cell in zip(columns[1:], row[1:], strict=True):
            if not str(cell):
                continue
            one_line = f"  {column.name}: {cell}"
            if "\n" not in one_line and len(one_line) <= console.width:
                console.print(Text.assemble(f"  {column.name}: ", cell))
            else:  # the value on lines of its own, indented, so a long taint is never cut
                console.print(f"  {column.name}:")
                console.print(Padding(cell, (0, 0, 0, 4), expand=False))


GAP = 3
"""Between two columns of a SIMPLE_HEAD table without outer edges: padding, rule, padding."""


def _needed_width(columns: Sequence[Column], rows: Sequence[Sequence[str | Text]]) -> int:
    """The width at which no cell is cut: whole cells, and the longest word of prose cells."""
    widths = []
    for index, column in enumerate(columns):
        cells = [str(row[index]) for row in rows]
        if column.wrap:
            longest = max((len(word) for cell in cells for word in cell.split()), default=0)
        else:
            longest = max((len(line) for cell in cells for line in cell.splitlines()), default=0)
        widths.append(max(len(column.name), longest))
    return sum(widths) + GAP * (len(columns) - 1)


def print_facts(console: Console, facts: Sequence[tuple[str, str]]) -> None:
    """`name  value` lines; values wrap at spaces, aligned under each other."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in facts:
        table.add_row(name, Text(value))
    console.print(table)


def print_items(console: Console, items: Sequence[str], mark: str, style: str = "") -> None:
    """`  <mark> item` lines whose continuation lines hang under the item's first word."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for item in items:
        grid.add_row(f" {mark}", Text(item, style=style))
    console.print(grid)
