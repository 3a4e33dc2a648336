"""Node writes per client, counted in the API server's audit log (scenario.AUDIT_POLICY).

Counting at the API server means both operators are measured the same way, whatever their own
metrics say, and a 409 is seen even by a client that does not report it.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFLICT = 409
WRITE_VERBS = frozenset({"create", "update", "patch"})


@dataclass(frozen=True)
class Writes:
    total: int
    conflicts: int
    by_code: dict[int, int]


@dataclass(frozen=True)
class AuditedWrite:
    """One Node write as the API server saw it: when the request came in and when its answer
    was complete (wall clock, in seconds since the epoch, to the microsecond)."""

    node: str
    agent: str
    received: float
    completed: float


def _epoch(timestamp: str) -> float:
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


class AuditLog:
    """Reads the audit log from a byte offset; `mark()` and `writes(since, agent)` window it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def _events(self, since: int, until: int | None) -> list[dict[str, Any]]:
        with self.path.open("rb") as stream:
            stream.seek(since)
            data = stream.read() if until is None else stream.read(until - since)
        return [json.loads(line) for line in data.splitlines()]

    def node_writes(self, since: int, until: int | None = None) -> list[AuditedWrite]:
        """Every Node write in the window, in the log's order, with its two times."""
        writes = []
        for event in self._events(since, until):
            if event.get("verb") not in WRITE_VERBS:
                continue
            ref = event.get("objectRef")
            name = ref.get("name") if isinstance(ref, dict) else None
            writes.append(
                AuditedWrite(
                    node=str(name),
                    agent=str(event.get("userAgent", "")),
                    received=_epoch(str(event["requestReceivedTimestamp"])),
                    completed=_epoch(str(event["stageTimestamp"])),
                )
            )
        return writes

    def writes(self, since: int, agent_prefix: str, until: int | None = None) -> Writes:
        """Node writes (any subresource) by clients whose User-Agent starts with the prefix."""
        codes: Counter[int] = Counter()
        for event in self._events(since, until):
            if event.get("verb") not in WRITE_VERBS:
                continue
            if not str(event.get("userAgent", "")).startswith(agent_prefix):
                continue
            codes[int(event.get("responseStatus", {}).get("code", 0))] += 1
        return Writes(sum(codes.values()), codes[CONFLICT], dict(codes))
