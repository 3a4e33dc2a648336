"""What the leading reconciler publishes about itself, for `nodegate status|explain|plan`. Pure.

The rules in force are not always the rules ConfigMap's text: an update the blast-radius guard
holds sits in the ConfigMap while the previous generation stays in force, and file-sourced
rules are not in the API at all. So the leader keeps one small ConfigMap in its own namespace
(`nodegate-status`, where only the reconciler and cluster admins write), rewritten only when
something in it changes (a generation applied, an update held or a hold cleared), holding

* `status.json`: who wrote it (its Lease identity, and the process: `nodegate reconcile`, its
  host and pid; a dry run writes no record) and with which version, the generation and digest
  in force, where they came from and when they were applied, and the held update (digest,
  reason, since);
* `rules.yaml`: the text of the rules in force, so a day-2 command plans with exactly them.

Which replica leads is the Lease's holderIdentity, read beside it; this record says which
replica wrote it, so a reader can tell a record left by a former leader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.objects.installation import RULES_KEY
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import format_time, parse_time
from nodegate.core.text.errors import RulesError

STATUS_CONFIGMAP = "nodegate-status"
STATUS_KEY = "status.json"
STATUS_VERSION = 1


class StatusRecordError(ValueError):
    """The status record cannot be read (hand-edited, truncated, a newer format)."""


@dataclass(frozen=True)
class HeldUpdate:
    """A valid rules update the blast-radius guard holds until its digest is confirmed."""

    digest: str
    reason: str
    source: str
    since: datetime


@dataclass(frozen=True)
class ReconcilerStatus:
    writer: str
    """The replica (its Lease identity) that wrote the record."""
    version: str
    """nodegate's version on that replica."""
    generation: int
    """Rules generation in force (0: none yet)."""
    digest: str | None
    """Digest of the rules text in force (`blast_radius.rules_digest`)."""
    source: str
    applied_at: datetime | None
    held: HeldUpdate | None
    updated_at: datetime
    max_untaint_share: float | None = None
    """The writer's blast-radius limit (`--max-untaint-share`), so `nodegate plan` uses the
    live setting."""
    writer_process: str = ""
    """Which process wrote it: `nodegate reconcile` (a dry run never writes the record), its host
    (the Pod's name in a cluster) and process id; '' in a record written before it was kept."""


def encode_status(status: ReconcilerStatus, rules_text: str) -> dict[str, str]:
    """The ConfigMap's data: the status as JSON and the rules text in force."""
    held = status.held
    document: dict[str, Any] = {
        "version": STATUS_VERSION,
        "writer": status.writer,
        "nodegateVersion": status.version,
        "generation": status.generation,
        "digest": status.digest,
        "source": status.source,
        "appliedAt": format_time(status.applied_at) if status.applied_at else None,
        "held": None if held is None else {**asdict(held), "since": format_time(held.since)},
        "updatedAt": format_time(status.updated_at),
        "maxUntaintShare": status.max_untaint_share,
        "writerProcess": status.writer_process,
    }
    return {STATUS_KEY: json.dumps(document, indent=1, sort_keys=True), RULES_KEY: rules_text}


def decode_status(data: Mapping[str, Any] | None) -> tuple[ReconcilerStatus, str]:
    """The status and the rules text in force; StatusRecordError saying what is wrong."""
    text = (data or {}).get(STATUS_KEY)
    if not isinstance(text, str):
        raise StatusRecordError(f"no '{STATUS_KEY}' key")
    try:
        document = json.loads(text)
        if document.get("version") != STATUS_VERSION:
            raise StatusRecordError(f"unknown version {document.get('version')!r}")
        held = document.get("held")
        status = ReconcilerStatus(
            writer=str(document["writer"]),
            version=str(document["nodegateVersion"]),
            generation=int(document["generation"]),
            digest=str(document["digest"]) if document.get("digest") else None,
            source=str(document.get("source") or ""),
            applied_at=parse_time(document.get("appliedAt")),
            held=None
            if not held
            else HeldUpdate(
                str(held["digest"]),
                str(held["reason"]),
                str(held.get("source") or ""),
                _required_time(held["since"]),
            ),
            updated_at=_required_time(document["updatedAt"]),
            max_untaint_share=_share(document.get("maxUntaintShare")),
            writer_process=str(document.get("writerProcess") or ""),
        )
    except StatusRecordError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise StatusRecordError(
            f"{STATUS_KEY} is not readable: {type(err).__name__}: {err}"
        ) from err
    rules_text = (data or {}).get(RULES_KEY)
    return status, rules_text if isinstance(rules_text, str) else ""


def _share(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"maxUntaintShare {value!r} is not a share between 0 and 1")
    return float(value)


def _required_time(value: object) -> datetime:
    moment = parse_time(value)
    if moment is None:
        raise ValueError("a time is missing")
    return moment


@dataclass(frozen=True)
class RecordedRules:
    """The rules in force as the record holds them, checked: what a new leader puts back in
    force at start, and what the day-2 commands plan with."""

    status: ReconcilerStatus
    rules: NodeRules | None
    """None: the record says no rules are in force (generation 0)."""
    text: str


RECORD_SOURCE = "the status record's rules in force"
"""The source named in the located problems of a record whose rules text does not load."""


def rules_of_record(data: Mapping[str, Any] | None) -> RecordedRules:
    """The record's rules in force, validated like any rules update and checked against the
    digest it was applied under; StatusRecordError saying what is wrong, never a guess."""
    status, text = decode_status(data)
    if status.generation == 0:
        return RecordedRules(status, None, text)
    if status.generation < 0:
        raise StatusRecordError(f"generation {status.generation} is not a generation")
    if status.digest != rules_digest(text):
        raise StatusRecordError(
            f"its rules text does not match the digest it was applied under "
            f"(generation {status.generation}, digest {status.digest}, text digest "
            f"{rules_digest(text)})"
        )
    try:
        rules = parse_rules(text, RECORD_SOURCE)
    except RulesError as err:
        raise StatusRecordError(
            f"its rules text (generation {status.generation}) is not readable: "
            f"{err.problems[0] if err.problems else err}"
        ) from err
    return RecordedRules(status, rules, text)
