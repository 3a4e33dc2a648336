"""`make bench-storm`: issue 62's condition storm, beside the bare-client floor of the same run.

node-readiness-controller's own scale test, as the issue measured it: N kwok nodes of kubelet
size, one continuous rule (condition `TestReady` not True, or not reported → the taint
`readiness.k8s.io/TestReady=pending:NoSchedule`), and a load generator that flips every node's
condition from `--threads` (32) threads, about 250 changes a second at 1,000 nodes. nodegate runs
at its shipped defaults (workers, write limit), as its own process, as a user runs it.

For each size, in one control plane:

1. the **floor**: a bare client (connections open, no decoding) puts a taint on every node and
   takes it off again from `--floor-threads` (16) threads, nothing else writing, `--rounds`
   times: seconds for all the answers (the API server's own pace for the same 1,000 patches);
2. the **flips alone**: the generator's storm with no operator running, `--rounds` times (its
   send time when nothing else competes for the cores);
3. nodegate started (`--revisions A B`: each commit's nodegate in turn, read with `git archive`,
   so a before and an after take turns on the same cluster under the same load; none: this work
   tree's; `--nodegate-args '--workers 16' '--workers 32'`: each set of flags a variant taking
   turns too, a sweep of a setting), and a storm run: a tainting phase (every node's condition
   turned False) and an untainting phase (turned True), each from its first flip sent to the
   separate watcher (`watcher.py`) seeing the last node in its taint state, with the generator's
   send time in that phase, each node's latency to its taint seen from its flip sent, and from
   its condition seen by the same watcher (what a node carries untainted, to any client,
   without the flip's own wait at the API server), and the watch's delivery (a flip's answer to
   its condition seen); nodegate's writes and 409 conflicts in the phase, a
   changed node's mean wait for a worker and a reconcile's mean time (its metrics), and its CPU
   seconds from the phase's first flip until its process is idle again (so the Events a phase
   defers are counted in it), per change; `--rounds` (3) times, floors included;
4. each nodegate's peak RSS (VmHWM).

The figures are printed as a table (no timed assertions: a benchmark). `--profile DIR` records
the last revision's nodegate with py-spy during two more storm rounds after the measured ones,
whose figures are printed but left out of the table: every thread not idle
(`DIR/nodegate-storm-N-REV-active.raw`) and only the thread holding the GIL (`-gil.raw`: where
its Python CPU goes), as folded stacks (`python -m tests.bench.stacks` sorts them into the
stages of a change). py-spy itself takes a core's fifth or more on this machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.localcluster import paths
from nodegate.localcluster.build import ensure_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import STRATEGIC_MERGE_PATCH
from tests.bench import cluster_ops
from tests.bench.operators import REPO_ROOT
from tests.bench.procstat import usage
from tests.bench.run import CONTROL_PLANE_ARGS, LoadSampler, wait_for_quiet
from tests.bench.scenario import HEARTBEAT_STAGE_FILE, bench_node, heartbeat_stage, node_name
from tests.bench.stats import Latency
from tests.bench.watchlog import WatchLog
from tests.e2e.support.reconciler_process import free_port, http_get, metric_total

CONDITION = "TestReady"
TAINT_KEY = f"readiness.k8s.io/{CONDITION}"
RULES_YAML = f"""apiVersion: nodegate.dev/v1
kind: NodeRules
conditionTaints:
  - name: test-ready
    conditions:
      - type: {CONDITION}
        status: False|Unknown
        defaultStatus: Unknown
    taint: {{key: {TAINT_KEY}, value: pending, effect: NoSchedule}}
"""
"""The issue's one rule: node-readiness-controller's continuous rule as `nodegate migrate`
writes it (a node that reports no TestReady counts as Unknown, so tainted)."""
PHASES: tuple[tuple[str, bool], ...] = (("taint", True), ("untaint", False))
PERCENTILES = (50, 90, 99)
IDLE_CPU_SECONDS = 0.02
"""nodegate counts as idle once it used less than this much CPU in `IDLE_POLL_SECONDS`."""
IDLE_POLL_SECONDS = 0.5


@dataclass
class Phase:
    seconds: float
    send_seconds: float
    latency: Latency
    """Each node's flip sent → its taint seen."""
    carried: Latency
    """Each node's condition seen → its taint seen, by the watcher: how long the node carried
    its condition untainted, to any client (the watcher's own lag is in both readings)."""
    delivery: Latency
    """Each flip's answer → its condition seen by the watcher: the watch's delivery lag."""
    cpu_seconds: float
    """nodegate's CPU from the first flip until it was idle again."""
    writes: float = 0.0
    conflicts: float = 0.0
    """nodegate's Node writes, and its 409s among them, in the phase."""
    queue_wait: float = 0.0
    reconcile: float = 0.0
    """A changed node's mean wait for a worker, and a reconcile's mean time (its PATCH's
    round trip among it), in the phase: where nodegate's share of a latency went."""


@dataclass
class Variant:
    """One nodegate under test: `tree` is a directory put first on its PYTHONPATH holding a
    `nodegate/` namespace of a commit's packages (`baseline_tree`), None for this work tree."""

    name: str
    tree: Path | None = None
    extra_args: tuple[str, ...] = ()
    """Flags added to `nodegate reconcile`'s (`--nodegate-args`: a sweep of a setting)."""
    phases: dict[str, list[Phase]] = field(default_factory=dict)
    peak_rss_mib: list[float] = field(default_factory=list)


@dataclass
class StormRun:
    nodes: int
    load_at_start: tuple[float, float, float]
    variants: list[Variant]
    floor: dict[str, list[float]] = field(default_factory=dict)
    alone: dict[str, list[float]] = field(default_factory=dict)
    load_during: tuple[float, float] = (0.0, 0.0)
    commit: str = ""


PACKAGE_DIRS = ("defaults", "core", "bootstrap", "reconciler", "infra", "manifests", "cli",
                "templates", "examples", "migrate")  # fmt: skip
"""pyproject.toml's package-dir: nodegate.X lives in X/ (a revision older than one of them has
not got it)."""


def baseline_tree(revision: str, workdir: Path) -> Path:
    """`revision`'s packages as a `nodegate/` namespace under a directory of their own (read
    with `git archive`: the shared work tree and its index are left alone)."""
    root = workdir / f"baseline-{revision}"
    source = root / "src"
    source.mkdir(parents=True)
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", revision],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    packages = [package for package in PACKAGE_DIRS if package in listed]
    archive = subprocess.run(
        ["git", "archive", revision, *packages],
        cwd=REPO_ROOT, capture_output=True, check=True,
    )  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    (root / "nodegate").mkdir()
    for package in packages:
        (root / "nodegate" / package).symlink_to(source / package, target_is_directory=True)
    return root


def _condition(ready: bool) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": CONDITION,
        "status": "True" if ready else "False",
        "reason": "BenchStorm",
        "message": "set by the storm benchmark",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def flip_all(
    core: k8s_client.CoreV1Api, names: list[str], ready: bool, threads: int
) -> tuple[list[float], list[float]]:
    """Every node's condition set at once from `threads` threads, as NRC's scale test's load
    generator does; each flip's send time and its answer's (CLOCK_MONOTONIC)."""
    sent, answered = [0.0] * len(names), [0.0] * len(names)

    def send(index: int) -> None:
        sent[index] = time.monotonic()
        body: Any = {"status": {"conditions": [_condition(ready)]}}
        core.patch_node_status(
            names[index], body, _content_type=STRATEGIC_MERGE_PATCH, _preload_content=False
        )
        answered[index] = time.monotonic()

    cluster_ops.parallel(send, range(len(names)), threads)
    return sent, answered


def _tainted(on: bool) -> Any:
    return lambda keys: (TAINT_KEY in keys) == on


def _wait_idle(pid: int, timeout: float = 120.0) -> None:
    """Until nodegate's process uses (almost) no CPU: what a phase deferred is done."""
    deadline = time.monotonic() + timeout
    last = usage(pid).cpu_seconds
    while time.monotonic() < deadline:
        time.sleep(IDLE_POLL_SECONDS)
        now = usage(pid).cpu_seconds
        if now - last < IDLE_CPU_SECONDS:
            return
        last = now


def _phase(
    watch: WatchLog,
    core: k8s_client.CoreV1Api,
    names: list[str],
    on: bool,
    threads: int,
    pid: int,
    port: int,
) -> Phase:
    before = usage(pid).cpu_seconds
    counters_before = _counters(port)
    sent, answered = flip_all(core, names, not on, threads)
    first = min(sent)
    send_seconds = time.monotonic() - first
    predicate = _tainted(on)
    watch.wait(
        lambda w: all(
            w.first_at_or_after(n, t, predicate) is not None
            for n, t in zip(names, sent, strict=True)
        ),
        120 + 0.1 * len(names),
        f"storm, {'tainted' if on else 'untainted'}",
    )
    seen = [watch.first_at_or_after(n, t, predicate) for n, t in zip(names, sent, strict=True)]
    samples = tuple(s - t for s, t in zip(seen, sent, strict=True) if s is not None)
    status = "False" if on else "True"
    shown = [watch.condition_seen(n, t, status) for n, t in zip(names, sent, strict=True)]
    carried = tuple(
        s - c for s, c in zip(seen, shown, strict=True) if s is not None and c is not None
    )
    # An answer can come after the watcher saw the condition (the flip's answer waits behind
    # its watch fan-out): no delay at all, then.
    delivery = tuple(max(0.0, c - a) for c, a in zip(shown, answered, strict=True) if c is not None)
    last = max(s for s in seen if s is not None)
    _wait_idle(pid)
    cpu = usage(pid).cpu_seconds - before
    writes, conflicts, waited, waits, reconciling, reconciles = (
        after - b for after, b in zip(_counters(port), counters_before, strict=True)
    )
    return Phase(
        last - first,
        send_seconds,
        Latency(samples),
        Latency(carried),
        Latency(delivery),
        cpu,
        writes,
        conflicts,
        waited / max(waits, 1),
        reconciling / max(reconciles, 1),
    )


def _counters(port: int) -> tuple[float, ...]:
    """nodegate's Node writes and 409 conflicts so far, and the sums and counts of its
    changed nodes' queue waits and of its reconciles, from its metrics."""
    _status, text = http_get(port, "/metrics")
    return (
        metric_total(text, "nodegate_node_writes_total"),
        metric_total(text, "nodegate_write_conflicts_total"),
        metric_total(text, "nodegate_queue_wait_seconds_sum", lane="event"),
        metric_total(text, "nodegate_queue_wait_seconds_count", lane="event"),
        metric_total(text, "nodegate_reconcile_duration_seconds_sum"),
        metric_total(text, "nodegate_reconcile_duration_seconds_count"),
    )


def _start_nodegate(
    kubeconfig: Path, workdir: Path, variant: Variant
) -> tuple[subprocess.Popen[bytes], int, Path]:
    rules = workdir / "storm-rules.yaml"
    rules.write_text(RULES_YAML)
    port = free_port()
    log_path = workdir / f"nodegate-storm-{variant.name}.log"
    argv = [
        sys.executable, "-m", "nodegate.cli", "reconcile",
        "--kubeconfig", str(kubeconfig),
        "--rules-file", str(rules),
        "--no-leader-elect",
        "--http-port", str(port),
        *variant.extra_args,
    ]  # fmt: skip
    env = os.environ.copy()
    if variant.tree is not None:
        env["PYTHONPATH"] = str(variant.tree)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
            env=env,
        )  # fmt: skip
    return process, port, log_path


def _wait_ready(process: subprocess.Popen[bytes], port: int, nodes: int, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nodegate exited: {log.read_text(errors='replace')[-3000:]}")
        status, _ = http_get(port, "/readyz")
        if status == 200:
            text = http_get(port, "/metrics")[1]
            if metric_total(text, "nodegate_cached_objects", informer="nodes") >= nodes:
                return
        time.sleep(0.5)
    raise TimeoutError("nodegate not ready in 120 s")


def _py_spy(pid: int, out: Path, gil: bool) -> subprocess.Popen[bytes]:
    """py-spy over every thread, sampled without pausing the process; `gil`: only the thread
    holding the GIL (where the process's Python CPU goes), else every thread not idle."""
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    argv = [py_spy, "record", "--pid", str(pid), "--rate", "100", "--nonblocking",
            "--format", "raw", "--output", str(out), *(["--gil"] if gil else [])]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(nodes: int, args: Any) -> StormRun:
    bin_dir = ensure_built()
    stock = (paths.kwok_stages_dir(bin_dir) / HEARTBEAT_STAGE_FILE).read_text()
    load, _quiet = wait_for_quiet(args.max_load, args.load_wait_minutes * 60)
    names = [node_name(i) for i in range(nodes)]
    with tempfile.TemporaryDirectory(prefix="nodegate-storm-") as tmp:
        workdir = Path(tmp)
        trees: list[tuple[str, Path | None]] = [
            (r, baseline_tree(r, workdir)) for r in args.revisions
        ] or [("this tree", None)]
        variants = [
            Variant(" ".join((name, *flags)), tree, tuple(flags))
            for name, tree in trees
            for flags in (extra.split() for extra in args.nodegate_args or [""])
        ]
        run = StormRun(nodes, (load[0], load[1], load[2]), variants)
        run.commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, cwd=REPO_ROOT, check=False,
        ).stdout.strip()  # fmt: skip
        stage = workdir / HEARTBEAT_STAGE_FILE
        stage.write_text(heartbeat_stage(stock))
        plane = LocalControlPlane(
            with_scheduling=True,
            kwok_stage_overrides={HEARTBEAT_STAGE_FILE: stage},
            extra_args=CONTROL_PLANE_ARGS,
        )
        with plane:
            watch = WatchLog(workdir / "watch.jsonl")
            watcher = subprocess.Popen(
                [sys.executable, "-m", "tests.bench.watcher", str(plane.kubeconfig_path),
                 str(watch.path), CONDITION],
                cwd=REPO_ROOT,
            )  # fmt: skip
            loads = LoadSampler()
            loads.start()
            try:
                _storm(run, plane, watch, names, workdir, args)
            finally:
                loads.stop()
                run.load_during = loads.summary()
                watcher.terminate()
                watcher.wait(10)
    return run


def _storm(
    run: StormRun,
    plane: LocalControlPlane,
    watch: WatchLog,
    names: list[str],
    workdir: Path,
    args: Any,
) -> None:
    """Nodes, floors, then the variants' storms taking turns, round by round."""
    started = time.monotonic()
    threads, floor_threads = args.threads, args.floor_threads
    watch.wait(lambda w: "nodes" in w.synced, 60, "the watcher's first LIST")
    setup = cluster_ops.bench_api(plane)
    cluster_ops.create_nodes(setup, [bench_node(n) for n in names])
    watch.wait(
        lambda w: w.count(names, lambda k: not k) == len(names),
        120 + 0.5 * len(names),
        "nodes registered and not-ready lifted",
    )
    generator = cluster_ops.warm_api(plane, threads)
    flip_all(generator, names, True, threads)  # every node reports TestReady=True
    print(f"{len(names)} nodes ready in {time.monotonic() - started:.0f} s", flush=True)
    for phase, _on in PHASES:
        run.floor[phase], run.alone[phase] = [], []
        for variant in run.variants:
            variant.phases[phase] = []
    for _ in range(args.rounds):
        for phase, on in PHASES:
            seconds = cluster_ops.floor_seconds(plane, names, on, floor_threads)
            run.floor[phase].append(seconds)
            print(f"floor: {phase} from {floor_threads} threads: {seconds:.2f} s", flush=True)
        for phase, on in PHASES:
            sent, _answered = flip_all(generator, names, not on, threads)
            run.alone[phase].append(time.monotonic() - min(sent))
            print(f"flips alone: {phase} {run.alone[phase][-1]:.2f} s", flush=True)
        for variant in run.variants:
            _rounds_of(variant, plane, watch, names, generator, workdir, threads, None)
    if args.profile is not None:  # more rounds, profiled, out of the table
        args.profile.mkdir(parents=True, exist_ok=True)
        for variant in run.variants[-1:]:
            for mode in ("active", "gil"):
                tag = variant.name.replace(" ", "-")
                out = args.profile / f"nodegate-storm-{len(names)}-{tag}-{mode}.raw"
                _rounds_of(variant, plane, watch, names, generator, workdir, threads, (out, mode))


def _rounds_of(
    variant: Variant,
    plane: LocalControlPlane,
    watch: WatchLog,
    names: list[str],
    generator: k8s_client.CoreV1Api,
    workdir: Path,
    threads: int,
    profile: tuple[Path, str] | None,
) -> None:
    """One round (tainting, then untainting) by a nodegate started for it; a profiled round's
    figures are printed only."""
    process, port, log = _start_nodegate(plane.kubeconfig_path, workdir, variant)
    profiler = None
    try:
        _wait_ready(process, port, len(names), log)
        _wait_idle(process.pid)
        if profile is not None:
            profiler = _py_spy(process.pid, profile[0], gil=profile[1] == "gil")
        for phase, on in PHASES:
            result = _phase(watch, generator, names, on, threads, process.pid, port)
            if profile is None:
                variant.phases[phase].append(result)
            print(
                f"{variant.name}{' (profiled)' if profile else ''}: storm, {phase}: "
                f"{result.seconds:.2f} s (sending {result.send_seconds:.2f} s); per node "
                f"p50/p90/p99 ms {result.latency.cell(PERCENTILES)}, from the condition "
                f"seen {result.carried.cell(PERCENTILES)}, the watch's delivery "
                f"{result.delivery.cell(PERCENTILES)}; {result.writes:.0f} writes, "
                f"{result.conflicts:.0f} conflicts; mean queue wait {result.queue_wait * 1000:.0f}"
                f" ms, reconcile {result.reconcile * 1000:.0f} ms; {result.cpu_seconds:.1f} CPU-s",
                flush=True,
            )
        if process.poll() is not None:
            raise RuntimeError(f"nodegate exited: {log.read_text(errors='replace')[-3000:]}")
        if profile is None:
            variant.peak_rss_mib.append(usage(process.pid).peak_rss_mib)
    finally:
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
            profiler.wait(60)
        process.terminate()
        process.wait(30)


def _spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """median (min-max) of the rounds."""
    if not values:
        return "-"
    middle = fmt.format(statistics.median(values))
    if len(values) == 1:
        return middle
    return f"{middle} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def table(run: StormRun, threads: int, floor_threads: int) -> str:
    """The storm beside its floors: medians of the rounds, their range in brackets."""
    rounds = len(run.floor.get("taint", []))
    rows = [
        f"Storm over {run.nodes:,} nodes, nodegate at its defaults (commit {run.commit}); "
        f"load average at start {' '.join(f'{x:.2f}' for x in run.load_at_start)}, "
        f"during the run {run.load_during[0]:.1f} mean, {run.load_during[1]:.1f} max (2 cores); "
        f"{rounds} rounds, the variants taking turns: median (min-max).",
        "",
        f"| nodegate | phase | bare-client floor, {floor_threads} threads | flips alone, "
        f"{threads} threads | phase | generator's send time | phase / send time | "
        "phase / floor | per node p50 / p90 / p99 ms, each round | the same from the condition "
        "seen | the watch's delivery | writes (409s) | mean queue wait / reconcile ms | CPU-s | "
        "CPU-ms per change | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in run.variants:
        for phase, _on in PHASES:
            results = variant.phases.get(phase, [])
            floor = statistics.median(run.floor[phase])
            cells = [
                variant.name,
                phase,
                f"{_spread(run.floor[phase])} s",
                f"{_spread(run.alone[phase])} s",
                f"{_spread([r.seconds for r in results])} s",
                f"{_spread([r.send_seconds for r in results])} s",
                f"{_spread([r.seconds / r.send_seconds for r in results])}x",
                f"{_spread([r.seconds / floor for r in results])}x",
                "; ".join(r.latency.cell(PERCENTILES) for r in results) or "-",
                "; ".join(r.carried.cell(PERCENTILES) for r in results) or "-",
                "; ".join(r.delivery.cell(PERCENTILES) for r in results) or "-",
                _spread([r.writes for r in results], "{:.0f}")
                + f" ({_spread([r.conflicts for r in results], '{:.0f}')})",
                _spread([1000 * r.queue_wait for r in results], "{:.0f}")
                + " / "
                + _spread([1000 * r.reconcile for r in results], "{:.0f}"),
                _spread([r.cpu_seconds for r in results], "{:.1f}"),
                _spread([1000 * r.cpu_seconds / run.nodes for r in results], "{:.1f}"),
                _spread(variant.peak_rss_mib, "{:.0f}"),
            ]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=32, help="the load generator's")
    parser.add_argument("--floor-threads", type=int, default=16, help="the bare client's")
    parser.add_argument(
        "--revisions",
        nargs="*",
        default=[],
        help="commits whose nodegates take turns (each read with git archive); none: this tree's",
    )
    parser.add_argument(
        "--nodegate-args",
        nargs="*",
        default=[],
        help="sets of flags added to nodegate's, each set a variant taking turns with the others "
        "(a sweep: '--workers 16' '--workers 32'); with --revisions, each commit with each set",
    )
    parser.add_argument("--max-load", type=float, default=2.0)
    parser.add_argument("--load-wait-minutes", type=float, default=40.0)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy output directory")
    args = parser.parse_args(argv)
    for nodes in args.nodes:
        print(f"== storm over {nodes} nodes; load average {os.getloadavg()}", flush=True)
        run = measure(nodes, args)
        print()
        print(table(run, args.threads, args.floor_threads), flush=True)


if __name__ == "__main__":
    main()
