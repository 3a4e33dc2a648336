"""Parse a rules file once, at the edge, into a typed `NodeRules` — or every problem in it.

ruamel.yaml is used (not PyYAML) because it keeps line/column marks for every key and refuses
duplicate keys, which is what lets each error name its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError

from nodegate.core.crosschecks import cross_rule_problems, pool_problems
from nodegate.core.errors import DocPath, Problem, RulesError
from nodegate.core.located_errors import located_errors
from nodegate.core.model import NodeRules

Positions = dict[DocPath, tuple[int, int]]


def load_rules(path: str | Path) -> NodeRules:
    """Read and validate a rules file; raise RulesError listing every problem."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise RulesError([Problem(0, 0, source, (), f"cannot read file: {err.strerror}")]) from err
    return parse_rules(text, source)


def parse_rules(text: str, source: str = "<rules>") -> NodeRules:
    """Validate rules given as YAML text; `source` names it in error messages."""
    data, positions = _read_yaml(text, source)
    return rules_from_data(data, source, positions)


def rules_from_data(data: Any, source: str, positions: Positions | None = None) -> NodeRules:
    """Validate rules already parsed into plain data (e.g. Pulumi structured config)."""
    positions = positions or {}
    if not isinstance(data, dict):
        found = "an empty document" if data is None else f"a {type(data).__name__}"
        raise RulesError(
            [
                Problem(
                    *positions.get((), (1, 1)),
                    source,
                    (),
                    f"expected a NodeRules mapping (apiVersion: nodegate.dev/v1, kind: NodeRules, "
                    f"...), found {found}",
                )
            ]
        )
    problems = [
        Problem(*_position(positions, path), source, path, message)
        for path, message in cross_rule_problems(data)
    ]
    try:
        rules = NodeRules.model_validate(data)
    except ValidationError as err:
        problems += [
            Problem(*_position(positions, e.path), source, e.path, e.message)
            for e in located_errors(err, NodeRules)
        ]
        raise RulesError(problems) from err
    problems += [
        Problem(*_position(positions, path), source, path, message)
        for path, message in pool_problems(rules)
    ]
    if problems:
        raise RulesError(problems)
    return rules


def _read_yaml(text: str, source: str) -> tuple[Any, Positions]:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        tree = yaml.load(text)
    except DuplicateKeyError as err:
        mark = err.problem_mark
        key = str(err.problem).split('"')[1] if '"' in str(err.problem) else "?"
        first = err.context_mark.line + 1 if err.context_mark else 0
        raise RulesError(
            [
                Problem(
                    mark.line + 1 if mark else 0,
                    mark.column + 1 if mark else 0,
                    source,
                    (),
                    f"duplicate key '{key}' (the mapping starts at line {first}); a key may "
                    "appear once per mapping: merge the two entries",
                )
            ]
        ) from err
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = " ".join(filter(None, [err.context, err.problem]))
        raise RulesError(
            [
                Problem(
                    mark.line + 1 if mark else 0,
                    mark.column + 1 if mark else 0,
                    source,
                    (),
                    f"YAML syntax error: {what}",
                )
            ]
        ) from err
    positions: Positions = {(): (1, 1)}
    return _plain(tree, (), positions), positions


def _plain(node: Any, path: DocPath, positions: Positions) -> Any:
    """ruamel's round-trip objects to plain Python, recording where each key/item stood."""
    if isinstance(node, CommentedMap):
        result: dict[Any, Any] = {}
        for key, value in node.items():
            line, col = node.lc.key(key)
            child = (*path, str(key))
            positions[child] = (line + 1, col + 1)
            result[str(key) if not isinstance(key, int | bool) else key] = _plain(
                value, child, positions
            )
        return result
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            line, col = node.lc.item(index)
            positions[(*path, index)] = (line + 1, col + 1)
            items.append(_plain(value, (*path, index), positions))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return str(node)


def _position(positions: Positions, path: DocPath) -> tuple[int, int]:
    for end in range(len(path), -1, -1):
        if path[:end] in positions:
            return positions[path[:end]]
    return (0, 0)
