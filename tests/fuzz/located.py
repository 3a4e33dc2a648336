"""The property every reader of outside input must keep, shared by the whole tier:
it returns, or it raises `RulesError` whose problems point into the input."""

from __future__ import annotations

import re
from collections.abc import Callable

from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_input import MAX_BYTES
from nodegate.migrate.conversion import Conversion, to_yaml

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def assert_located(err: RulesError, data: bytes, source: str) -> None:
    """Every problem names the source and a real place in it: line and column from 1, the
    line at most one past the last (a parser reports the end of the stream there)."""
    assert err.problems, "a RulesError must carry at least one problem"
    lines = len(_LINE_BREAK.split(data)) + 1
    for problem in err.problems:
        assert problem.source == source, problem
        assert problem.message, problem
        if len(data) > MAX_BYTES:
            continue  # the size refusal names the whole input, not a place in it
        assert problem.line >= 1, f"no line: {problem}"
        assert problem.column >= 1, f"no column: {problem}"
        assert problem.line <= lines, f"line {problem.line} past the end ({lines}): {problem}"


def rules_or_refusal(convert: Callable[[], Conversion], tool: str) -> None:
    """A `nodegate migrate <tool>` conversion gives rules it signs as its own, or refuses with
    problems that say something."""
    try:
        text = to_yaml(convert())
    except RulesError as err:
        assert err.problems and all(str(p) for p in err.problems)
    else:
        assert text.startswith(f"# Made by `nodegate migrate {tool}`")
