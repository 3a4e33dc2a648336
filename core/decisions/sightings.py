"""Since when a state a node reports has held: nodegate's first sight of it, on one clock.

Every time a node writes (a condition's or an init pod's `lastTransitionTime`) is in the node's
own clock, which may be minutes off (a first boot before chrony steps it, a VM resumed behind)
or anything at all (a hostile kubelet). Such a time is therefore never compared with another
clock's: it is only a *token*, compared for equality, that tells one episode of a state from the
next (a status that went away and came back between two looks carries a new one). Since when an
episode holds is when nodegate first saw it, read on the API server's clock
(`reconciler.kit.server_clock`): the same clock as every creationTimestamp it is set against.

Pure; the reconciler keeps the sightings in memory and rebuilds them after a restart from its
first look, which can only make a sighting later, never earlier (docs/reconciler.md, "Time").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from nodegate.core.rules.node import NodeCondition, format_time

Key = TypeVar("Key", bound=Hashable)


ConditionKey = tuple[str, str]
"""(type, status): one state of a node condition; its reason may change within it, as a
kubelet keeps `lastTransitionTime` while only the reason changes."""
Kept = frozenset[ConditionKey | str]
"""Sightings that still decide something: by key, or (a type) every key of that type."""


def is_kept(key: ConditionKey, kept: Kept) -> bool:
    return key in kept or key[0] in kept


@dataclass(frozen=True)
class Sighting:
    token: str
    """What the node wrote about this episode (its transition time, as text): equality only."""
    first_seen: datetime
    """When nodegate first saw the episode, on the API server's clock."""
    witnessed: bool = True
    """Whether nodegate saw it begin (an earlier look showed the object without it); if not
    (the first look after a start), it began at some unknown moment before `first_seen`."""
    status_written: datetime | None = None
    """For a state shown by another object than the Node (an init pod): when that object's
    status was last written, as the API server stamped it (`managedFields`), else its
    creation; None: not known."""
    restored: bool = False
    """Made by another process (read back from the sightings record): dated on its reading of
    the API server's clock, which may be up to `RESTORED_MARGIN` off this one's."""


RESTORED_MARGIN = timedelta(seconds=1)
"""How far two processes' readings of the API server's clock may differ (each reads its
whole-second `Date`): a restored sighting is taken as this much later where later is safe
(a `for` hold), and this much earlier where earlier is (whether it is of a new boot)."""


def latest(seen: Sighting) -> datetime:
    """The latest the sighting may have been, on this process's clock."""
    return seen.first_seen + RESTORED_MARGIN if seen.restored else seen.first_seen


def earliest(seen: Sighting) -> datetime:
    """The earliest the sighting may have been, on this process's clock."""
    return seen.first_seen - RESTORED_MARGIN if seen.restored else seen.first_seen


def track(
    previous: Mapping[Key, Sighting] | None,
    current: Mapping[Key, str],
    now: datetime,
    witnessing: bool | None = None,
) -> dict[Key, Sighting]:
    """The sightings after one more look: an episode seen before (same key, same token) keeps
    its first sight; a new one is first seen `now`, witnessed if this look follows another of
    this process (`witnessing`; by default, whether there was a `previous`); one no longer
    shown is forgotten."""
    witnessed = previous is not None if witnessing is None else witnessing
    tracked: dict[Key, Sighting] = {}
    for key, token in current.items():
        seen = (previous or {}).get(key)
        fresh = Sighting(token, now, witnessed)
        tracked[key] = seen if seen is not None and seen.token == token else fresh
    return tracked


def first_sight(sightings: Mapping[Key, Sighting], key: Key, token: str, now: datetime) -> datetime:
    """The latest moment the episode `key`/`token` may have been first seen; an episode not
    (yet) seen holds from now (the state may have been read fresher than the sightings were
    taken: never earlier)."""
    seen = sightings.get(key)
    return min(latest(seen), now) if seen is not None and seen.token == token else now


def episode_digest(token: str) -> str:
    """A short, fixed-size name for an episode, for records kept on the Node."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def condition_key(condition: NodeCondition) -> ConditionKey:
    return (condition.type, condition.status)


def condition_token(condition: NodeCondition) -> str:
    """The episode's token: the state and the time the node wrote for it, as text."""
    when = condition.last_transition_time
    return f"{condition.type}={condition.status}@{format_time(when) if when is not None else ''}"


def condition_episodes(
    conditions: Iterable[NodeCondition], read: Callable[[str], bool]
) -> dict[ConditionKey, str]:
    """The current episode of each condition of a type the rules `read`."""
    episodes: dict[ConditionKey, str] = {}
    for c in conditions:
        if read(c.type):  # a type reported twice: the first, as the planner matches it
            episodes.setdefault(condition_key(c), condition_token(c))
    return episodes


def tells_episodes_apart(token: str) -> bool:
    """Whether the node wrote a time for the episode: without one, a status that went away and
    came back unseen looks the same, so a sighting of it made by another process (while no one
    watched in between) cannot be trusted."""
    return not token.endswith("@")


@dataclass(frozen=True)
class BootSight:
    """When the reconciler saw a node's boots: the first sight of its current bootID, and the
    last sight of the one before (the controller keeps one per node, in memory).

    A re-gate's life begins at the reboot, and readiness counts only if it began after the
    previous boot was last known up. Neither moment is on the Node, and the re-gate may be
    written long after the reboot (nodegate down, failing over, throttled during a mass reboot),
    so the informer records them as it sees each event."""

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
