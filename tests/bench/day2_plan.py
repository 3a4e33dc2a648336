"""`nodegate plan` on thousands of nodes: how long the preview a CI job waits for takes.

`python -m tests.bench.day2_plan --nodes 5000` (`make bench-plan`): starts the local control
plane, registers N nodes of kubelet size (`SimNode(images=40)`, ~10.9 KiB each as the API server
returns them; a third labelled for the rule in force, a third for a new rule), puts the rules in
force in the rules ConfigMap, and runs the installed `nodegate plan --rules NEW` as a user does,
`-o json` and as a table, timing each from process start to exit (the nodes are listed in one
paginated LIST, 500 a page). Not part of `make test`: it takes minutes to register the nodes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode
from tests.bench import cluster_ops

IN_FORCE = cluster_ops.BATCH_RULES
NEW = IN_FORCE + (
    "  - name: gpu\n"
    "    match: {labels: {bench.example.com/role: gpu}}\n"
    '    taint: {key: bench.example.com/gpu, value: "true", effect: NoSchedule}\n'
    "    nodeMayLift: true\n"
)
ROLES = ("batch", "gpu", "web")
NAMESPACE = "nodegate-system"


def node_bodies(count: int) -> list[dict[str, object]]:
    bodies = []
    for i in range(count):
        role = ROLES[i % len(ROLES)]
        taints = (
            [{"key": "bench.example.com/batch", "value": "true", "effect": "NoSchedule"}]
            if role == "batch"
            else []
        )
        node = SimNode(
            name=f"plan-{i:05d}",
            labels={"bench.example.com/role": role, "nodegate.dev/pool": role},
            taints=taints,
            images=40,
        )
        bodies.append(node.body())
    return bodies


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=1800)
    return time.monotonic() - started, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each form")
    args = parser.parse_args(argv)
    nodegate = str(Path(sys.executable).parent / "nodegate")
    with tempfile.TemporaryDirectory() as tmp, LocalControlPlane() as plane:
        core = cluster_ops.bench_api(plane)
        started = time.monotonic()
        cluster_ops.create_nodes(core, node_bodies(args.nodes))
        print(f"{args.nodes} nodes registered in {time.monotonic() - started:.0f}s", flush=True)
        core.create_namespace(k8s_client.V1Namespace(metadata={"name": NAMESPACE}))
        body = k8s_client.V1ConfigMap(
            metadata={"name": "nodegate-rules"}, data={"rules.yaml": IN_FORCE}
        )
        core.create_namespaced_config_map(NAMESPACE, body)
        new = Path(tmp) / "new.yaml"
        new.write_text(NEW)
        base = [nodegate, "plan", "--rules", str(new), "--kubeconfig", str(plane.kubeconfig_path)]
        rows = []
        for form, extra in (
            ("-o json", ["-o", "json"]),
            ("table", []),
            ("--summary", ["--summary"]),
        ):
            for _ in range(args.runs):
                seconds, result = timed([*base, *extra])
                rows.append((form, seconds, result.returncode, len(result.stdout)))
                if form == "-o json":
                    assert result.stdout, result.stderr
                    report = json.loads(result.stdout)
                    assert report["nodes"] == args.nodes, report["nodes"]
                    assert report["changedNodes"] == len(range(1, args.nodes, 3))
    print(f"\n`nodegate plan` on {args.nodes} nodes (wall clock, process start to exit)")
    print(f"{'form':<12} {'seconds':>8} {'exit':>5} {'stdout bytes':>13}")
    for form, seconds, code, size in rows:
        print(f"{form:<12} {seconds:>8.2f} {code:>5} {size:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
