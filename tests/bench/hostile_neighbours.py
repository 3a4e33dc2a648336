"""What nodes that change themselves as fast as they can cost nodegate, beside the gate-lift
latency of a normal node.

`python -m tests.bench.hostile_neighbours` (`make bench-neighbours`, and the last table of
`make bench`): starts the local control plane and `nodegate reconcile` on rules that persist
`persist.bench.example.com/*` labels, taint on condition `BenchDiskBroken`, and gate nodes
labelled `bench.example.com/gated=yes` until their ready annotation. Then, for 0, 1 and 10
hostile nodes, each hostile node writes 50 changes a second for the window (half of them a
persisted label flipping, half the `reason` of a condition no rule reads: what a kubelet may
write about itself), while a normal gated node is born every second and given its ready
annotation. The table gives, per second of the window, the changes the hostile nodes made,
the reconciles and persisted-label record writes they caused, the reconciler's CPU, and the
time from each normal node's ready annotation to its gate lifted (median and worst), beside
how long the annotation write itself took to be answered (the machine's own contention: the
load generator, the API server, etcd and the reconciler share its cores).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch

from nodegate.core.decisions.persisted_labels import RECORD_LABEL
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from tests.bench.cluster_ops import bench_api
from tests.bench.procstat import usage
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

NAMESPACE = "nodegate-bench-hostile"
RATE = 50.0
"""Changes a second each hostile node writes."""
GATE = "bench.example.com/init"
RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
conditionTaints:
  - name: disk
    conditions: [{type: BenchDiskBroken, status: "True"}]
    taint: {key: bench.example.com/disk, value: "true", effect: NoSchedule}
startupGates:
  - name: init
    match: {labels: {bench.example.com/gated: "yes"}}
    taint: {key: bench.example.com/init, effect: NoSchedule}
    readyWhen: {annotation: bench.example.com/ready=true}
persistentLabels:
  prefixes: ["persist.bench.example.com/"]
  keyBy: providerID
"""


class Counter:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1


def hostile(core: k8s_client.CoreV1Api, name: str, stop: threading.Event, made: Counter) -> None:
    """RATE changes a second on its own Node: a persisted label flipping, a reason changing."""
    n, started = 0, time.monotonic()
    while not stop.is_set():
        if n % 2 == 0:
            body = {"metadata": {"labels": {"persist.bench.example.com/flip": str(n % 7)}}}
            core.patch_node(name, body, _preload_content=False)
        else:
            condition = {"type": "BenchNoise", "status": "True", "reason": f"R{n}"}
            status = {"status": {"conditions": [condition]}}
            core.patch_node_status(name, status, _preload_content=False)
        made.add()
        n += 1
        delay = started + n / RATE - time.monotonic()
        if delay > 0:
            stop.wait(delay)


def count_record_writes(core: k8s_client.CoreV1Api, stop: threading.Event, writes: Counter) -> None:
    watch = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    for _ in watch.stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_config_map,
        NAMESPACE,
        label_selector=RECORD_LABEL,
        timeout_seconds=600,
    ):
        if stop.is_set():
            break
        writes.add()
    watch.stop()  # type: ignore[no-untyped-call]


def gate_lift(core: k8s_client.CoreV1Api, name: str) -> tuple[float, float]:
    """Seconds from a new gated node's ready annotation to its gate lifted, and the annotation
    write's own round trip (what the API server, on this shared machine, answers in)."""
    create_node(
        core,
        SimNode(
            name=name,
            labels={"bench.example.com/gated": "yes"},
            taints=[{"key": GATE, "effect": "NoSchedule"}],
        ),
    )
    time.sleep(0.3)  # the reconciler has seen it born
    ready = time.monotonic()
    core.patch_node(name, {"metadata": {"annotations": {"bench.example.com/ready": "true"}}})
    answered = time.monotonic() - ready

    def lifted() -> float | None:
        node = core.read_node(name)
        taints = (node.spec.taints if node.spec else None) or []
        return time.monotonic() if all(t.key != GATE for t in taints) else None

    done: float = wait_until(lifted, 30, f"{name} lifted", interval=0.005)
    return done - ready, answered


def scenario(
    core: k8s_client.CoreV1Api, reconciler: ReconcilerProcess, hostiles: int, seconds: float
) -> tuple[float, ...]:
    names = [f"hostile-{hostiles}-{i}" for i in range(hostiles)]
    for name in names:
        create_node(core, SimNode(name=name, labels={"persist.bench.example.com/flip": "x"}))
    time.sleep(2)  # their records are made
    stop, made, records = threading.Event(), Counter(), Counter()
    threads = [
        threading.Thread(target=hostile, args=(core, name, stop, made), daemon=True)
        for name in names
    ]
    threads.append(
        threading.Thread(target=count_record_writes, args=(core, stop, records), daemon=True)
    )

    def reconciles() -> float:
        return reconciler.metric("nodegate_reconcile_duration_seconds_count")

    def cpu() -> float:
        return usage(reconciler.process.pid).cpu_seconds

    start_reconciles, start_cpu, started = reconciles(), cpu(), time.monotonic()
    for thread in threads:
        thread.start()
    lifts = []
    for k in range(int(seconds)):
        lifts.append(gate_lift(core, f"normal-{hostiles}-{k}"))
        time.sleep(max(0.0, started + k + 1 - time.monotonic()))
    elapsed = time.monotonic() - started
    per_second = (
        made.value / elapsed,
        (reconciles() - start_reconciles) / elapsed,
        records.value / elapsed,
        (cpu() - start_cpu) / elapsed * 100,
    )
    stop.set()
    for name in names:
        core.delete_node(name)
    gate = [lift for lift, _ in lifts]
    answer = statistics.median(answered for _, answered in lifts)
    return (*per_second, statistics.median(gate) * 1000, max(gate) * 1000, answer * 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args(argv)
    rows: list[tuple[int, tuple[float, ...]]] = []
    with tempfile.TemporaryDirectory() as tmp, LocalControlPlane() as plane, ExitStack() as stack:
        core = bench_api(plane, pool_size=16)
        core.create_namespace(k8s_client.V1Namespace(metadata={"name": NAMESPACE}))
        rules = k8s_client.V1ConfigMap(metadata={"name": "rules"}, data={"rules.yaml": RULES})
        core.create_namespaced_config_map(NAMESPACE, rules)
        reconciler = stack.enter_context(
            running_reconciler(
                plane.kubeconfig_path,
                Path(tmp),
                f"--rules-configmap={NAMESPACE}/rules",
                f"--state-namespace={NAMESPACE}",
                "--no-leader-elect",
            )
        )
        for hostiles in (0, 1, 10):
            rows.append((hostiles, scenario(core, reconciler, hostiles, args.seconds)))
    print(table(rows, args.seconds))
    return 0


def table(rows: list[tuple[int, tuple[float, ...]]], seconds: float) -> str:
    head = (
        "hostile nodes | their changes/s | reconciles/s | record writes/s | reconciler CPU % "
        "| gate lift p50 ms | gate lift max ms | the annotation write's own p50 ms"
    )
    lines = [
        f"Hostile neighbours: each writes {RATE:.0f} changes/s on its own Node "
        f"(a persisted label, a condition reason no rule reads), {seconds:.0f} s per row",
        head,
        "|".join("---" for _ in head.split("|")),
    ]
    for hostiles, values in rows:
        lines.append(" | ".join([str(hostiles), *(f"{v:.1f}" for v in values)]))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
