"""What every conversion produces, and the one way it is printed: only once it validates.

A conversion is pure data: the rules document, what behaves differently from the old tool, and
the `nodegate reconcile` flags its deployment settings become. `to_yaml` writes it with the
manifests' YAML writer and reads the text back through the rules loader, so what is printed is
exactly what was checked; a refusal names the old tool's setting, not the generated rule.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from nodegate.core.objects.installation import LogLevel
from nodegate.core.rules.loader import parse_rules
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.located_errors import located_errors
from nodegate.core.text.yaml_input import Positions
from nodegate.core.text.yaml_output import dump_all
from nodegate.manifests.settings import WebhookDeploy

HEADER_WIDTH = 96
DEFAULT_LOG_LEVEL: LogLevel = "info"
"""`nodegate reconcile`'s log level when `--log-level` is left out."""


@dataclass(frozen=True)
class Place:
    """Where a setting stood in one of several input files: the file, the path in its
    document (a document index first when the file holds several), and the positions of that
    document's keys, so a refusal names its line and column."""

    source: str
    path: DocPath
    positions: Positions = field(default_factory=Positions, compare=False, repr=False)
    prefix: DocPath = ()
    """Path elements shown before `path` but not part of the document (its index)."""

    def at(self, *rest: str | int) -> Place:
        return replace(self, path=(*self.path, *rest))

    def problem(self, rest: DocPath, message: str) -> Problem:
        """A problem at `path` + `rest`, at the line of its longest known prefix."""
        path = (*self.path, *rest)
        for end in range(len(path), -1, -1):
            if path[:end] in self.positions:
                line, column = self.positions[path[:end]]
                return Problem(line, column, self.source, (*self.prefix, *path), message)
        return Problem(0, 0, self.source, (*self.prefix, *path), message)


@dataclass
class Found:
    """Problems with an input, gathered so that all are reported at once."""

    top: Place
    problems: list[Problem] = field(default_factory=list)

    def add(self, path: DocPath, message: str) -> None:
        self.problems.append(self.top.problem(path, message))

    def under(self, top: Place) -> Found:
        """This collector, with paths under `top` (another file, document or item)."""
        return Found(top, self.problems)


@dataclass(frozen=True)
class YamlFile:
    """One input file: its name and every YAML document in it, with positions."""

    source: str
    documents: tuple[tuple[Any, Positions], ...]


@dataclass(frozen=True)
class Conversion:
    """Another tool's settings as nodegate rules."""

    command: str
    """The command that made it, e.g. `nodegate migrate tainter`."""
    source: str
    """Names the input in errors: a file, or the settings the old tool read."""
    rules: dict[str, Any]
    notes: tuple[str, ...] = ()
    """What behaves differently from the old tool, one sentence or two each."""
    reconciler_flags: tuple[str, ...] = ()
    """`nodegate reconcile` flags the old tool's deployment settings become."""
    places: Mapping[DocPath, DocPath | Place] = field(default_factory=dict)
    """Path in the rules -> the old tool's setting it came from (longest prefix wins): a path
    in `source`, or a `Place` in one of several input files."""
    problems: tuple[Problem, ...] = ()
    """What the converter could not read; reported with whatever validation finds."""
    name: str | None = None
    """The NodeRules object's name (default: `from-TOOL`)."""
    webhook: Mapping[str, Any] | None = None
    """The `webhook:` deployment settings (`nodegate manifests --settings`, the stack's
    `nodegate:reconciler`) the old tool's admission webhook becomes; checked like the rules,
    printed in the header (paths in `places` start with "webhook")."""


def log_level(setting: str, nearest: tuple[LogLevel, str] | None) -> tuple[tuple[str, ...], str]:
    """The reconciler's flags (`--log-level LEVEL`, nothing for its default) and the note for
    the old tool's log level (`setting`, named with its value): `nearest` is the level nodegate
    has and why it is not the same ("": it is); None: not set, or not a level it read."""
    written = "JSON lines unless --log-format text"
    if nearest is None:
        return (), (
            f"{setting}: nodegate's is --log-level (debug, info, warning or error; logLevel in "
            f"the deploy settings), {written}."
        )
    level, why = nearest
    flags = () if level == DEFAULT_LOG_LEVEL else ("--log-level", level)
    if level == DEFAULT_LOG_LEVEL and not why:
        return flags, (
            f"{setting}: nodegate logs at info too, its default (--log-level debug, info, "
            f"warning or error; logLevel in the deploy settings), {written}."
        )
    return flags, (
        f"{setting}: --log-level {level}{why} (logLevel: {level} in the deploy settings), "
        f"{written}."
    )


def rules_document(**sections: Any) -> dict[str, Any]:
    """A NodeRules document holding `sections` (camelCase keys), in the order given."""
    return {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", **sections}


def rules_object(conversion: Conversion) -> dict[str, Any]:
    """The converted rules as a NodeRules object named after the tool they came from, so
    objects converted from several tools are applied side by side (`kubectl apply -f`)."""
    sections = {k: v for k, v in conversion.rules.items() if k not in ("apiVersion", "kind")}
    tool = conversion.command.removeprefix("nodegate migrate ").split()[0]
    return {
        "apiVersion": conversion.rules["apiVersion"],
        "kind": conversion.rules["kind"],
        "metadata": {"name": conversion.name or f"from-{tool}"},
        "spec": sections,
    }


def to_yaml(conversion: Conversion) -> str:
    """The rules as YAML, the notes as a comment header; RulesError naming the old settings if
    nodegate would refuse them."""
    text = dump_all([rules_object(conversion)], header=_header(conversion))
    problems = list(conversion.problems)
    if conversion.webhook is not None:
        try:
            WebhookDeploy.model_validate(conversion.webhook)
        # Permanent: settings the webhook would refuse, named by the old tool's setting.
        except ValidationError as err:
            refused = located_errors(err, WebhookDeploy)
            problems += [_located(conversion, ("webhook", *e.path), e.message) for e in refused]
    try:
        parse_rules(text, f"<{conversion.command}>")
    except RulesError as err:
        # A setting the converter could not read already has its own message.
        unread = {p.path for p in conversion.problems}
        located = [_located(conversion, p.path, p.message) for p in err.problems]
        problems += [p for p in located if p.path not in unread]
    if problems:
        raise RulesError(problems)
    return text


def _located(conversion: Conversion, path: DocPath, message: str) -> Problem:
    """A refusal of the generated rules, at the old tool's setting it came from. A path in
    the object's spec is taken as a path in `Conversion.rules`."""
    path = path[1:] if path[:1] == ("spec",) else path
    for end in range(len(path), 0, -1):
        place = conversion.places.get(path[:end])
        if isinstance(place, Place):
            return place.problem(path[end:], message)
        if place is not None:
            return Problem(0, 0, conversion.source, place + path[end:], message)
    return Problem(0, 0, conversion.source, path, message)


def _header(conversion: Conversion) -> str:
    lines = header_lines(f"Made by `{conversion.command}` from {conversion.source}.")
    if conversion.reconciler_flags:
        lines += header_lines("Run the reconciler with: " + " ".join(conversion.reconciler_flags))
    if conversion.webhook is not None:
        lines += header_lines(
            "Deploy the reconciler with the Node admission webhook: these settings in the file "
            "given to `nodegate manifests --settings FILE` (or in the Pulumi stack's "
            "nodegate:reconciler):"
        )
        settings = dump_all([{"webhook": dict(conversion.webhook)}])
        lines += ["  " + line for line in settings.splitlines()]
    if conversion.notes:
        lines.append("What behaves differently from before:")
        for note in conversion.notes:
            lines += header_lines(note, bullet=True)
    return "\n".join(lines)


def header_lines(text: str, bullet: bool = False) -> list[str]:
    """`text` wrapped for a YAML comment header (a "- " bullet if `bullet`): this module's, and
    the notes above `nodegate render --format karpenter-nodepool`."""
    return textwrap.wrap(
        text,
        HEADER_WIDTH,
        initial_indent="- " if bullet else "",
        subsequent_indent="  " if bullet else "",
        break_on_hyphens=False,
        break_long_words=False,
    )


def as_text(value: object) -> object:
    """A scalar as the text a Go tool reads into a string field, or a label value as the API
    holds it (YAML reads `true` or `1` as other types): numbers and booleans as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


def rule_name(text: str, taken: Sequence[str]) -> str:
    """A rule name (DNS label) made from `text`, unique among `taken`."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:50].strip("-") or "rule"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name
