"""The driver's reading of the watcher's output: each node's taint history, each pod's binding."""

from __future__ import annotations

import json
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Keys = frozenset[str]


@dataclass
class WatchLog:
    """Follows the watcher's JSON lines; `refresh()` reads whatever was appended since."""

    path: Path
    times: dict[str, list[float]] = field(default_factory=dict)
    keys: dict[str, list[Keys | None]] = field(default_factory=dict)
    bindings: dict[str, tuple[float, str]] = field(default_factory=dict)
    conditions: dict[str, list[tuple[float, str | None]]] = field(default_factory=dict)
    """Each node's watched condition status as it changed (the watcher's CONDITION)."""
    synced: set[str] = field(default_factory=set)
    _offset: int = 0

    def refresh(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        end = data.rfind(b"\n") + 1  # a half-written last line is read next time
        self._offset += end
        for line in data[:end].splitlines():
            record = json.loads(line)
            if "n" in record:
                keys = record["k"]
                self.times.setdefault(record["n"], []).append(record["t"])
                self.keys.setdefault(record["n"], []).append(
                    None if keys is None else frozenset(keys)
                )
            elif "cn" in record:
                self.conditions.setdefault(record["cn"], []).append((record["t"], record["c"]))
            elif "pod" in record:
                self.bindings[record["pod"]] = (record["t"], record["node"])
            elif "synced" in record:
                self.synced.add(record["synced"])

    def current(self, node: str) -> Keys | None:
        """The node's taint keys as last seen; None if never seen or deleted."""
        history = self.keys.get(node)
        return history[-1] if history else None

    def count(self, nodes: list[str], predicate: Callable[[Keys], bool]) -> int:
        return sum(1 for n in nodes if (k := self.current(n)) is not None and predicate(k))

    def first_at_or_after(
        self, node: str, since: float, predicate: Callable[[Keys], bool]
    ) -> float | None:
        """When the watcher first saw the node in a state meeting `predicate` at or after
        `since`; the state it was in at `since` counts (seen at `since`) if it already met it."""
        times, history = self.times.get(node, []), self.keys.get(node, [])
        start = bisect_left(times, since)
        if start > 0 and (k := history[start - 1]) is not None and predicate(k):
            return since
        for t, k in zip(times[start:], history[start:], strict=True):
            if k is not None and predicate(k):
                return t
        return None

    def condition_seen(self, node: str, since: float, status: str) -> float | None:
        """When the watcher first saw the node's condition at `status` at or after `since`."""
        return next(
            (t for t, s in self.conditions.get(node, []) if t >= since and s == status), None
        )

    def wait(self, done: Callable[[WatchLog], bool], timeout: float, what: str) -> float:
        """Refresh until `done` holds; the monotonic time it first held (polled every 50 ms)."""
        deadline = time.monotonic() + timeout
        while True:
            self.refresh()
            if done(self):
                return time.monotonic()
            if time.monotonic() > deadline:
                raise TimeoutError(f"benchmark: timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.05)
