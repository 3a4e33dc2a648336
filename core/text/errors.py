"""Validation problems a platform engineer can act on: file, line, column, path, message."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import total_ordering
from typing import Literal

DocPath = tuple[str | int, ...]
Severity = Literal["error", "warning"]


def format_path(path: DocPath) -> str:
    """`labelTaints[2].taint.effect`; keys that are not plain words are quoted."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text or "(document)"


@total_ordering
@dataclass(frozen=True)
class Problem:
    """One thing wrong with a rules file. Line and column are 1-based; 0 means unknown."""

    line: int
    column: int
    source: str
    path: DocPath
    message: str
    severity: Severity = "error"
    """A warning is printed (`FILE:LINE:COL: warning: path: message`) but does not refuse the
    rules; every other problem does."""

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}:{self.column}" if self.line else self.source
        kind = "warning: " if self.severity == "warning" else ""
        return f"{where}: {kind}{format_path(self.path)}: {self.message}"

    def __lt__(self, other: Problem) -> bool:
        return _order(self) < _order(other)


class RulesError(ValueError):
    """A rules file that must not reach the cluster. Carries every problem found, not just one."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(sorted(set(problems)))
        super().__init__("\n".join(str(p) for p in self.problems))


def _order(problem: Problem) -> tuple[object, ...]:
    """By place, then path, message and severity; a key read as a number (a label `1:` from
    Ansible's or another reader's data) sorts before the words beside it instead of failing to
    compare, wherever problems are sorted (errors, and the warnings the loader and validate
    print)."""
    path = tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in problem.path)
    return (problem.line, problem.column, problem.source, path, problem.message, problem.severity)
