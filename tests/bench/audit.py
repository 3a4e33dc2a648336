"""Node writes per client, counted in the API server's audit log (scenario.AUDIT_POLICY).

Counting at the API server means both operators are measured the same way, whatever their own
metrics say, and a 409 is seen even by a client that does not report it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CONFLICT = 409
WRITE_VERBS = frozenset({"create", "update", "patch"})


@dataclass(frozen=True)
class Writes:
    total: int
    conflicts: int
    by_code: dict[int, int]


class AuditLog:
    """Reads the audit log from a byte offset; `mark()` and `writes(since, agent)` window it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def writes(self, since: int, agent_prefix: str, until: int | None = None) -> Writes:
        """Node writes (any subresource) by clients whose User-Agent starts with the prefix."""
        codes: Counter[int] = Counter()
        with self.path.open("rb") as stream:
            stream.seek(since)
            data = stream.read() if until is None else stream.read(until - since)
        for line in data.splitlines():
            event = json.loads(line)
            if event.get("verb") not in WRITE_VERBS:
                continue
            if not str(event.get("userAgent", "")).startswith(agent_prefix):
                continue
            codes[int(event.get("responseStatus", {}).get("code", 0))] += 1
        return Writes(sum(codes.values()), codes[CONFLICT], dict(codes))
