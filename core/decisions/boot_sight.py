"""When the reconciler saw a node's boots: the first sight of its current bootID, and the last
sight of the one before. Pure; the controller keeps one per node, in memory.

A re-gate's life begins at the reboot, and readiness counts only if it began after the previous
boot was last known up. Neither moment is on the Node, and the re-gate may be written long after
the reboot (nodegate down, failing over, throttled during a mass reboot), so the informer records
them as it sees each event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class BootSight:
    boot_id: str
    first_seen: datetime
    """When this bootID was first seen (by this process)."""
    last_seen: datetime
    previous_last_seen: datetime | None = None
    """When the bootID before it was last seen; None: this process saw no other."""


def track_boot(previous: BootSight | None, boot_id: str, now: datetime) -> BootSight | None:
    """The sight after one more look at the node (None: it reports no bootID)."""
    if not boot_id:
        return previous
    if previous is None:
        return BootSight(boot_id, now, now)
    if previous.boot_id == boot_id:
        return BootSight(boot_id, previous.first_seen, now, previous.previous_last_seen)
    return BootSight(boot_id, now, now, previous.last_seen)
