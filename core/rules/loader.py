"""Parse a rules file once, at the edge, into a typed `NodeRules` — or every problem in it.

Bytes and text are decoded and parsed, within limits, by `nodegate.core.text.yaml_input`
(ruamel.yaml, not PyYAML, because it keeps line/column marks for every key and refuses duplicate
keys, which is what lets each error name its line); this module turns the plain data into
`NodeRules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from ruamel.yaml import YAML

from nodegate.core.rules.autoscaler_checks import autoscaler_findings
from nodegate.core.rules.crosschecks import cross_rule_problems, pool_problems
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.located_errors import located_errors
from nodegate.core.text.yaml_input import Positions, check_limits, read_limited, read_yaml


@dataclass(frozen=True)
class Checked:
    """Valid rules and the warnings found in them (problems that do not refuse the rules)."""

    rules: NodeRules
    warnings: tuple[Problem, ...] = ()
    source: str = ""
    positions: Positions = field(default_factory=Positions)
    """Where each rule stood, for problems found later (`problem`)."""

    def problem(self, path: DocPath, message: str, warning: bool = False) -> Problem:
        """A problem found in these rules by a check that needs more than the file (the
        DaemonSets `nodegate validate` is given), located as the file's own are."""
        severity: Literal["error", "warning"] = "warning" if warning else "error"
        return Problem(*_position(self.positions, path), self.source, path, message, severity)


def load_rules(path: str | Path) -> NodeRules:
    """Read and validate a rules file; raise RulesError listing every problem."""
    return check_rules_file(path).rules


def check_rules_file(path: str | Path) -> Checked:
    """`load_rules`, keeping the warnings (for `nodegate validate`)."""
    source = str(path)
    try:
        data = read_limited(path)
    except OSError as err:
        raise RulesError([Problem(0, 0, source, (), f"cannot read file: {err.strerror}")]) from err
    tree, positions = read_yaml(data, source)
    return check_rules_data(tree, source, positions)


def parse_rules(data: str | bytes, source: str = "<rules>") -> NodeRules:
    """Validate rules given as YAML, raw bytes or text, from any source (a file, a ConfigMap
    value, a mounted file); `source` names it in error messages. Every refusal, from a byte
    that is not UTF-8 to an alias bomb, is a RulesError (see `nodegate.core.text.yaml_input`)."""
    tree, positions = read_yaml(data, source)
    return rules_from_data(tree, source, positions)


def rules_from_data(data: Any, source: str, positions: Positions | None = None) -> NodeRules:
    """Validate rules already parsed into plain data (e.g. Pulumi structured config)."""
    return check_rules_data(data, source, positions).rules


@dataclass(frozen=True)
class RulesDocument:
    """Rules text that has been validated: what the rules ConfigMap holds, byte for byte."""

    text: str
    rules: NodeRules

    @classmethod
    def parse(cls, text: str, source: str) -> RulesDocument:
        """Validate YAML text (RulesError naming `source` if it is wrong)."""
        return cls(text, parse_rules(text, source))

    @classmethod
    def from_data(cls, data: Any, source: str) -> RulesDocument:
        """Rules given as structured data (Pulumi `rulesInline`), validated, then as YAML."""
        rules = rules_from_data(data, source)
        yaml = YAML(typ="rt")  # round-trip: keeps the author's key order
        yaml.default_flow_style = False
        out = StringIO()
        yaml.dump(data, out)
        return cls(out.getvalue(), rules)


def check_rules_data(data: Any, source: str, positions: Positions | None = None) -> Checked:
    """`rules_from_data`, keeping the warnings."""
    if positions is None:  # not from read_yaml: hold it to the same depth and size bounds
        check_limits(data, source)
    positions = positions if positions is not None else Positions()
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
            for e in located_errors(err, NodeRules, positions.written)
        ]
        raise RulesError(problems) from err
    problems += [
        Problem(*_position(positions, path), source, path, message)
        for path, message in pool_problems(rules)
    ]
    findings = [
        Problem(*_position(positions, f.path), source, f.path, f.message, f.severity)
        for f in autoscaler_findings(rules)
    ]
    problems += [p for p in findings if p.severity == "error"]
    if problems:
        raise RulesError(problems)
    warnings = tuple(sorted({p for p in findings if p.severity == "warning"}))
    return Checked(rules, warnings, source, positions)


def _position(positions: Positions, path: DocPath) -> tuple[int, int]:
    for end in range(len(path), -1, -1):
        if path[:end] in positions:
            return positions[path[:end]]
    return (0, 0)
