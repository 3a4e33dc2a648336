"""`make bench`: nodegate and the kopf baseline on the same simulated nodes, in one run.

For each size N: start the local control plane (etcd, kube-apiserver with an audit log,
scheduler, controller-manager, kwok), register N kwok-managed nodes of kubelet size, start the
watcher, then for each operator in turn: cold converge, label and condition flips (steady and
burst), nodegate's no-op resync, and the scheduling race, while its process's memory and CPU
are read from /proc. Between the operators every node is put back to its starting state.
Figures: docs/benchmarks.md (`report.py`), raw results: a JSON file next to it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.localcluster import paths
from nodegate.localcluster.build import ensure_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.reconciler.settings import ReconcilerSettings
from tests.bench import cluster_ops, report
from tests.bench.audit import AuditLog
from tests.bench.breakdown import SeenChange, split
from tests.bench.operators import (
    UNLIMITED_WRITES,
    USER_AGENT,
    NodegateSettings,
    OperatorName,
    RunningOperator,
    start_kopf,
    start_nodegate,
)
from tests.bench.procstat import usage
from tests.bench.results import OperatorResult, RaceResult, SizeResult, StormPhase, section_key
from tests.bench.scenario import (
    AUDIT_POLICY,
    BENCH_TAINT_KEYS,
    CLASS_KEY,
    HEARTBEAT_PERIOD_SECONDS,
    HEARTBEAT_STAGE_FILE,
    RACE_KEY,
    STORM_PHASES,
    Change,
    bench_node,
    burst_changes,
    heartbeat_stage,
    node_name,
    race_node_name,
    registration_taints_of_race_pool,
    steady_changes,
    storm_changes,
)
from tests.bench.stats import Latency
from tests.bench.watchlog import Keys, WatchLog

# The node-lifecycle controller lifts each new node's not-ready taint through the
# controller-manager's client, limited by default to 20 requests/s shared by every controller:
# measured here, 1,000 new nodes were still not all schedulable after 180 s. Managed control
# planes are not held to that on 2 cores, so the benchmark raises it (registration and the race
# only; nothing else the controller-manager does is on a measured path). kwok logs one line per
# Lease renewal at INFO (500 lines/s at 5,000 nodes): warnings only.
CONTROL_PLANE_ARGS = {
    "kube-controller-manager": ["--kube-api-qps=200", "--kube-api-burst=400"],
    "kwok": ["--v=WARN"],
}


def _control_plane_args(plan: Plan) -> dict[str, list[str]]:
    """With `--profile`, the API server also serves /debug/pprof (its own CPU profile of each
    storm phase: where the phase's time goes once nodegate keeps up)."""
    args = {name: list(flags) for name, flags in CONTROL_PLANE_ARGS.items()}
    if plan.profile_dir is not None:
        args.setdefault("kube-apiserver", []).append("--profiling=true")  # the last flag wins
    return args


REGISTRATION_SECONDS_PER_NODE = 0.5  # generous: a timeout here means the control plane is stuck
API_PROFILE_SECONDS = 20  # with --profile: the API server's profile of a phase's start
STORM_PERCENTILES = (50, 90, 99)  # as node-readiness-controller's scale report gives them
FLOOR_THREADS = (16, 64)  # the load generator's own 16, and more than any operator runs
# nodegate runs at its shipped defaults unless told otherwise (one declaration per setting).
DEFAULT_WRITE_QPS: float = ReconcilerSettings.model_fields["write_qps"].default
DEFAULT_WRITE_BURST: int = ReconcilerSettings.model_fields["write_burst"].default


@dataclass(frozen=True)
class Plan:
    """How much of each measurement; the defaults are the issue's, `--smoke` shrinks them."""

    nodes: int
    rate: float = 20.0
    steady_seconds: float = 30.0
    burst: int = 200
    race_nodes: int = 1000
    write_qps: float = DEFAULT_WRITE_QPS
    write_burst: int = DEFAULT_WRITE_BURST
    resync_seconds: float | None = None  # None: after the flips are done (see resync_period)
    operators: tuple[OperatorName, ...] = ("nodegate", "nodegate-unlimited", "kopf")
    max_load: float = 2.0
    load_wait_seconds: float = 40 * 60
    settle_seconds: float = 10.0  # race: pods parked before the joins, and binding after them
    tag: str = ""  # a variant run's name: its own section in the document
    profile_dir: Path | None = None  # py-spy each operator (collapsed stacks): not for figures

    @property
    def steady_nodes(self) -> int:
        return round(self.rate * self.steady_seconds / 2)

    def resync_period(self) -> float:
        """Late enough that the resync measured follows cold converge and every flip phase."""
        if self.resync_seconds is not None:
            return self.resync_seconds
        converge = self.nodes / self.write_qps
        flips = 2 * self.steady_seconds + 60
        return max(60.0, round(1.5 * converge + flips + 60))


@dataclass
class Bench:
    """One control plane with its nodes, the watcher, and the audit log."""

    plan: Plan
    plane: LocalControlPlane
    core: k8s_client.CoreV1Api
    watch: WatchLog
    audit: AuditLog
    workdir: Path

    @property
    def names(self) -> list[str]:
        return [node_name(i) for i in range(self.plan.nodes)]

    def wait_all(
        self,
        names: list[str],
        predicate: Callable[[Keys], bool],
        what: str,
        timeout: float | None = None,
    ) -> float:
        if timeout is None:
            timeout = 120 + 3 * len(names) / self.plan.write_qps
        return self.watch.wait(lambda w: w.count(names, predicate) == len(names), timeout, what)


# --- the load gate ---------------------------------------------------------------------------


def wait_for_quiet(max_load: float, max_wait: float) -> tuple[tuple[float, float, float], bool]:
    """Wait (re-checking every minute) until the 1-minute load average is below `max_load`.

    The machine is shared: figures taken while others load it measure them too. Returns the
    load averages at the start and whether the machine was quiet; the caller records both.
    """
    deadline = time.monotonic() + max_wait
    while True:
        load = os.getloadavg()
        if load[0] < max_load:
            return load, True
        if time.monotonic() >= deadline:
            print(f"load average {load[0]:.2f} still >= {max_load} after waiting: CONTENDED run")
            return load, False
        print(f"load average {load[0]:.2f} >= {max_load}: waiting 60 s", flush=True)
        time.sleep(60)


class LoadSampler(threading.Thread):
    """The 1-minute load average every 10 s while a size runs: the table says how busy the
    machine was during the measurements, not only at their start."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(10):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop_event.set()

    def summary(self) -> tuple[float, float]:
        """(mean, max) of the samples so far."""
        if not self.samples:
            return (0.0, 0.0)
        return (sum(self.samples) / len(self.samples), max(self.samples))


# --- one size ----------------------------------------------------------------------------------


def measure_size(plan: Plan, command: str) -> SizeResult:
    bin_dir = ensure_built()
    stock = (paths.kwok_stages_dir(bin_dir) / HEARTBEAT_STAGE_FILE).read_text()
    with tempfile.TemporaryDirectory(prefix="nodegate-bench-") as tmp:
        workdir = Path(tmp)
        stage = workdir / HEARTBEAT_STAGE_FILE
        stage.write_text(heartbeat_stage(stock))
        load, quiet = wait_for_quiet(plan.max_load, plan.load_wait_seconds)
        started = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
        print(f"== {plan.nodes} nodes, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        plane = LocalControlPlane(
            with_scheduling=True,
            audit_policy=AUDIT_POLICY,
            kwok_stage_overrides={HEARTBEAT_STAGE_FILE: stage},
            extra_args=_control_plane_args(plan),
        )
        with plane:
            bench = Bench(
                plan,
                plane,
                cluster_ops.bench_api(plane),
                WatchLog(workdir / "watch.jsonl"),
                AuditLog(plane.audit_log_path),
                workdir,
            )
            watcher = subprocess.Popen(
                [sys.executable, "-m", "tests.bench.watcher", str(plane.kubeconfig_path),
                 str(bench.watch.path)],
                cwd=Path(__file__).resolve().parents[2],
            )  # fmt: skip
            loads = LoadSampler()
            loads.start()
            try:
                result = SizeResult(
                    nodes=plan.nodes,
                    started=started,
                    load_at_start=(load[0], load[1], load[2]),
                    quiet=quiet,
                    node_kib=0.0,
                    command=command,
                    write_qps=plan.write_qps,
                    write_burst=plan.write_burst,
                    tag=plan.tag,
                    heartbeat_events_per_second=plan.nodes / HEARTBEAT_PERIOD_SECONDS,
                    burst=plan.burst,
                )
                _register_nodes(bench, result)
                result.floor = _measure_floor(bench)
                result.burst_floor = _measure_burst_floor(bench)
                result.round_trip = _measure_round_trips(bench)
                result.flips_alone = _measure_flips_alone(bench)
                ready = time.monotonic()
                for index, operator in enumerate(plan.operators):
                    if index:
                        _reset(bench)
                    result.operators[operator] = _measure_operator(bench, operator)
                result.lifecycle_tainted_nodes = _lifecycle_tainted(bench, ready)
                result.control_plane = {
                    name: _usage_or_none(pid) for name, pid in plane.component_pids().items()
                }
                result.load_during = loads.summary()
                return result
            finally:
                loads.stop()
                watcher.terminate()
                watcher.wait(10)


LIFECYCLE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def _lifecycle_tainted(bench: Bench, since: float) -> int:
    """Benchmark nodes the node-lifecycle controller tainted after they were all Ready: each
    one is a kwok heartbeat that came too late (the control plane could not keep up)."""
    bench.watch.refresh()
    return sum(
        1
        for name in bench.names
        if any(
            t >= since and k is not None and k & LIFECYCLE_TAINTS
            for t, k in zip(bench.watch.times[name], bench.watch.keys[name], strict=True)
        )
    )


def _usage_or_none(pid: int) -> tuple[float, float] | None:
    """(peak RSS MiB, CPU seconds) of a control-plane component, None if it is gone."""
    try:
        measured = usage(pid)
    except FileNotFoundError:
        return None
    return (measured.peak_rss_mib, measured.cpu_seconds)


def _register_nodes(bench: Bench, result: SizeResult) -> None:
    started = time.monotonic()
    bench.watch.wait(lambda w: {"nodes", "pods"} <= w.synced, 60, "the watcher's first LIST")
    cluster_ops.create_nodes(bench.core, [bench_node(n) for n in bench.names])
    sample: Any = bench.core.read_node(bench.names[0], _preload_content=False)  # urllib3's
    result.node_kib = len(sample.data) / 1024
    # Registered, Ready, and the admission-added not-ready taint lifted by the node-lifecycle
    # controller: from here the nodes are a quiet, healthy cluster.
    bench.wait_all(
        bench.names,
        lambda k: not k,
        "nodes registered and not-ready lifted",
        timeout=120 + REGISTRATION_SECONDS_PER_NODE * len(bench.names),
    )
    print(f"{len(bench.names)} nodes of {result.node_kib:.1f} KiB ready in "
          f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip


def _measure_floor(bench: Bench) -> dict[str, dict[int, float]]:
    """The API server's own time for the storm's writes, before any operator runs: a taint
    patch on every node from a plain client, then one taking it off, per thread count."""
    floor: dict[str, dict[int, float]] = {phase: {} for phase, _ in STORM_PHASES}
    for threads in FLOOR_THREADS:
        for phase, on in STORM_PHASES:
            profile = _profile_api_server(bench, f"floor-{bench.plan.nodes}-{phase}-{threads}")
            seconds = cluster_ops.floor_seconds(bench.plane, bench.names, on, threads)
            floor[phase][threads] = seconds
            if profile is not None:
                profile.join()
            print(f"floor: {phase} {len(bench.names)} nodes from {threads} threads: "
                  f"{seconds:.2f} s", flush=True)  # fmt: skip
    return floor


def _measure_burst_floor(bench: Bench) -> float:
    """The API server's own time for a burst: a taint patch on `burst` nodes at once, from the
    load generator's 16 threads (then taken off again)."""
    nodes = bench.names[: bench.plan.burst]
    seconds = cluster_ops.floor_seconds(bench.plane, nodes, True, FLOOR_THREADS[0])
    cluster_ops.floor_seconds(bench.plane, nodes, False, FLOOR_THREADS[0])
    print(f"floor: a burst of {len(nodes)} taint patches from {FLOOR_THREADS[0]} threads: "
          f"{seconds * 1000:.0f} ms", flush=True)  # fmt: skip
    return seconds


def _measure_round_trips(bench: Bench) -> Latency:
    """The API server's round trip for one patch at the steady rate, before any operator."""
    plan = bench.plan
    nodes = bench.names[: plan.steady_nodes]
    latency = Latency(tuple(cluster_ops.round_trips(bench.plane, nodes, plan.rate)))
    print(f"floor: one taint patch at {plan.rate:g}/s, round trip p50/p95/p99 ms "
          f"{latency.cell()}", flush=True)  # fmt: skip
    return latency


def _measure_flips_alone(bench: Bench) -> dict[str, float]:
    """Each storm phase's flips sent with no operator running (the condition turned bad on
    every node, then good again, as the storm does): the phase's floor on the sending side."""
    alone: dict[str, float] = {}
    for phase, on in STORM_PHASES:
        profile = _profile_api_server(bench, f"flips-alone-{bench.plan.nodes}-{phase}")
        sent = cluster_ops.send_on_schedule(bench.core, storm_changes(bench.names, on), None)
        alone[phase] = time.monotonic() - min(sent)
        if profile is not None:
            profile.join()
        print(f"floor: {phase} phase's flips alone, no operator: {alone[phase]:.2f} s",
              flush=True)  # fmt: skip
    return alone


def _reset(bench: Bench) -> None:
    cluster_ops.parallel(lambda n: cluster_ops.reset_node(bench.core, n), bench.names, 16)
    bench.wait_all(bench.names, lambda k: not (k & BENCH_TAINT_KEYS), "nodes reset")


def _measure_operator(bench: Bench, name: OperatorName) -> OperatorResult:
    plan = bench.plan
    result = OperatorResult(operator=name)
    mark = bench.audit.mark()
    if name == "nodegate":
        settings = NodegateSettings(plan.write_qps, plan.write_burst, plan.resync_period())
        operator = start_nodegate(bench.plane.kubeconfig_path, bench.workdir, settings)
    elif name == "nodegate-unlimited":
        settings = NodegateSettings(*UNLIMITED_WRITES, plan.resync_period())
        operator = start_nodegate(bench.plane.kubeconfig_path, bench.workdir, settings, name)
    else:
        operator = start_kopf(bench.plane.kubeconfig_path, bench.workdir)
    profiler = _profile(operator, plan)
    try:
        done = bench.wait_all(bench.names, lambda k: CLASS_KEY in k, f"{name}: cold converge")
        result.converge_seconds = done - operator.started
        time.sleep(1)  # writes still in flight when the last taint became visible
        writes = bench.audit.writes(mark, USER_AGENT[name])
        result.converge_writes, result.converge_conflicts = writes.total, writes.conflicts
        result.converge_cpu_seconds = operator.usage().cpu_seconds
        print(f"{name}: cold converge {result.converge_seconds:.1f} s, {writes.total} writes",
              flush=True)  # fmt: skip
        operator.check_alive()
        if name != "nodegate-unlimited":  # that run is the storm's yardstick only
            _measure_flips(bench, operator, result)
        if name == "nodegate":
            _measure_resync(bench, operator, result)
        # "untainted" (nodegate's turn only; no rule matches those nodes) is the control: pods
        # do bind to nodes nobody taints, so a 0 in the other variants is a measurement.
        variants = {
            "nodegate": ("untainted", "registration", "reconciler"),
            "nodegate-unlimited": (),
            "kopf": ("reconciler",),
        }[name]
        for variant in variants:
            result.race[variant] = _measure_race(bench, operator, variant)
        _measure_storm(bench, operator, result)
        operator.check_alive()
        usage = operator.usage()
        result.peak_rss_mib, result.cpu_seconds = usage.peak_rss_mib, usage.cpu_seconds
        if operator.http_port is not None:  # nodegate times its collector's pauses itself
            full = {"generation": "2"}
            result.full_gc_pauses = int(operator.metric("nodegate_gc_pause_seconds_count", **full))
            result.full_gc_seconds = operator.metric("nodegate_gc_pause_seconds_sum", **full)
    finally:
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
            profiler.wait(60)
        operator.stop()
    return result


def _profile(operator: RunningOperator, plan: Plan) -> subprocess.Popen[bytes] | None:
    """py-spy over every thread of the operator, sampled without pausing it (--nonblocking)."""
    if plan.profile_dir is None:
        return None
    plan.profile_dir.mkdir(parents=True, exist_ok=True)
    out = plan.profile_dir / f"{operator.name}-{plan.nodes}.collapsed"
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    argv = [py_spy, "record", "--pid", str(operator.process.pid), "--rate", "50",
            "--nonblocking", "--format", "raw", "--output", str(out)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _profile_api_server(bench: Bench, name: str) -> threading.Thread | None:
    """The API server's CPU profile (pprof) over the next `API_PROFILE_SECONDS`, written to
    the profile directory as `apiserver-NAME.pprof` by a thread of its own (`go tool pprof`)."""
    if bench.plan.profile_dir is None:
        return None
    out = bench.plan.profile_dir / f"apiserver-{name}.pprof"
    seconds = API_PROFILE_SECONDS

    def fetch() -> None:
        response: Any = bench.core.api_client.call_api(
            "/debug/pprof/profile", "GET", query_params=[("seconds", seconds)],
            auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=seconds + 60,
        )  # fmt: skip
        out.write_bytes(response[0].data)

    thread = threading.Thread(target=fetch, name=f"pprof-{name}", daemon=True)
    thread.start()
    return thread


def _measure_flips(bench: Bench, operator: RunningOperator, result: OperatorResult) -> None:
    plan = bench.plan
    names, steady, burst = bench.names, plan.steady_nodes, plan.burst
    needed = 2 * steady + 2 * burst
    if needed > len(names):
        raise ValueError(f"the flips need {needed} distinct nodes; only {len(names)} exist")
    slices = {
        "label, steady": steady_changes("label", names[:steady]),
        "condition, steady": steady_changes("condition", names[steady : 2 * steady]),
        "label, burst": burst_changes("label", names[2 * steady : 2 * steady + burst]),
        "condition, burst": burst_changes("condition", names[2 * steady + burst : needed]),
    }
    mark = bench.audit.mark()
    steady_seen: list[SeenChange] = []
    for case, changes in slices.items():
        rate = plan.rate if "steady" in case else None
        sent = cluster_ops.send_on_schedule(bench.core, changes, rate)
        result.latencies[case] = _latencies(bench, changes, sent, case)
        if rate is not None:
            steady_seen += _seen(bench, changes, sent)
        result.changes += len(changes)
        operator.check_alive()
        print(f"{operator.name}: {case}: p50/p95/p99 ms {result.latencies[case].cell()}",
              flush=True)  # fmt: skip
    time.sleep(2)  # writes still in flight (e.g. a second write for one change) are counted
    writes = bench.audit.writes(mark, USER_AGENT[operator.name])
    result.change_writes, result.change_conflicts = writes.total, writes.conflicts
    wall_minus_monotonic = time.time() - time.monotonic()
    result.steady_split = split(
        steady_seen,
        bench.audit.node_writes(mark),
        cluster_ops.USER_AGENT,
        USER_AGENT[operator.name],
        wall_minus_monotonic,
    )
    print(f"{operator.name}: steady changes split p50/p95/p99 ms: " + "; ".join(
        f"{segment} {latency.cell()}" for segment, latency in result.steady_split.items()
    ), flush=True)  # fmt: skip


def _measure_storm(bench: Bench, operator: RunningOperator, result: OperatorResult) -> None:
    """node-readiness-controller's scale workload: the condition turned bad on every node at
    once, then good on every node at once; each phase timed from its first flip sent to the
    last node seen in its taint state."""
    for phase, on in STORM_PHASES:
        changes = storm_changes(bench.names, on)
        profile = _profile_api_server(bench, f"{operator.name}-{bench.plan.nodes}-storm-{phase}")
        sent = cluster_ops.send_on_schedule(bench.core, changes, None)
        send_seconds = time.monotonic() - min(sent)
        latency = _latencies(bench, changes, sent, f"storm, {phase}")
        last = max(
            (bench.watch.first_at_or_after(c.node, t, c.satisfied_by) or 0.0)
            for c, t in zip(changes, sent, strict=True)
        )
        result.storm[phase] = StormPhase(last - min(sent), send_seconds, latency)
        if profile is not None:
            profile.join()
        operator.check_alive()
        cell = latency.cell(STORM_PERCENTILES)
        print(f"{operator.name}: storm, {phase}: {result.storm[phase].seconds:.1f} s "
              f"(sending {send_seconds:.1f} s); per node p50/p90/p99 ms {cell}",
              flush=True)  # fmt: skip


def _seen(bench: Bench, changes: list[Change], sent: list[float]) -> list[SeenChange]:
    """Each change that arrived, with when it was sent and when the watcher saw it."""
    seen = (
        (c.node, t, bench.watch.first_at_or_after(c.node, t, c.satisfied_by))
        for c, t in zip(changes, sent, strict=True)
    )
    return [SeenChange(node, t, at) for node, t, at in seen if at is not None]


def _latencies(bench: Bench, changes: list[Change], sent: list[float], case: str) -> Latency:
    """Change sent → the watcher sees the node's taints as the change requires."""
    with contextlib.suppress(TimeoutError):  # what did not arrive is reported as missing
        bench.watch.wait(
            lambda w: all(
                w.first_at_or_after(c.node, t, c.satisfied_by) is not None
                for c, t in zip(changes, sent, strict=True)
            ),
            60 + 3 * len(changes) / bench.plan.write_qps,
            case,
        )
    samples, missing = [], 0
    for change, t in zip(changes, sent, strict=True):
        seen = bench.watch.first_at_or_after(change.node, t, change.satisfied_by)
        if seen is None:
            missing += 1
        else:
            samples.append(seen - t)
    return Latency(tuple(samples), missing)


def _measure_resync(bench: Bench, operator: RunningOperator, result: OperatorResult) -> None:
    """Wait for the next periodic resync; its time is nodegate's own measure of the pass
    (`nodegate_resync_duration_seconds`: every node queued, until each was reconciled), its
    writes from the metric and the audit log."""
    period = bench.plan.resync_period()
    before = operator.metric("nodegate_resyncs_total")
    writes_before = operator.metric("nodegate_node_writes_total")
    mark = bench.audit.mark()
    deadline = time.monotonic() + period + 60
    while operator.metric("nodegate_resyncs_total") == before:
        if time.monotonic() > deadline:
            result.notes.append("no full resync seen in time")
            return
        time.sleep(0.5)
    result.resync_seconds = operator.metric("nodegate_resync_duration_seconds")
    time.sleep(1)
    metric_writes = operator.metric("nodegate_node_writes_total") - writes_before
    audit_writes = bench.audit.writes(mark, USER_AGENT[operator.name]).total
    result.resync_writes = max(int(metric_writes), audit_writes)
    print(f"nodegate: no-op resync {result.resync_seconds:.2f} s, {result.resync_writes} writes",
          flush=True)  # fmt: skip


def _wait_for_bindings(bench: Bench, prefix: str, expected: int) -> None:
    """Until every pod of `prefix` is bound, or no new binding came for 30 s."""
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 30:
        bench.watch.refresh()
        bound = sum(1 for pod in bench.watch.bindings if pod.startswith(prefix + "-"))
        if bound >= expected:
            return
        if bound != seen:
            seen, quiet_since = bound, time.monotonic()
        time.sleep(1)


def _measure_race(bench: Bench, operator: RunningOperator, variant: str) -> RaceResult:
    names = [race_node_name(f"{operator.name}-{variant}", i) for i in range(bench.plan.race_nodes)]
    taints = tuple(registration_taints_of_race_pool()) if variant == "registration" else ()
    prefix = f"{operator.name}-{variant}"
    cluster_ops.create_race_pods(bench.core, prefix, names)
    time.sleep(bench.plan.settle_seconds / 3)  # the scheduler tried them and parked them
    if variant == "untainted":
        bodies = [bench_node(n, in_class=False) for n in names]
    else:
        bodies = [bench_node(n, labels={RACE_KEY: "yes"}, taints=taints) for n in names]
    cluster_ops.create_nodes(bench.core, bodies)
    if variant == "untainted":
        _wait_for_bindings(bench, prefix, len(names))
    else:
        bench.wait_all(
            names,
            lambda k: RACE_KEY in k,
            f"{prefix}: race nodes tainted",
            timeout=120 + REGISTRATION_SECONDS_PER_NODE * len(names),
        )
    time.sleep(bench.plan.settle_seconds)  # every binding the scheduler was going to make
    bench.watch.refresh()
    bound = before = 0
    for pod, (when, node) in bench.watch.bindings.items():
        if not pod.startswith(prefix + "-"):
            continue
        bound += 1
        tainted = bench.watch.first_at_or_after(node, 0.0, lambda k: bool(k & BENCH_TAINT_KEYS))
        if tainted is None or when < tainted:
            before += 1
    cluster_ops.delete_race_pods(bench.core)
    cluster_ops.delete_nodes(bench.core, names)
    bench.watch.wait(
        lambda w: all(w.keys.get(n, [None])[-1] is None for n in names), 120, "race nodes gone"
    )
    operator.check_alive()
    print(f"{operator.name}: race ({variant}): {bound} of {len(names)} pods bound, "
          f"{before} before the taint", flush=True)  # fmt: skip
    return RaceResult(joined=len(names), pods_bound=bound, bound_before_taint=before)


# --- command line ------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.run", description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--rate", type=float, default=20.0, help="steady changes per second")
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--race-nodes", type=int, default=1000)
    parser.add_argument(
        "--write-qps",
        type=float,
        default=DEFAULT_WRITE_QPS,
        help="nodegate's --write-qps (default: the reconciler's)",
    )
    parser.add_argument("--write-burst", type=int, default=DEFAULT_WRITE_BURST)
    parser.add_argument("--resync-seconds", type=float, default=None)
    parser.add_argument(
        "--operators", nargs="+", default=list(Plan.operators), choices=list(USER_AGENT)
    )
    parser.add_argument("--max-load", type=float, default=2.0)
    parser.add_argument("--load-wait-minutes", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--tag", default="", help="name of a variant run (own doc section)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy output directory")
    return parser.parse_args(argv)


def plans(args: argparse.Namespace) -> list[Plan]:
    return [
        Plan(
            nodes=n,
            rate=args.rate,
            steady_seconds=args.steady_seconds,
            burst=args.burst,
            race_nodes=args.race_nodes,
            write_qps=args.write_qps,
            write_burst=args.write_burst,
            resync_seconds=args.resync_seconds,
            operators=tuple(args.operators),
            max_load=args.max_load,
            load_wait_seconds=args.load_wait_minutes * 60,
            tag=args.tag,
            profile_dir=args.profile,
        )
        for n in args.nodes
    ]


def main(argv: list[str] | None = None) -> list[SizeResult]:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "python -m tests.bench.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    results = []
    for plan in plans(args):
        size = measure_size(plan, command)
        results.append(size)
        print(report.update_document(args.out, size, report.environment()), flush=True)
        raw = report.artefact_path(args.out, section_key(size), "json")
        raw.write_text(json.dumps(dataclasses.asdict(size), indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
