"""Tainter (github.com/LasseHels/tainter): TOML matchers, each a taint plus node conditions that
must all match, into `conditionTaints`.

What Tainter does, read from its source (src/settings/mod.rs, src/reconciler/mod.rs at fd9838b):
a matcher's condition `type` and `status` are Rust regular expressions matched with
`Regex::is_match` (anywhere in the value); every condition must match some node condition; a
NoExecute taint gets `timeAdded`; a taint with the same key and effect already on the node is
left alone, whatever its value; taints are only ever added, never removed. `[server]` and
`[log]` configure its /health endpoint and its log level.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from typing import Any

from nodegate.core.objects.installation import LogLevel
from nodegate.core.text.errors import DocPath, Problem, RulesError
from nodegate.core.text.k8s_names import OUT_OF_SERVICE_TAINT
from nodegate.migrate.conversion import (
    Conversion,
    Found,
    Place,
    as_text,
    log_level,
    rule_name,
    rules_document,
)

COMMAND = "nodegate migrate tainter"
_MATCHER_KEYS = ("taint", "conditions")
_TAINT_KEYS = ("effect", "key", "value")
_CONDITION_KEYS = ("type", "status")
_LITERAL_TYPE = re.compile(r"[A-Za-z0-9_./-]+")
"""A condition type with no regex syntax in it: an exact `type`, not a `typePattern`."""
_LOG_LEVELS: dict[str, tuple[LogLevel, str]] = {
    "error": ("error", ""),
    "warn": ("warning", ""),
    "info": ("info", ""),
    "debug": ("debug", ""),
    "trace": ("debug", ", nodegate's most detailed (it writes no trace lines)"),
}
"""Tainter's `[log] max_level` (tracing's levels, any case, or 1-5 from error to trace) as
nodegate's, and why it is not the same."""
_TOML_PLACE = re.compile(r"^(?P<message>.*) \(at line (?P<line>\d+), column (?P<column>\d+)\)$")

NOTES = (
    "Tainter never removed a taint it added; so that nothing changes, every rule here says "
    "onRecovery: keep (a taint stays until someone removes it). Write onRecovery: remove to "
    "have nodegate remove it when the conditions stop matching.",
    "Tainter matched a condition's type and status anywhere in the value (Rust "
    "Regex::is_match); nodegate matches the whole value, so 'Kaput|Ruined' no longer matches "
    "'Kaputt'. Where you relied on a partial match, write '.*(?:PATTERN).*'.",
    "A node already carrying the rule's key and effect with another value: Tainter left it "
    "alone; nodegate owns key:effect and sets the rule's value.",
    "[server] host and port (Tainter's /health): nodegate serves /healthz, /readyz and "
    "/metrics on --http-port (default 8080).",
)

OUT_OF_SERVICE_NOTE = (
    f"{OUT_OF_SERVICE_TAINT}: nodegate applies it only from a rule that also requires Ready not "
    "True and another condition (it refuses the rule otherwise). AKS's VMEventScheduled is True "
    "for Freeze and Reboot events too: consider `for: 60s`, so that a node that is only "
    "restarting is not taken out of service, and a `match` on your spot pools "
    "(kubernetes.azure.com/scalesetpriority: spot)."
)


def convert_tainter(text: str, source: str) -> Conversion:
    """Tainter's TOML configuration as rules; RulesError naming the TOML place if it cannot be
    read or converted."""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise RulesError([_syntax_problem(str(err), source)]) from err
    return convert_tainter_config(config, source)


def convert_tainter_config(config: dict[str, Any], source: str) -> Conversion:
    """Tainter's configuration, already read from TOML, as rules."""
    found = _Found(Place(source, ()))
    matchers = found.tables(config.get("reconciler", {}), "matchers", ("reconciler",))
    if not matchers and not found.problems:
        found.add(("reconciler", "matchers"), "no [[reconciler.matchers]]: nothing to convert")
    rules: list[dict[str, Any]] = []
    places: dict[DocPath, DocPath] = {}
    for index, matcher in enumerate(matchers):
        at: DocPath = ("reconciler", "matchers", index)
        found.unknown_keys(matcher, _MATCHER_KEYS, at)
        taint = matcher.get("taint")
        if not isinstance(taint, dict):
            found.add((*at, "taint"), "needs a [reconciler.matchers.taint] table")
            continue
        found.unknown_keys(taint, _TAINT_KEYS, (*at, "taint"))
        tables = found.tables(matcher, "conditions", at)
        if not tables:
            if matcher.get("conditions", []) == []:  # else `tables` said what is wrong
                found.add(
                    (*at, "conditions"),
                    "no [[reconciler.matchers.conditions]]: Tainter would taint every node; a "
                    "condition rule needs at least one condition (a labelTaints rule taints "
                    "the nodes of a pool)",
                )
            continue
        rule_at: DocPath = ("conditionTaints", len(rules))
        places[rule_at] = at
        conditions = []
        for n, condition in enumerate(tables):
            found.unknown_keys(condition, _CONDITION_KEYS, (*at, "conditions", n))
            places[(*rule_at, "conditions", n, "typePattern")] = (*at, "conditions", n, "type")
            conditions.append(_condition(condition))
        name = rule_name(str(taint.get("key", "")).rpartition("/")[2], [r["name"] for r in rules])
        rules.append(
            {
                "name": name,
                "conditions": conditions,
                "taint": {k: _text(taint[k]) for k in ("key", "value", "effect") if k in taint},
                "onRecovery": "keep",
            }
        )
    server = config.get("server")
    port = str(_text(server.get("port", "8080"))) if isinstance(server, dict) else "8080"
    if not port.isdigit():
        found.add(("server", "port"), f"'{port}' is not a port number, e.g. 8080")
    flags: tuple[str, ...] = ("--http-port", port) if port.isdigit() and int(port) != 8080 else ()
    log = config.get("log")
    level = _text(log.get("max_level")) if isinstance(log, dict) else None
    nearest = _LOG_LEVELS.get(_level_name(level)) if level is not None else None
    if level is not None and nearest is None:
        found.add(
            ("log", "max_level"),
            f"'{level}' is not a level Tainter reads: error, warn, info, debug or trace (or 1-5)",
        )
    read = f"[log] max_level ({level})" if nearest else "[log] max_level"
    log_flags, log_note = log_level(read, nearest)
    shutdown = any(r["taint"].get("key") == OUT_OF_SERVICE_TAINT for r in rules)
    notes = (*NOTES[:3], log_note, *NOTES[3:])
    return Conversion(
        command=COMMAND,
        source=source,
        rules=rules_document(conditionTaints=rules),
        notes=(*notes, OUT_OF_SERVICE_NOTE) if shutdown else notes,
        reconciler_flags=(*flags, *log_flags),
        places=places,
        problems=tuple(found.problems),
    )


def _level_name(level: object) -> str:
    """A `max_level` as tracing reads it: a name in any case, or 1 (error) to 5 (trace)."""
    text = str(level).strip().lower()
    names = list(_LOG_LEVELS)
    return names[int(text) - 1] if text in ("1", "2", "3", "4", "5") else text


def _condition(condition: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {}
    if "type" in condition:
        kind = _text(condition["type"])
        literal = isinstance(kind, str) and _LITERAL_TYPE.fullmatch(kind) is not None
        converted["type" if literal else "typePattern"] = kind
    if "status" in condition:
        converted["status"] = _text(condition["status"])
    return converted


def _text(value: Any) -> Any:
    """A TOML scalar as text, as Tainter's config library (the `config` crate, `into_string`)
    reads numbers and booleans into a string field; times as ISO text. Arrays and tables stay,
    for validation to refuse."""
    if isinstance(value, datetime.date | datetime.time):  # datetime.datetime is a date
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_text(item) for item in value]
    return as_text(value)


class _Found(Found):
    """Problems with the shape of the TOML."""

    def tables(self, table: object, key: str, at: DocPath) -> list[dict[str, Any]]:
        """`[[at.key]]` as a list of tables; a problem if it is something else."""
        if not isinstance(table, dict):
            self.add(at, "must be a table")
            return []
        items = table.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            self.add((*at, key), "must be an array of tables ([[...]] in TOML)")
            return []
        return items

    def unknown_keys(self, table: dict[str, Any], known: tuple[str, ...], at: DocPath) -> None:
        for key in table:
            if key not in known:
                self.add(
                    (*at, key),
                    f"unknown key: Tainter reads only {', '.join(known)} here (and silently "
                    "ignores the rest, so check its spelling)",
                )


def _syntax_problem(message: str, source: str) -> Problem:
    place = _TOML_PLACE.match(message)
    if place is None:
        return Problem(0, 0, source, (), f"TOML syntax error: {message}")
    line, column = int(place["line"]), int(place["column"])
    return Problem(line, column, source, (), f"TOML syntax error: {place['message']}")
