"""Prometheus metrics: one registry per reconciler so tests and two instances don't collide.

Every metric is created here, once, against that registry (`Metrics`), and handed out in small
groups, one per collaborator, each the metrics it records and nothing else: the node writer
gets `WriterMetrics`, the eviction breaker `BreakerMetrics`, and so on. The one counter they
share, `nodegate_errors_total{kind}`, is the same object in every group that counts into it,
and every informer reports its failures to the one `Metrics.on_informer_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
)
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from nodegate.core.reports.gate_census import AGE_BUCKETS, GateCensus
from nodegate.reconciler.kit.errors import WatchStalledError
from nodegate.reconciler.kit.informer import ErrorHook

_go_float = cast(Callable[[float], str], floatToGoString)  # untyped in prometheus_client
AGE_BUCKET_LABELS = tuple(_go_float(bound) for bound in AGE_BUCKETS)
"""The `le` labels of nodegate_gated_node_age_seconds, spelled as client_python spells a
histogram's (600 is "600.0"): alerts select a bucket by this exact text."""


class GateCensusCollector(Collector):
    """Gated nodes per gate and pool, the oldest one's age, the gated nodes by age and all
    nodes, counted from the node cache when Prometheus scrapes (no O(n) work per node event;
    measured 18 to 23 ms per scrape for 5,000 nodes and two gates, 500 or all of them gated).

    `source` is set by the controller; None (no rules yet, cache not synced, a standby replica)
    exports the families without samples, so alerts read only the leader's figures.
    """

    def __init__(self) -> None:
        self.source: Callable[[], GateCensus | None] = lambda: None

    def collect(self) -> Iterator[Metric]:
        census = self.source()
        gated = GaugeMetricFamily(
            "nodegate_gated_nodes",
            "Nodes carrying a startup gate's taint, by gate and pool (nodegate.dev/pool).",
            labels=["gate", "pool"],
        )
        oldest = GaugeMetricFamily(
            "nodegate_gate_oldest_seconds",
            "Age (from creation) of the oldest node still carrying the gate, by gate and pool.",
            labels=["gate", "pool"],
        )
        share = GaugeMetricFamily(
            "nodegate_gated_share",
            "Share of all nodes carrying at least one startup gate (0 to 1).",
        )
        ages = GaugeHistogramMetricFamily(
            "nodegate_gated_node_age_seconds",
            "Nodes carrying any startup gate (each once), by age from creation: "
            "cluster-autoscaler counts one still gated after 15 minutes as unready.",
            labels=[],
        )
        nodes = GaugeMetricFamily(
            "nodegate_nodes", "All nodes in the leader's cache (the gated share's denominator)."
        )
        if census is not None:
            for group in census.groups:
                gated.add_metric([group.gate, group.pool], group.nodes)
                oldest.add_metric([group.gate, group.pool], group.oldest_seconds)
            share.add_metric([], census.gated_share)
            by_age = zip(AGE_BUCKET_LABELS, census.gated_by_age, strict=True)
            buckets = [*by_age, ("+Inf", census.gated_nodes)]
            ages.add_metric([], buckets, census.gated_age_sum)
            nodes.add_metric([], census.all_nodes)
        yield from (gated, oldest, share, ages, nodes)


@dataclass(frozen=True)
class ControllerMetrics:
    """What the node controller records (`controller.Controller`): node events, the queue,
    resyncs and its cache; its worker's reconcile durations and error kinds; the gate census."""

    gate_census: GateCensusCollector
    errors: Counter
    reconcile_seconds: Histogram
    resync_seconds: Gauge
    resyncs: Counter
    queue_depth: Gauge
    queue_wait_seconds: Histogram
    node_events: Counter
    cached_objects: Gauge
    clock_disagreement_seconds: Gauge
    clock_disagreements: Counter
    clock_correction_seconds: Gauge
    agents_cannot_run: Gauge


@dataclass(frozen=True)
class WriterMetrics:
    """What the one write path to Nodes records (`node_writer.NodeWriter`)."""

    changes: Counter
    writes: Counter
    writes_refused: Counter
    conflicts: Counter
    taints_adopted: Counter
    dry_run_changes: Counter
    dry_run_nodes: Gauge
    write_wait_seconds: Counter


@dataclass(frozen=True)
class RulesInForceMetrics:
    """What the rules in force and their guard record (`rules_in_force.RulesInForce`)."""

    rules_generation: Gauge
    rules_held: Gauge


@dataclass(frozen=True)
class RulesSourceMetrics:
    """What the rules source records (`rules_source.RulesWatcher`)."""

    rules_valid: Gauge
    rules_rejected: Counter
    errors: Counter
    on_informer_error: ErrorHook


@dataclass(frozen=True)
class BreakerMetrics:
    """What the eviction breaker records (`eviction_breaker.EvictionBreaker`)."""

    evictions_waiting: Gauge
    eviction_holds: Counter
    errors: Counter


@dataclass(frozen=True)
class LabelRecordMetrics:
    """What persisted-label records record (`label_records.LabelRecords`)."""

    label_restores: Counter
    label_restore_failures: Counter
    label_records_forgotten: Counter
    label_keys_contested: Gauge
    label_records_withheld: Counter
    label_records: Gauge
    label_records_quarantined: Counter
    on_informer_error: ErrorHook


@dataclass(frozen=True)
class GateMetrics:
    """What the startup gates' reports record (`gate_reports.GateReports`)."""

    time_to_ungate: Histogram
    gate_timeouts: Counter
    gates_put_back: Counter
    backfill_skipped: Counter


@dataclass(frozen=True)
class ProcessMetrics:
    """What the process records around the controller (`main`): leadership and the write
    fence, loops that ended, the cycle collector's pauses, and the taint history's errors."""

    is_leader: Gauge
    fence_held: Gauge
    writes_fenced: Counter
    server_fence: Gauge
    loop_failed: Gauge
    gc_pauses: Histogram
    errors: Counter


@dataclass(frozen=True)
class OciMetrics:
    """What the OCI instance poller records (`oci_instances.OciInstanceConditions`)."""

    list_calls: Counter
    errors: Counter
    condition_writes: Counter
    instances: Gauge
    nodes_unlisted: Gauge
    last_poll: Gauge


@dataclass
class Metrics:
    """The one registry: every metric created once, in the order /metrics lists them, and
    handed out by group (the controller, which composes the node collaborators, hands each
    one its own; `main` takes `process`, `rules_source` and `oci`)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        counter = partial(Counter, registry=r)
        gauge = partial(Gauge, registry=r)
        histogram = partial(Histogram, registry=r)
        self.gate_census = GateCensusCollector()
        r.register(self.gate_census)

        # What the workers did to nodes, and how it went.
        changes = counter(
            "nodegate_node_changes",
            "Changes made to nodes, by rule and kind of change.",
            ["rule", "change"],
        )
        writes = counter("nodegate_node_writes", "Node writes by result.", ["result"])
        writes_refused = counter(
            "nodegate_node_writes_split",
            "Node writes the API server refused whole, whose taint changes were then written "
            "alone (something on the node keeps its labels and annotations from landing).",
        )
        conflicts = counter(
            "nodegate_write_conflicts",
            "409 conflicts on node writes (each one is re-read and re-planned).",
        )
        errors = counter(
            "nodegate_errors",
            "Errors by kind (temporary, permanent, rules, history, status, ledger, sightings, "
            "internal).",
            ["kind"],
        )
        reconcile_seconds = histogram(
            "nodegate_reconcile_duration_seconds",
            "Time to reconcile one node (read, plan, write).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.writer = WriterMetrics(
            changes,
            writes,
            writes_refused,
            conflicts,
            counter(
                "nodegate_taints_adopted",
                "Taints found on a node, unclaimed, that a rule wants there and nodegate recorded "
                "as its own (another tool's, e.g. node-readiness-controller's), by rule.",
                ["rule"],
            ),
            counter(
                "nodegate_dry_run_changes",
                "Changes dry-run rules would have made (each counted once per node while it stays "
                "pending), by rule and action (add_taint, remove_taint, adopt_taint, lift_gate, "
                "put_back_gate, restore_label).",
                ["rule", "action"],
            ),
            gauge(
                "nodegate_dry_run_nodes",
                "Nodes a dry-run rule would change now, by rule and action.",
                ["rule", "action"],
            ),
            counter(
                "nodegate_write_throttle_seconds",
                "Seconds node writes waited for the client-side rate limit.",
            ),
        )

        # The rules: accepted, refused, held.
        rules_generation = gauge(
            "nodegate_rules_generation",
            "Counts accepted rules versions since start (1 = the first rules loaded).",
        )
        rules_valid = gauge(
            "nodegate_rules_last_update_valid",
            "1 if the most recent rules update was accepted, 0 if it was refused.",
        )
        rules_rejected = counter("nodegate_rules_rejected", "Rules updates refused as invalid.")
        rules_held = gauge(
            "nodegate_rules_held",
            "1 while a valid rules update is held back by the blast-radius guard.",
        )
        self.rules_in_force = RulesInForceMetrics(rules_generation, rules_held)
        self.breaker = BreakerMetrics(
            gauge(
                "nodegate_evictions_waiting",
                "Nodes whose evicting (NoExecute) taint of a rule waits for the eviction budget.",
                ["rule"],
            ),
            counter(
                "nodegate_eviction_holds",
                "Times a node started waiting for the eviction budget, by rule.",
                ["rule"],
            ),
            errors,
        )

        # The process: leadership, queue, watches, loops.
        is_leader = gauge("nodegate_is_leader", "1 while this replica holds the leader Lease.")
        fence_held = gauge(
            "nodegate_leader_fence_held",
            "1 while this replica may write to nodes: leader election is off, or its last "
            "Lease renewal started less than the renew deadline ago.",
        )
        writes_fenced = counter(
            "nodegate_writes_fenced",
            "Writes the API server's fence policy refused: 'deposed' when the Lease had passed "
            "to another replica (this one then stops writing and exits), 'lagging' when the API "
            "server had not yet seen this replica's takeover (retried).",
            ["verdict"],
        )
        server_fence = gauge(
            "nodegate_server_fence",
            "1 when the API server fences this leader's writes (the fence policy is installed "
            "and bound to its Lease, checked when it starts to lead); 0: fenced on the client "
            "only.",
        )
        resync_seconds = gauge(
            "nodegate_resync_duration_seconds",
            "How long the last periodic resync took: every cached node queued, until each was "
            "reconciled (a pass near the resync period means nodes wait behind it).",
        )
        resyncs = counter("nodegate_resyncs", "Periodic resyncs completed.")
        queue_depth = gauge(
            "nodegate_queue_depth",
            "Nodes waiting to be reconciled, now or after a delay (retries, re-checks).",
        )
        queue_wait_seconds = histogram(
            "nodegate_queue_wait_seconds",
            "How long a node waited in the queue for a worker, by lane (event: it changed; "
            "resync: the periodic pass), as client-go's workqueue_queue_duration_seconds: in a "
            "burst of changes, the time spent behind other nodes.",
            ["lane"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        node_events = counter(
            "nodegate_node_watch_events",
            "Node watch events by outcome: queued, unchanged (nothing the rules read changed: "
            "heartbeats), deleted, or no_rules.",
            ["outcome"],
        )
        self._informer_errors = counter(
            "nodegate_informer_errors",
            "List/watch failures by informer (each one backs off and retries).",
            ["informer"],
        )
        self._watch_stalls = counter(
            "nodegate_watch_stalls",
            "Watches presumed dead after a silence past their liveness bound (a partition "
            "that neither closes nor refuses the connection); each is resumed on a new "
            "connection.",
            ["informer"],
        )
        self.rules_source = RulesSourceMetrics(
            rules_valid, rules_rejected, errors, self.on_informer_error
        )
        self.controller = ControllerMetrics(
            self.gate_census,
            errors,
            reconcile_seconds,
            resync_seconds,
            resyncs,
            queue_depth,
            queue_wait_seconds,
            node_events,
            gauge("nodegate_cached_objects", "Objects in each informer's cache.", ["informer"]),
            gauge(
                "nodegate_server_clock_disagreement_seconds",
                "How far the API server's time, at its last reading, was ahead (+) or behind "
                "(-) nodegate's clock (kit/server_clock.py): within about a second while they "
                "agree; a disagreement is believed only when it lasts, and then followed slowly.",
            ),
            counter(
                "nodegate_server_clock_disagreements",
                "Readings of the API server's time that disagreed with nodegate's clock beyond "
                "its tolerance (each one; none of them moved the clock on its own).",
            ),
            gauge(
                "nodegate_server_clock_correction_seconds",
                "How far nodegate's clock has been moved, by lasting disagreements, off its first "
                "reading of the API server's time advanced by the monotonic clock (moves at 1 % "
                "of elapsed time at most).",
            ),
            gauge(
                "nodegate_node_agents_cannot_run",
                "Nodes on which a node-agent rule's listed DaemonSet will not be run by the "
                "DaemonSet controller (its placement, another taint), by rule, DaemonSet and "
                "action: skip (the node does not wait for it) or wait (cannotRun: wait: the node "
                "keeps the taint until that changes).",
                ["rule", "daemonset", "action"],
            ),
        )
        loop_failed = gauge(
            "nodegate_loop_failed",
            "1 if a long-running loop ended unexpectedly (/healthz then fails).",
            ["loop"],
        )

        # The client library's own: memory and CPU (process_*) and the cycle collector's runs
        # by generation (python_gc_*), what the default registry would have exported.
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        gc_pauses = histogram(
            "nodegate_gc_pause_seconds",
            "Pauses of the cycle collector by generation: a generation-2 (full) collection "
            "stops every thread of the reconciler while it walks the heap.",
            ["generation"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        )
        self.process = ProcessMetrics(
            is_leader, fence_held, writes_fenced, server_fence, loop_failed, gc_pauses, errors
        )

        # Persisted-label records.
        label_records = gauge("nodegate_label_records", "Persisted-label records in the store.")
        self.labels = LabelRecordMetrics(
            counter("nodegate_label_restores", "Persisted labels put back on re-created nodes."),
            counter(
                "nodegate_label_restore_failures",
                "Restores that failed, by reason (each is retried).",
                ["reason"],
            ),
            counter(
                "nodegate_label_records_forgotten",
                "Records of deleted nodes garbage-collected after forgetAfter.",
            ),
            gauge(
                "nodegate_label_keys_contested",
                "Persisted-label record keys (providerIDs, names) that more than one live node "
                "claims: their records are neither restored nor taken over until one node is "
                "left.",
            ),
            counter(
                "nodegate_label_records_withheld",
                "Reconciles that left a record's labels off a node, by reason (contested: "
                "another live node claims its key; unproven: nothing shows the node is the "
                "recorded machine; other_machine: the record is another machine's and stays so).",
                ["reason"],
            ),
            label_records,
            counter(
                "nodegate_label_records_quarantined",
                "Unreadable records copied aside (never overwritten, never dropped).",
            ),
            self.on_informer_error,
        )

        # OCI instance state as node conditions (only the leader's poller counts).
        self.oci = OciMetrics(
            counter(
                "nodegate_oci_list_calls",
                "ListInstances calls (one per page), by outcome (ok, or the error's kind).",
                ["outcome"],
            ),
            counter(
                "nodegate_oci_errors",
                "Failed compartment listings, by kind (auth, not_found, throttled, server, "
                "timeout, other), failed client setups (setup) and refused condition writes "
                "(write); each is retried.",
                ["kind"],
            ),
            counter(
                "nodegate_oci_condition_writes",
                "OCI conditions written on Nodes, by type and status.",
                ["type", "status"],
            ),
            gauge(
                "nodegate_oci_instances",
                "Instances listed in the compartments that answered at the last poll.",
            ),
            gauge(
                "nodegate_oci_nodes_unlisted",
                "Nodes with an OCI providerID whose instance no compartment listed at the last "
                "poll (their OCI conditions are left as they are).",
            ),
            gauge(
                "nodegate_oci_last_poll_timestamp_seconds",
                "When the last poll in which every compartment answered ended (unix time).",
            ),
        )

        # Startup gates.
        self.gates = GateMetrics(
            histogram(
                "nodegate_time_to_ungate_seconds",
                "From node creation to its startup gate being lifted.",
                ["gate", "pool"],
                buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600),
            ),
            counter(
                "nodegate_gate_timeouts",
                "Startup gates that reached their timeout, by what was done (keep or lift).",
                ["gate", "action"],
            ),
            counter(
                "nodegate_gates_put_back",
                "Startup gates added back: after a reboot (regate) or onto an idle node "
                "(backfill).",
                ["gate"],
            ),
            counter(
                "nodegate_backfill_skipped",
                "Nodes not backfilled because they already run workload pods.",
                ["gate"],
            ),
        )

    def on_informer_error(self, informer: str, err: BaseException) -> None:
        """Every informer's `on_error` (gate pods are handed this alone): every failure
        counted, a dead watch also as a stall."""
        self._informer_errors.labels(informer).inc()
        if isinstance(err, WatchStalledError):
            self._watch_stalls.labels(informer).inc()
