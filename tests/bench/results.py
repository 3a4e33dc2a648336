"""What one benchmark run measured, as plain data (written to JSON next to the report)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.bench.stats import Latency

LATENCY_CASES = ("label, steady", "label, burst", "condition, steady", "condition, burst")


@dataclass(frozen=True)
class RaceResult:
    """Node joins with one pending pod pinned to each joining node."""

    joined: int
    pods_bound: int
    bound_before_taint: int


@dataclass(frozen=True)
class StormPhase:
    """One phase of the storm: every node's condition flipped at once."""

    seconds: float  # first flip sent → the watcher saw the last node in its taint state
    send_seconds: float  # first flip sent → the last flip's answer (the load generator's share)
    latency: Latency  # per node: its flip sent → its taint state seen


@dataclass
class OperatorResult:
    operator: str
    converge_seconds: float = 0.0
    converge_writes: int = 0
    converge_conflicts: int = 0
    latencies: dict[str, Latency] = field(default_factory=dict)
    changes: int = 0
    change_writes: int = 0
    change_conflicts: int = 0
    resync_seconds: float | None = None
    resync_writes: int | None = None
    peak_rss_mib: float = 0.0
    cpu_seconds: float = 0.0
    # Full (generation-2) collections over the whole run and their pauses in all, from
    # nodegate's own nodegate_gc_pause_seconds (None for kopf, which exports no metrics).
    full_gc_pauses: int | None = None
    full_gc_seconds: float | None = None
    converge_cpu_seconds: float = 0.0
    race: dict[str, RaceResult] = field(default_factory=dict)
    storm: dict[str, StormPhase] = field(default_factory=dict)  # "taint", "untaint"
    # The steady changes' latency split at the API server, by stretch (breakdown.SEGMENTS).
    steady_split: dict[str, Latency] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def writes_per_change(self) -> float | None:
        return self.change_writes / self.changes if self.changes else None


@dataclass
class SizeResult:
    nodes: int
    started: str  # UTC, ISO 8601
    load_at_start: tuple[float, float, float]
    quiet: bool  # the 1-minute load average was below the limit when the run started
    node_kib: float  # one benchmark Node as the API server returns it
    command: str
    write_qps: float
    write_burst: int
    operators: dict[str, OperatorResult] = field(default_factory=dict)
    tag: str = ""  # names a variant run (e.g. a higher write limit): its own section and plot
    heartbeat_events_per_second: float = 0.0
    load_during: tuple[float, float] = (0.0, 0.0)  # 1-minute load average: mean, max
    lifecycle_tainted_nodes: int = 0  # nodes tainted not-ready/unreachable after all were Ready
    control_plane: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    # The API server's floor: seconds for a plain client to put a taint on every node and take
    # it off again, by phase ("taint", "untaint") and client threads: {"taint": {16: 1.9}}.
    floor: dict[str, dict[int, float]] = field(default_factory=dict)
    # Seconds for the same plain client to put a taint on `burst` nodes at once (16 threads):
    # the yardstick of the burst figures where the API server cannot answer within 500 ms.
    burst_floor: float | None = None
    # A plain client's single taint patch at the steady rate, nothing else writing: each
    # request's round trip (the steady figures' yardstick: a change takes two, plus two watches).
    round_trip: Latency | None = None
    # Seconds to send each storm phase's flips with no operator running, by phase: the share
    # of a phase that is the load generator's and the API server's, whatever the operator does.
    flips_alone: dict[str, float] = field(default_factory=dict)
    burst: int = 0  # changes in a burst
    # component -> (peak RSS MiB, CPU seconds over the whole run), read at its end


def section_key(size: SizeResult) -> str:
    """`5000`, or `5000-write-limit-raised` for the variant run tagged "write limit raised"
    (the key names files: no spaces)."""
    slug = re.sub(r"[^a-z0-9]+", "-", size.tag.lower()).strip("-")
    return f"{size.nodes}-{slug}" if slug else str(size.nodes)
