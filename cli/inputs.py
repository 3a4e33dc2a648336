"""What the commands read from files (and `--now`'s time), and how they stop on input they
cannot use: every problem of the `RulesError`, each with its place (FILE:LINE:COL, as `nodegate
validate` prints them), then their exit code.

core is imported when a command runs, not with this module (cli/lazy_group.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from nodegate.core.rules.model import NodeRules
    from nodegate.core.rules.node import NodeState


@contextmanager
def exit_on_problems(code: int = 1) -> Iterator[None]:
    """A `RulesError` raised inside: its problems on stderr, and exit `code`."""
    from nodegate.core.text.errors import RulesError  # noqa: PLC0415  (see the docstring)

    try:
        yield
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(code) from err


def rules_or_exit(path: Path) -> NodeRules:
    """The rules of a rules file, or its problems and exit 1."""
    from nodegate.core.rules.loader import load_rules  # noqa: PLC0415  (see the docstring)

    with exit_on_problems():
        return load_rules(path)


def read_or_exit(path: Path, code: int = 1, prefix: str = "", what: str = "file") -> bytes:
    """The file's bytes (bounded: `read_limited`), or `prefix`, which, why, and exit `code`."""
    from nodegate.core.text.yaml_input import read_limited  # noqa: PLC0415  (see the docstring)

    try:
        return read_limited(path)
    except OSError as err:
        typer.echo(f"{prefix}{path}: cannot read {what}: {err.strerror}", err=True)
        raise typer.Exit(code) from err


def nodes_in(path: Path, code: int = 1, prefix: str = "") -> list[NodeState]:
    """The Nodes of a node file (one Node, or a List as `kubectl get nodes -o yaml` prints it);
    unreadable: `prefix` and why, or every problem with its place, and exit `code`."""
    from nodegate.core.rules.node_file import parse_nodes  # noqa: PLC0415  (see the docstring)

    data = read_or_exit(path, code, prefix, "node file")
    with exit_on_problems(code):
        return parse_nodes(data, str(path))


def time_or_exit(now: str, prefix: str) -> datetime:
    """--now's time (one without a zone is UTC's), or `prefix`, how to write one, and exit 1."""
    from nodegate.core.rules.node import parse_time  # noqa: PLC0415  (see the docstring)

    try:
        at = parse_time(now)
    except ValueError:  # not a time fromisoformat reads
        at = None
    if at is None:
        example = "2026-11-21T12:00:00Z"
        typer.echo(f"{prefix}--now {now!r} is not an RFC 3339 time: write e.g. {example}", err=True)
        raise typer.Exit(1)
    return at


def objects_in(paths: Iterable[Path], kind: str, prefix: str = "") -> list[dict[str, Any]]:
    """The objects of `kind` in these YAML streams (a List's items too), as kubectl prints
    them; an unreadable file: `prefix` and why, or every problem with its place, and exit 1."""
    from nodegate.core.text.yaml_input import read_yaml_documents  # noqa: PLC0415

    found: list[dict[str, Any]] = []
    for path in paths:
        data = read_or_exit(path, prefix=prefix)
        with exit_on_problems():
            documents = read_yaml_documents(data, str(path))
        for document, _ in documents:
            items = document.get("items") if isinstance(document, dict) else None
            for item in items if isinstance(items, list) else [document]:
                if isinstance(item, dict) and item.get("kind") == kind:
                    found.append(item)
    return found
