"""Where a steady change's time goes: its change → taint latency split at the API server.

The audit log (`scenario.AUDIT_POLICY`) times every Node write twice, when the request came in
and when its answer was complete, so each steady change splits into four stretches:

1. **change written**: the load generator sends the change → the API server has answered it
   (the client, the connection, admission and etcd);
2. **to the operator's write**: → the operator's write of that node reaches the API server
   (the watch delivering the change, then the operator deciding and sending: its own share);
3. **operator's write**: that request in → answered;
4. **to the watcher**: → the watcher sees the node's taints as the change requires (the watch
   delivering the write).

A watch can deliver a write before the writer's answer is complete, so a stretch that starts at
an answer can come out below zero; it counts as 0. A change whose writes are not both found
(or not in order) counts as missing in every stretch. Pure: the times in, the stretches out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tests.bench.audit import AuditedWrite
from tests.bench.stats import Latency

SEGMENTS = {
    "change written": "the load generator's client and the API server",
    "to the operator's write": "the watch to the operator, and the operator deciding: its share",
    "operator's write": "the API server",
    "to the watcher": "the watch to the watcher",
}
"""Each stretch, in order, and whose time it is."""
CLOCK_SLACK_SECONDS = 0.005
"""How far a write may seem to come before the change was sent: the audit log's wall clock and
the benchmark's monotonic one are read apart (once), each to the microsecond."""


@dataclass(frozen=True)
class SeenChange:
    """One change: its node, when it was sent, when the watcher saw its taint state
    (monotonic seconds)."""

    node: str
    sent: float
    seen: float


def split(
    changes: Sequence[SeenChange],
    writes: Sequence[AuditedWrite],
    change_agent: str,
    operator_agent: str,
    wall_minus_monotonic: float,
) -> dict[str, Latency]:
    """The four stretches of every change, as latency distributions by segment name."""
    by_node: dict[str, list[AuditedWrite]] = defaultdict(list)
    for write in writes:
        by_node[write.node].append(
            replace(
                write,
                received=write.received - wall_minus_monotonic,
                completed=write.completed - wall_minus_monotonic,
            )
        )
    for node_writes in by_node.values():
        node_writes.sort(key=lambda w: w.received)  # the log is in order of completion
    stretches: dict[str, list[float]] = {segment: [] for segment in SEGMENTS}
    missing = 0
    for change in changes:
        found = _writes_of(change, by_node[change.node], change_agent, operator_agent)
        if found is None:
            missing += 1
            continue
        ours, theirs = found
        values = (
            ours.completed - change.sent,
            max(0.0, theirs.received - ours.completed),
            theirs.completed - theirs.received,
            max(0.0, change.seen - theirs.completed),
        )
        for segment, value in zip(SEGMENTS, values, strict=True):
            stretches[segment].append(value)
    return {segment: Latency(tuple(values), missing) for segment, values in stretches.items()}


def _writes_of(
    change: SeenChange, writes: list[AuditedWrite], change_agent: str, operator_agent: str
) -> tuple[AuditedWrite, AuditedWrite] | None:
    """The change's own write (the load generator's first write of the node received after it
    was sent) and the operator's write the watcher saw (its last write of the node received
    after that one and before the watcher saw the result: an operator that writes twice, say
    its bookkeeping and then the taint, is timed to the write that carried the taint).
    Times are monotonic here."""
    ours = next(
        (
            w
            for w in writes
            if w.agent.startswith(change_agent) and w.received >= change.sent - CLOCK_SLACK_SECONDS
        ),
        None,
    )
    if ours is None:
        return None
    answers = [
        w
        for w in writes
        if w.agent.startswith(operator_agent)
        and ours.received <= w.received <= change.seen + CLOCK_SLACK_SECONDS
    ]
    theirs = answers[-1] if answers else None
    return None if theirs is None else (ours, theirs)
