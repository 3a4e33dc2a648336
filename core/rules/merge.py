"""The rules in force are every accepted NodeRules object together. Pure.

Each object is checked on its own (`loader.check_rules_data`), then merged with the others.
A rule name, a pool name, a taint key or a cluster-wide setting (`evictionBudget`,
`persistentLabels`) belongs to one object: a later claim of it is a conflict, reported on the
object that made it, whose version in force (if any) stands. "Later" is decided without any
clock: what is in force stands against a change; among new claims, the object created first
wins (then the name). An object whose new generation is refused or conflicts keeps its last
good version in force; a deleted object takes only what it owned with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from nodegate.core.rules.loader import check_rules_data, is_rules_list
from nodegate.core.rules.model import API_VERSION, CRD_NAME, KIND, NodeRules
from nodegate.core.text.errors import RulesError, format_path
from nodegate.core.text.yaml_input import read_yaml
from nodegate.core.text.yaml_output import dump_all
from nodegate.defaults.names import CONFIRM_ANNOTATION

OBJECTS_SOURCE = "NodeRules objects"
"""The rules source the reconciler names (status record, logs) when it reads the objects."""
Claim = tuple[str, ...]


def confirm_on_crd(digest: str) -> str:
    """How a cluster admin confirms a held update of rules read from objects: an annotation on
    the NodeRules CRD, which only cluster admins may write (a team may annotate its own object,
    so an annotation there would let it approve its own change)."""
    return f"kubectl annotate --overwrite crd {CRD_NAME} {CONFIRM_ANNOTATION}={digest}"


SETTINGS = ("evictionBudget", "persistentLabels")
"""Cluster-wide settings: one object may set each."""


@dataclass(frozen=True)
class RulesObject:
    """One NodeRules object as read from the API server (or a part of the rules in force)."""

    name: str
    generation: int
    spec: Any
    created: str = ""
    """Its creationTimestamp (RFC 3339 sorts as text): orders new claims."""

    def document(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.name, "generation": self.generation},
            "spec": self.spec if self.spec is not None else {},
        }

    def same_version(self, other: RulesObject | None) -> bool:
        return other is not None and (other.generation, other.spec) == (self.generation, self.spec)


@dataclass(frozen=True)
class Verdict:
    """What became of one object's current generation."""

    generation: int
    problems: tuple[str, ...] = ()
    """Why it is refused (each located in the object); empty: it is valid."""
    conflict: str = ""
    """Why a valid generation is not merged (the claim and the object that holds it)."""
    in_force: int | None = None
    """The generation of it that is merged (None: none)."""

    @property
    def accepted(self) -> bool:
        return not self.problems

    @property
    def conflicting(self) -> bool:
        return bool(self.conflict)


@dataclass(frozen=True)
class Merged:
    parts: tuple[RulesObject, ...]
    """The versions merged, by name."""
    rules: NodeRules
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The rules in force as one document (a List of the objects merged): what the status
        record keeps and what a digest confirms; it reads back as these rules."""
        return rules_list_text(self.parts)


def object_of_document(document: Mapping[str, Any]) -> RulesObject:
    """The parts of a NodeRules object the merge reads, as the API server returns it (or an
    item of a List)."""
    found = document.get("metadata")
    metadata: Mapping[str, Any] = found if isinstance(found, dict) else {}
    generation = metadata.get("generation")
    return RulesObject(
        str(metadata.get("name", "")),
        generation if isinstance(generation, int) else 0,
        document.get("spec"),
        str(metadata.get("creationTimestamp") or ""),
    )


def parts_of(text: str, source: str) -> tuple[RulesObject, ...]:
    """The objects a rules-in-force text holds when it is a List of them (the status record of
    rules read as objects); () for the text of one rules file."""
    data, _ = read_yaml(text, source)
    if not isinstance(data, dict) or not is_rules_list(data):
        return ()
    return tuple(object_of_document(item) for item in data["items"])


def rules_list_text(parts: Iterable[RulesObject]) -> str:
    items = [part.document() for part in sorted(parts, key=lambda p: p.name)]
    return dump_all([{"apiVersion": "v1", "kind": "List", "items": items}])


def merge(objects: Iterable[RulesObject], standing: Mapping[str, RulesObject]) -> Merged:
    """Merge the objects as they are now, given the versions of them in force (`standing`)."""
    current = {o.name: o for o in objects}
    merged = {name: part for name, part in standing.items() if name in current}
    verdicts: dict[str, Verdict] = {}
    changed = True
    while changed:  # a claim released by an object merged in this pass goes to a waiting one
        changed = False
        for obj in sorted(current.values(), key=lambda o: (o.created, o.name)):
            problems = _problems_of(obj.name, json.dumps(obj.spec, sort_keys=True, default=str))
            if problems:
                verdicts[obj.name] = Verdict(obj.generation, problems)
                continue
            if obj.same_version(merged.get(obj.name)):
                verdicts.pop(obj.name, None)
                continue
            trial = {**merged, obj.name: obj}
            conflict = _conflict(obj, trial) or _together_problems(trial)
            if conflict:
                verdicts[obj.name] = Verdict(obj.generation, conflict=conflict)
                continue
            merged, changed = trial, True
            verdicts.pop(obj.name, None)
    for obj in current.values():
        part = merged.get(obj.name)
        verdict = verdicts.get(obj.name, Verdict(obj.generation))
        verdicts[obj.name] = replace(verdict, in_force=part.generation if part else None)
    parts = tuple(sorted(merged.values(), key=lambda p: p.name))
    return Merged(parts, merged_rules(parts), verdicts)


def merged_rules(parts: Iterable[RulesObject]) -> NodeRules:
    """The rules of parts that merge (RulesError naming what does not)."""
    return check_rules_data(_together(parts), "the NodeRules objects together").rules


@lru_cache(maxsize=1024)
def _problems_of(name: str, spec: str) -> tuple[str, ...]:
    """An object checked once per version: every watch event merges every object again."""
    document = RulesObject(name, 0, json.loads(spec)).document()
    try:
        check_rules_data(document, f"NodeRules {name}")
    except RulesError as err:
        return tuple(f"{format_path(p.path)}: {p.message}" for p in err.problems)
    return ()


def claims(spec: Any) -> dict[Claim, str]:
    """What an object's rules claim for themselves, each with the field that claims it."""
    found: dict[Claim, str] = {}
    if not isinstance(spec, dict):
        return found
    for section, value in spec.items():
        if section in SETTINGS:
            found[("setting", str(section))] = str(section)
        if not isinstance(value, list):
            continue
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            where = f"{section}[{index}]"
            if isinstance(name := item.get("name"), str):
                kind = "pool" if section == "nodePools" else "rule"
                found.setdefault((kind, name), where)
            taint = item.get("taint")
            if isinstance(taint, dict) and isinstance(key := taint.get("key"), str):
                found.setdefault(("taint", key), f"{where}.taint")
            # A gate lifts the taints of its former keys, and writes its annotations.
            for index_, former in enumerate(item.get("formerKeys") or ()):
                if isinstance(former, str):
                    found.setdefault(("taint", former), f"{where}.formerKeys[{index_}]")
            completion = item.get("completionAnnotation")
            if isinstance(completion, dict) and isinstance(key := completion.get("key"), str):
                found.setdefault(("annotation", key), f"{where}.completionAnnotation")
            if isinstance(key := item.get("firstReadyAnnotation"), str):
                found.setdefault(("annotation", key), f"{where}.firstReadyAnnotation")
    return found


def _describe(claim: Claim) -> str:
    kind, name = claim
    described = {
        "setting": f"the setting {name}",
        "taint": f"the taint key {name}",
        "annotation": f"the node annotation {name}",
    }
    return described.get(kind, f"the {kind} name '{name}'")


def _conflict(obj: RulesObject, trial: Mapping[str, RulesObject]) -> str:
    mine = claims(obj.spec)
    for other in sorted(trial.values(), key=lambda p: p.name):
        if other.name == obj.name:
            continue
        for claim in sorted(mine.keys() & claims(other.spec).keys()):
            return (
                f"spec.{mine[claim]}: {_describe(claim)} belongs to NodeRules {other.name}; "
                f"rename it here, or move the rule into {other.name}"
            )
    return ""


def _together(parts: Iterable[RulesObject]) -> dict[str, Any]:
    together: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    for part in sorted(parts, key=lambda p: p.name):
        for section, value in (part.spec or {}).items():
            if isinstance(value, list):
                together.setdefault(section, []).extend(value)
            else:
                together[section] = value
    return together


def _together_problems(trial: Mapping[str, RulesObject]) -> str:
    try:
        merged_rules(trial.values())
    except RulesError as err:
        found = (f"{format_path(p.path)}: {p.message}" for p in err.problems)
        return "merged with the other objects: " + " | ".join(found)
    return ""
