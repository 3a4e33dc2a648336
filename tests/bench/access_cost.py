"""What the reads an installation on NodeRules objects grants by default cost the reconciler at
N nodes, once rules read them (`access`, docs/reconciler.md "What access costs"): the memory
of the CSINodes and DaemonSets it holds. The Pods' cost is `agents_cost.py`'s.

`python -m tests.bench.access_cost --nodes 5000` (`make bench-access`): no control plane. A
fake list-watch API serves N CSINodes (one per node, as the kubelet writes them on an AKS node:
owned by their Node, four CSI drivers with their topology keys and allocatable count, the
kubelet's managedFields) and 20 DaemonSets (`agents_scenario.AGENTS`, as the API server
returns them), 200 a page, each page parsed from its JSON text as the reconciler's client does.
Each kind is listed by the real source's informer (`Watching.start`, the real `Informer`) into
the view it holds (`slim_csinode`, `slim_daemon_set`), in a process of its own, after a full
collection: tracemalloc's bytes allocated while listing and still held. Without rules that
read them nothing is listed at all (the sources start a watch only for the rules in force),
so a grant alone costs no memory. Prints a Markdown table. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

from nodegate.core.views.csi_nodes import slim_csinode
from nodegate.core.views.daemon_sets import slim_daemon_set
from nodegate.reconciler.kit.health import Health
from nodegate.reconciler.kit.kube import Page, RawObject, Selection
from nodegate.reconciler.nodes.sources.watched import Watching
from tests.bench import agents_scenario as scenario
from tests.bench.agents_cost import SilentWatches

MiB = 1024 * 1024
DRIVERS = (
    "disk.csi.azure.com",
    "file.csi.azure.com",
    "blob.csi.azure.com",
    "secrets-store.csi.k8s.io",
)
VIEWS: dict[str, tuple[str, Callable[[RawObject], object]]] = {
    "CSINode": ("csinodes", slim_csinode),
    "DaemonSet": ("daemonsets", slim_daemon_set),
}


def csinode_text(index: int) -> str:
    """One CSINode as the API server returns it (kubelet-written, four drivers)."""
    name = f"aks-pool{index % 4}-{index:05d}-vmss"
    uid = f"{index:08x}-7c1e-4a2b-9d3f-node00000000"
    drivers = [
        {
            "name": driver,
            "nodeID": name,
            "topologyKeys": ["topology.disk.csi.azure.com/zone"] if "disk" in driver else None,
            **({"allocatable": {"count": 8}} if "disk" in driver else {}),
        }
        for driver in DRIVERS
    ]
    return json.dumps(
        {
            "metadata": {
                "name": name,
                "uid": f"{index:08x}-5b2e-4c11-a0c3-csinode00000",
                "resourceVersion": str(90000 + index),
                "creationTimestamp": "2026-11-02T08:00:00Z",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
                "managedFields": [
                    {
                        "manager": "kubelet",
                        "operation": "Update",
                        "apiVersion": "storage.k8s.io/v1",
                        "time": "2026-11-02T08:00:31Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {
                            "f:metadata": {"f:ownerReferences": {".": {}}},
                            "f:spec": {"f:drivers": {".": {}}},
                        },
                    }
                ],
            },
            "spec": {"drivers": drivers},
        }
    )


class AccessApi(SilentWatches):
    """A list-watch API serving N CSINodes and the scenario's DaemonSets, a page at a time."""

    def __init__(self, nodes: int) -> None:
        super().__init__()
        self.nodes = nodes

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        start = int(continue_token or 0)
        if selection.kind == "DaemonSet":
            items = [scenario.daemon_set_body(a) for a in scenario.AGENTS]
            return Page(json.loads(json.dumps(items)), "1", None)
        if selection.kind != "CSINode":
            raise NotImplementedError(f"not served: {selection}")
        end = min(start + limit, self.nodes)
        page = json.loads("[" + ",".join(csinode_text(i) for i in range(start, end)) + "]")
        return Page(page, "1", str(end) if end < self.nodes else None)


def held(kind: str, nodes: int) -> dict[str, Any]:
    """List every object of `kind` into its source's view, traced: what is held after."""
    name, view = VIEWS[kind]
    api = AccessApi(nodes)
    errors: list[BaseException] = []
    watching = Watching(api, lambda _n, err: errors.append(err), Health(), lambda _node: None)
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    informer, stop = watching.start(name, Selection(kind), view, lambda *_: None)  # type: ignore[arg-type]
    if not informer.synced.wait(600) or errors:
        raise RuntimeError(f"{kind} did not list: {errors[:1]}")
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    objects = len(informer)
    stop.set()
    return {"kind": kind, "objects": objects, "held": grown}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--kind", choices=VIEWS, help="measure this one only (one process)")
    args = parser.parse_args(argv)
    if args.kind:
        print(json.dumps(held(args.kind, args.nodes)))
        return 0
    rows = []
    for kind in VIEWS:  # each in a process of its own: nothing of the other is counted
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.bench.access_cost",
                "--nodes",
                str(args.nodes),
                "--kind",
                kind,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    title = f"{args.nodes:,} nodes, held as the reconciler's source"
    print(f"| {title} | objects | held (tracemalloc) | per object |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        per = row["held"] / max(row["objects"], 1)
        print(
            f"| {row['kind']} | {row['objects']:,} | {row['held'] / MiB:.2f} MiB | {per:,.0f} B |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
