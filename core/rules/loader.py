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
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML

from nodegate.core.rules.autoscaler_checks import autoscaler_findings
from nodegate.core.rules.crosschecks import cross_rule_problems, pool_problems
from nodegate.core.rules.model import API_VERSION, KIND, NodeRules
from nodegate.core.rules.rules_object import object_shape, position
from nodegate.core.text.errors import DocPath, Problem, RulesError, Severity
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
    prefix: DocPath = ()
    """Where the rules stand in the document: `("spec",)` in a NodeRules object."""
    hints: tuple[str, ...] = ()
    """How to bring the file up to date (a file of the shape before NodeRules objects)."""

    def problem(self, path: DocPath, message: str, warning: bool = False) -> Problem:
        """A problem found in these rules by a check that needs more than the file (the
        DaemonSets `nodegate validate` is given), located as the file's own are."""
        severity: Severity = "warning" if warning else "error"
        return Problem(
            *position(self.positions, path), self.source, self.prefix + path, message, severity
        )


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
    tree, positions = read_yaml(data, source, keep_going=True)
    return check_rules_data(tree, source, positions)


def parse_rules(data: str | bytes, source: str = "<rules>") -> NodeRules:
    """Validate rules given as YAML, raw bytes or text, from any source (a file, a ConfigMap
    value, a mounted file); `source` names it in error messages. Every refusal, from a byte
    that is not UTF-8 to an alias bomb, is a RulesError (see `nodegate.core.text.yaml_input`)."""
    tree, positions = read_yaml(data, source, keep_going=True)
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
        return cls(text, parse_rules(text, source))

    def as_object(self, default_name: str) -> dict[str, Any]:
        """The rules as a NodeRules object (plain data, ready to apply): the document's own
        name and spec, or, for a file of the shape before objects, its rules under spec and
        `default_name`."""
        tree, positions = read_yaml(self.text, "<rules>")
        shape = object_shape(tree, positions)
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": shape.name or default_name},
            "spec": {k: v for k, v in shape.rules.items() if k not in ("apiVersion", "kind")},
        }

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
    """`rules_from_data`, keeping the warnings: every problem of the object and of its rules
    (its spec beside its apiVersion and kind) at its place in the document."""
    if positions is None:  # not from read_yaml: hold it to the same depth and size bounds
        check_limits(data, source)
        positions = Positions()
    if not isinstance(data, dict):
        found = "an empty document" if data is None else f"a {type(data).__name__}"
        message = (
            "expected a NodeRules mapping (apiVersion: nodegate.dev/v1, kind: NodeRules, ...), "
            f"found {found}"
        )
        raise RulesError([Problem(*positions.get((), (1, 1)), source, (), message)])
    problems = [*positions.problems]  # the reader's, where it could go on (repeated keys)
    if is_rules_list(data) and not problems:
        return _check_list(data["items"], source, positions)
    if (foreign := foreign_document(data)) is not None:  # its fields would only be noise
        raise RulesError([*problems, Problem(*position(positions, ("kind",)), source, *foreign)])
    shape = object_shape(data, positions)
    problems += [Problem(*position(positions, p), source, p, m) for p, m in shape.found]
    warned = [Problem(*position(positions, p), source, p, m, "warning") for p, m in shape.warnings]

    def at(path: DocPath, message: str, severity: Severity = "error") -> Problem:
        where = position(shape.positions, path)
        return Problem(*where, source, shape.document_path(path), message, severity)

    problems += [at(path, message) for path, message in cross_rule_problems(shape.rules)]
    try:
        rules = NodeRules.model_validate(shape.rules)
    except ValidationError as err:
        located = located_errors(err, NodeRules, shape.positions.written)
        raise RulesError([*problems, *(at(e.path, e.message) for e in located)]) from err
    problems += [at(path, message) for path, message in pool_problems(rules)]
    findings = [at(f.path, f.message, f.severity) for f in autoscaler_findings(rules)]
    problems += [p for p in findings if p.severity == "error"]
    if problems:
        raise RulesError(problems)
    warned += [p for p in findings if p.severity == "warning"]
    return Checked(
        rules, tuple(sorted(set(warned))), source, shape.positions, shape.prefix, shape.hints
    )


def is_rules_list(data: dict[Any, Any]) -> bool:
    """A List of NodeRules objects (`kubectl get noderules -o yaml`, the status record's rules
    in force)."""
    items = data.get("items")
    return (
        data.get("kind") == "List"
        and isinstance(items, list)
        and bool(items)
        and all(isinstance(i, dict) and i.get("kind") == KIND for i in items)
    )


def _check_list(items: list[dict[Any, Any]], source: str, positions: Positions) -> Checked:
    """The objects merged (`merge`): each problem of one object, or a conflict between two, is
    located at the object."""
    # Here, not at the top: the merge checks each object with this module.
    from nodegate.core.rules.merge import merge, object_of_document  # noqa: PLC0415

    objects = [object_of_document(item) for item in items]
    merged = merge(objects, {})
    problems = [
        Problem(*position(positions, ("items", index)), source, ("items", index), message)
        for index, obj in enumerate(objects)
        for verdict in [merged.verdicts[obj.name]]
        for message in (*verdict.problems, *([verdict.conflict] if verdict.conflict else []))
    ]
    if len({o.name for o in objects}) != len(objects):
        problems.append(
            Problem(*positions.get((), (1, 1)), source, ("items",), "two objects share a name")
        )
    if problems:
        raise RulesError(problems)
    return Checked(merged.rules, (), source, positions)


MIGRATED_KINDS = {"NodeReadinessRule": "node-readiness-controller"}
"""Other tools' Kubernetes kinds `nodegate migrate` converts, with its subcommand."""


def foreign_document(data: dict[Any, Any]) -> tuple[DocPath, str] | None:
    """What a Kubernetes object that is not NodeRules is, and how to get rules from it: another
    tool's rule (`nodegate migrate`), a ConfigMap holding rules text, a List of either (as
    `kubectl get -o yaml` prints it); None for anything else (a NodeRules document, right or
    wrong, is for the model to check)."""
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind == KIND or not isinstance(kind, str) or not isinstance(api_version, str):
        return None
    if api_version.startswith(API_VERSION.partition("/")[0] + "/"):
        return None  # nodegate's own group: a misspelt kind is the model's to name
    what = f"'{kind}' ({api_version})"
    migrate = (
        "another tool's settings convert with `nodegate migrate` (`nodegate migrate --help` "
        "lists the tools)"
    )
    items = data.get("items")
    if kind == "List" and isinstance(items, list) and items and isinstance(items[0], dict):
        inner = foreign_document(items[0])
        if inner is not None:
            return ("kind",), f"{inner[1]} (the first of this List's {len(items)} items)"
    if kind in MIGRATED_KINDS:
        tool = MIGRATED_KINDS[kind]
        return ("kind",), (
            f"{what} is {tool}'s rule, not nodegate's: convert it with `nodegate migrate "
            f"{tool} FILE > rules.yaml` (one FILE may hold several, or the List kubectl "
            "prints), then validate rules.yaml"
        )
    if kind == "ConfigMap":
        values = data.get("data")
        held = sorted(
            str(k)
            for k, v in (values.items() if isinstance(values, dict) else ())
            if isinstance(v, str) and f"kind: {KIND}" in v
        )
        if held:
            escaped = held[0].replace(".", "\\.")  # jsonpath: a dot in a key is escaped
            return ("kind",), (
                f"{what} holds the rules, under its key '{held[0]}': validate that text, e.g. "
                f"`kubectl get configmap NAME -o jsonpath='{{.data.{escaped}}}' > rules.yaml`"
            )
        return ("kind",), (
            f"{what} holds no NodeRules under any key, and a rules file is apiVersion: "
            f"{API_VERSION}, kind: {KIND}; {migrate}"
        )
    return ("kind",), (
        f"{what} is not a rules file (apiVersion: {API_VERSION}, kind: {KIND}); {migrate}"
    )
