"""The benchmark's own API calls: nodes created in bulk, changes sent on a schedule, resets.

Requests carry the User-Agent `nodegate-bench/` so the audit log never counts them as an
operator's. Bodies go out as plain JSON and answers are not decoded into model classes: the
load generator must not be the bottleneck it measures.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import MERGE_PATCH, STRATEGIC_MERGE_PATCH
from tests.bench.scenario import (
    BENCH_TAINT_KEYS,
    FLIP_KEY,
    FLOOR_KEY,
    PROBLEM_TYPE,
    RACE_NAMESPACE,
    Change,
)

USER_AGENT = "nodegate-bench/1"

BATCH_RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: batch
    match: {labels: {bench.example.com/role: batch}}
    taint: {key: bench.example.com/batch, value: "true", effect: NoSchedule}
    nodeMayLift: true
"""
"""The rules in force of the benchmarks that time one change on many nodes (a restart, a
rules preview): nodes labelled `bench.example.com/role=batch` get the batch taint."""
NOT_FOUND, CONFLICT = 404, 409


def bench_api(plane: LocalControlPlane, pool_size: int = 16) -> k8s_client.CoreV1Api:
    api = plane.api_client()
    api.user_agent = USER_AGENT
    api.configuration.connection_pool_maxsize = pool_size
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = pool_size
    return k8s_client.CoreV1Api(api)


def warm_api(plane: LocalControlPlane, threads: int) -> k8s_client.CoreV1Api:
    """A client with `threads` connections already open (TLS set up), as an operator's are:
    a floor measures the API server's answers, not 16 handshakes."""
    core = bench_api(plane, pool_size=threads)
    parallel(lambda _: core.get_api_resources(_preload_content=False), range(threads), threads)
    return core


def parallel(work: Callable[[Any], object], items: Iterable[Any], threads: int = 8) -> None:
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(work, items):
            pass


def create_nodes(core: k8s_client.CoreV1Api, bodies: list[dict[str, Any]]) -> None:
    parallel(lambda body: core.create_node(body, _preload_content=False), bodies)


def delete_nodes(core: k8s_client.CoreV1Api, names: list[str]) -> None:
    def delete(name: str) -> None:
        try:
            core.delete_node(name, _preload_content=False)
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise

    parallel(delete, names)


def _condition(status: bool) -> dict[str, str]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": PROBLEM_TYPE,
        "status": "True" if status else "False",
        "reason": "BenchFlip",
        "message": "set by the benchmark",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def apply_change(core: k8s_client.CoreV1Api, change: Change) -> None:
    """A label flip as an admin's `kubectl label`, a condition flip as node-problem-detector's
    status patch (conditions merge by type, so the kubelet's stay untouched)."""
    if change.kind == "label":
        patch = {"metadata": {"labels": {FLIP_KEY: "on" if change.on else None}}}
        core.patch_node(change.node, patch, _content_type=MERGE_PATCH, _preload_content=False)
    else:
        status: dict[str, Any] = {"status": {"conditions": [_condition(change.on)]}}
        core.patch_node_status(
            change.node, status, _content_type=STRATEGIC_MERGE_PATCH, _preload_content=False
        )


def send_on_schedule(
    core: k8s_client.CoreV1Api, changes: list[Change], rate: float | None, threads: int = 16
) -> list[float]:
    """Send each change at its slot (`rate` per second; None = all at once) and return each
    one's send time. Requests run on a pool so one slow answer does not delay the next slot."""
    sent = [0.0] * len(changes)
    errors: list[BaseException] = []
    start = time.monotonic()
    gate = threading.Barrier(min(threads, len(changes))) if rate is None else None

    def send(index: int) -> None:
        if rate is not None:
            slot = start + index / rate
            time.sleep(max(0.0, slot - time.monotonic()))
        elif gate is not None and index < gate.parties:
            gate.wait()  # a burst: the first wave leaves together
        sent[index] = time.monotonic()
        try:
            apply_change(core, changes[index])
        except ApiException as error:
            errors.append(error)

    parallel(send, range(len(changes)), threads)
    if errors:
        raise RuntimeError(f"{len(errors)} benchmark changes failed; first: {errors[0]}")
    return sent


def floor_seconds(plane: LocalControlPlane, names: list[str], on: bool, threads: int) -> float:
    """The API server alone: a plain client's taint patch on every node (`on`: the floor taint
    put on; otherwise the taints emptied), `threads` at a time; seconds for all the answers.

    Run while no operator runs and the nodes carry no taint, so emptying loses nothing."""
    core = warm_api(plane, threads)
    taints = [{"key": FLOOR_KEY, "value": "floor", "effect": "NoSchedule"}] if on else []

    def patch(name: str) -> None:
        core.patch_node(
            name, {"spec": {"taints": taints}}, _content_type=MERGE_PATCH, _preload_content=False
        )

    started = time.monotonic()
    parallel(patch, names, threads)
    return time.monotonic() - started


def round_trips(plane: LocalControlPlane, names: list[str], rate: float) -> list[float]:
    """A plain client's taint patch on each node at `rate` per second (nothing else writing):
    seconds from each request sent to its answer. A steady change needs two of them (the
    change, then the operator's write) and two watch deliveries before it can be seen tainted.

    The taints are taken off again afterwards (as `floor_seconds` leaves them)."""
    core = warm_api(plane, 16)
    taints = [{"key": FLOOR_KEY, "value": "floor", "effect": "NoSchedule"}]
    seconds = [0.0] * len(names)
    start = time.monotonic()

    def patch(index: int) -> None:
        time.sleep(max(0.0, start + index / rate - time.monotonic()))
        sent = time.monotonic()
        core.patch_node(
            names[index], {"spec": {"taints": taints}}, _content_type=MERGE_PATCH,
            _preload_content=False,
        )  # fmt: skip
        seconds[index] = time.monotonic() - sent

    parallel(patch, range(len(names)), 16)
    floor_seconds(plane, names, False, 16)
    return seconds


def reset_node(core: k8s_client.CoreV1Api, name: str) -> None:
    """Back to the starting state: no benchmark taint, flip label off, condition False.

    The taint list is written with the resourceVersion read (a 409 means a heartbeat came in
    between: read again), so taints the control plane owns are never lost.
    """
    core.patch_node_status(
        name,
        {"status": {"conditions": [_condition(False)]}},
        _content_type=STRATEGIC_MERGE_PATCH,
        _preload_content=False,
    )
    while True:
        response: Any = core.read_node(name, _preload_content=False)  # urllib3's response
        node = json.loads(response.data)
        taints = node["spec"].get("taints") or []
        kept = [t for t in taints if t["key"] not in BENCH_TAINT_KEYS]
        labels = node["metadata"].get("labels") or {}
        if kept == taints and FLIP_KEY not in labels:
            return
        patch = {
            "metadata": {
                "resourceVersion": node["metadata"]["resourceVersion"],
                "labels": {FLIP_KEY: None},
            },
            "spec": {"taints": kept or None},
        }
        try:
            core.patch_node(name, patch, _content_type=MERGE_PATCH, _preload_content=False)
        except ApiException as error:
            if error.status != CONFLICT:
                raise
            continue
        return


def create_race_pods(core: k8s_client.CoreV1Api, variant: str, nodes: list[str]) -> None:
    """One pending pod per node about to join, pinned to it by hostname and tolerating none of
    the benchmark taints: if it is bound, the scheduler saw its node without the taint."""
    try:
        namespace: Any = {"metadata": {"name": RACE_NAMESPACE}}  # plain JSON, as sent
        core.create_namespace(namespace, _preload_content=False)
    except ApiException as error:
        if error.status != CONFLICT:
            raise

    def create(node: str) -> None:
        body: Any = {  # plain JSON, as sent
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{variant}-{node}", "labels": {"bench": variant}},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "containers": [{"name": "app", "image": "registry.example.com/app:1"}],
                "terminationGracePeriodSeconds": 0,
            },
        }
        core.create_namespaced_pod(RACE_NAMESPACE, body, _preload_content=False)

    parallel(create, nodes)


def delete_race_pods(core: k8s_client.CoreV1Api, timeout: float = 300.0) -> None:
    """Delete every race pod, one request per pod from the client's threads, and wait until
    none is left.

    Not a collection delete: the API server works through one of those with a single worker
    (`--delete-collection-workers` 1) inside one request, which outlasted its 60 s request
    timeout at 1,000 pods on this machine (measured: a 504 once, a dropped connection once).
    """
    deadline = time.monotonic() + timeout

    def delete(name: str) -> None:
        try:
            core.delete_namespaced_pod(
                name, RACE_NAMESPACE, grace_period_seconds=0, _preload_content=False
            )
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise

    while True:
        listed: Any = core.list_namespaced_pod(RACE_NAMESPACE, _preload_content=False)
        names = [p["metadata"]["name"] for p in json.loads(listed.data)["items"]]
        if not names:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(names)} race pods still present after {timeout:.0f} s")
        parallel(delete, names)
        time.sleep(1)
