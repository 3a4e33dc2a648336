"""What a restart of the reconciler costs at N nodes: how long from the new process's start until
it is ready, and until its first write.

`python -m tests.bench.restart_cost --nodes 1000` (`make bench-restart`): starts the local control
plane, registers N nodes of kubelet size (`SimNode(images=40)`), half of them labelled for the
rule in force, and runs `nodegate reconcile` (leader-elected, its state in its own namespace)
until every labelled node carries its taint. Then, per run: SIGTERM (the Lease is released), a
label that needs a taint is put on one more node while no reconciler runs, and a new process is
started; the table gives, from its start, when `/readyz` first answered 200 and when that node
carried its taint (the new process's first write: nothing else needs one). Not part of
`make test`: registering the nodes takes a minute.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, wait_until
from tests.bench import cluster_ops
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

RULES = cluster_ops.BATCH_RULES
TAINT = "bench.example.com/batch"
NAMESPACE = "nodegate-bench"


def node_bodies(count: int) -> list[dict[str, object]]:
    return [
        SimNode(
            name=f"restart-{i:05d}",
            labels={"bench.example.com/role": "batch" if i % 2 == 0 else "web"},
            images=40,
        ).body()
        for i in range(count)
    ]


def tainted(core: k8s_client.CoreV1Api, name: str) -> bool:
    node = core.read_node(name)
    return any(t.key == TAINT for t in (node.spec.taints if node.spec else None) or [])


def first_time(check: Callable[[], bool], what: str) -> float:
    """When (monotonic) `check` first held, polled every 20 ms."""
    at: float = wait_until(lambda: time.monotonic() if check() else None, 300, what, interval=0.02)
    return at


def start(stack: ExitStack, plane: LocalControlPlane, log_dir: Path) -> ReconcilerProcess:
    args = (
        f"--rules-configmap={NAMESPACE}/rules",
        f"--lease-namespace={NAMESPACE}",
        f"--state-namespace={NAMESPACE}",
    )
    return stack.enter_context(
        running_reconciler(plane.kubeconfig_path, log_dir, *args, wait_ready=False)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    rows: list[tuple[int, float, float]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalControlPlane() as plane,
        ExitStack() as stack,
    ):
        core = cluster_ops.bench_api(plane)
        began = time.monotonic()
        cluster_ops.create_nodes(core, node_bodies(args.nodes))
        print(f"{args.nodes} nodes registered in {time.monotonic() - began:.0f}s", flush=True)
        core.create_namespace(k8s_client.V1Namespace(metadata={"name": NAMESPACE}))
        core.create_namespaced_config_map(
            NAMESPACE,
            k8s_client.V1ConfigMap(metadata={"name": "rules"}, data={"rules.yaml": RULES}),
        )
        process = start(stack, plane, Path(tmp))
        began = time.monotonic()
        last = f"restart-{(args.nodes - 1) // 2 * 2:05d}"
        wait_until(lambda: tainted(core, last), 600, "the first converge", interval=0.5)
        print(f"first converge in {time.monotonic() - began:.1f}s", flush=True)
        for run in range(args.runs):
            process.stop()
            name = f"restart-{2 * run + 1:05d}"  # a web node, untainted until now
            core.patch_node(name, {"metadata": {"labels": {"bench.example.com/role": "batch"}}})
            started = time.monotonic()
            process = start(stack, plane, Path(tmp))
            ready = first_time(process.is_ready, "ready")
            written = first_time(functools.partial(tainted, core, name), "the write")
            rows.append((run + 1, ready - started, written - started))
        process.stop()
    print(f"\na restart at {args.nodes} nodes (seconds from the new process's start)")
    print(f"{'run':>4} {'ready':>8} {'first write':>12}")
    for run, ready_s, write_s in rows:
        print(f"{run:>4} {ready_s:>8.2f} {write_s:>12.2f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
