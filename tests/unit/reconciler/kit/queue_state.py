"""What a test reads of a `WorkQueue`'s own retry state (nothing in the reconciler needs it)."""

from __future__ import annotations

import time

from nodegate.reconciler.kit.workqueue import WorkQueue


def num_requeues(queue: WorkQueue, key: str) -> int:
    """Failures of the key since it was last forgotten."""
    with queue._cond:
        entry = queue._retries.get(key)
        return entry[0] if entry is not None else 0


def due_in(queue: WorkQueue, key: str) -> float | None:
    """Seconds until the key's pending delayed re-add (None if it has none)."""
    with queue._cond:
        due = queue._due.get(key)
        return None if due is None else due - time.monotonic()
