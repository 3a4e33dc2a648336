"""A quick figure, not the benchmark: the reconciler's peak RSS with N realistic nodes.

Starts the local control plane, registers N nodes of kubelet-like size (status.images etc.),
runs `nodegate reconcile` as a process with a label-taint rule that half of the nodes need,
waits for convergence, forces one relist (by restarting kube-apiserver, if the harness can),
and prints the reconciler's peak RSS (VmHWM). `python -m tests.bench.quick_rss --nodes 5000`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode
from tests.e2e.reconciler_process import free_port

RULES = """apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: ci-dedicated
    match: {labels: {example.com/dedicated: ci}}
    taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
"""


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--extra-env", default="")
    args = parser.parse_args()
    with LocalControlPlane() as plane, tempfile.TemporaryDirectory() as tmp:
        core = k8s_client.CoreV1Api(plane.client)

        def create(i: int) -> int:
            labels = {"example.com/dedicated": "ci"} if i % 2 == 0 else {}
            body = SimNode(name=f"node-{i:05d}", labels=labels, images=args.images).body()
            response: Any = core.create_node(body, _preload_content=False)  # type: ignore[arg-type]
            return len(response.data)

        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            sizes = list(pool.map(create, range(args.nodes)))
        print(
            f"created {args.nodes} nodes in {time.monotonic() - started:.1f}s; "
            f"mean object size {sum(sizes) / len(sizes) / 1024:.1f} KiB (as returned)"
        )
        rules = Path(tmp) / "rules.yaml"
        rules.write_text(RULES)
        port = free_port()
        env = dict(os.environ)
        for item in filter(None, args.extra_env.split(",")):
            key, _, value = item.partition("=")
            env[key] = value
        argv = [
            args.python,
            "-m",
            "nodegate.cli",
            "reconcile",
            "--kubeconfig",
            str(plane.kubeconfig_path),
            "--rules-file",
            str(rules),
            "--no-leader-elect",
            "--http-port",
            str(port),
        ]
        log = Path(tmp) / "reconciler.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        started = time.monotonic()
        want = args.nodes // 2 + args.nodes % 2
        while True:
            listed: Any = core.list_node(
                _preload_content=False, label_selector="example.com/dedicated=ci"
            )
            items = json.loads(listed.data)["items"]
            done = sum(
                1
                for n in items
                if any(t["key"] == "example.com/dedicated" for t in (n["spec"].get("taints") or []))
            )
            if done >= want or time.monotonic() - started > 900 or process.poll() is not None:
                break
            time.sleep(2)
        converge = time.monotonic() - started
        after_converge = _status_kib(process.pid, "VmHWM")
        rss_now = _status_kib(process.pid, "VmRSS")
        print(
            f"converged {done}/{want} in {converge:.1f}s; "
            f"RSS {rss_now / 1024:.0f} MiB, peak {after_converge / 1024:.0f} MiB"
        )
        process.terminate()
        process.wait(30)
        print(log.read_text()[-1500:])


if __name__ == "__main__":
    main()
