"""The separate watcher: when did each node's taints change, when was each race pod bound.

It runs as its own process (`python -m tests.bench.watcher KUBECONFIG OUT [CONDITION]`), apart
from the operator under test and from the load generator, so its clock readings are what any
other client of the API server would see. Each line of OUT is JSON with `t` (CLOCK_MONOTONIC,
shared by every process on the machine) and either a node's taint keys (`n`, `k`; `k` is null
when the node is deleted), the status of the node condition CONDITION when it changes (`cn`,
`c`; `c` is null when the node reports none), a pod binding (`pod`, `node`), or `synced` after
the first LIST of a kind. A taint's latency from the condition both seen here is what a node
carries untainted, to any client, whatever this watcher's own lag.
Watch lines are decoded with `json.loads` only: the client's model classes would make the
watcher the slowest process at 5,000 nodes.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from tests.bench.scenario import RACE_NAMESPACE

GONE = 410


class Output:
    """JSON lines, one writer lock, flushed per line so the driver can follow the file."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"t": time.monotonic(), **record})
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _lines(response: Any) -> Iterator[bytes]:
    """Complete lines of a streamed watch response."""
    pending = b""
    for chunk in response.stream(65536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line)


def follow(
    list_call: Callable[..., Any],
    on_object: Callable[[str, dict[str, Any]], None],
    on_synced: Callable[[], None],
) -> None:
    """List (paginated), then watch from the list's resourceVersion forever; relist on 410."""
    while True:
        resource_version, token = "", None
        while True:
            page = json.loads(list_call(limit=500, _continue=token, _preload_content=False).data)
            for item in page["items"]:
                on_object("ADDED", item)
            resource_version = page["metadata"]["resourceVersion"]
            token = page["metadata"].get("continue")
            if not token:
                break
        on_synced()
        while True:
            response = list_call(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=240,
                _preload_content=False,
            )
            gone = False
            for line in _lines(response):
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    gone = obj.get("code") == GONE
                    break
                resource_version = obj["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    on_object(event["type"], obj)
            response.release_conn()
            if gone:
                break


def _status_of(node: dict[str, Any], condition: str) -> str | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c.get("status") for c in conditions if c.get("type") == condition), None)


def watch_nodes(core: k8s_client.CoreV1Api, out: Output, condition: str | None = None) -> None:
    seen: dict[str, tuple[str, ...] | None] = {}
    statuses: dict[str, str | None] = {}

    def on_node(kind: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        keys = (
            None
            if kind == "DELETED"
            else tuple(sorted(t["key"] for t in node["spec"].get("taints") or []))
        )
        if condition is not None:
            status = None if kind == "DELETED" else _status_of(node, condition)
            if name not in statuses or statuses[name] != status:
                statuses[name] = status
                out.write({"cn": name, "c": status})
        if seen.get(name, ()) != keys or name not in seen:
            seen[name] = keys
            out.write({"n": name, "k": keys})

    follow(core.list_node, on_node, lambda: out.write({"synced": "nodes"}))


def watch_pods(core: k8s_client.CoreV1Api, out: Output) -> None:
    bound: set[str] = set()

    def on_pod(kind: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        node = pod["spec"].get("nodeName")
        if kind == "DELETED":
            bound.discard(name)
        elif node and name not in bound:
            bound.add(name)
            out.write({"pod": name, "node": node})

    def list_pods(**kwargs: Any) -> Any:
        return core.list_namespaced_pod(RACE_NAMESPACE, **kwargs)

    follow(list_pods, on_pod, lambda: out.write({"synced": "pods"}))


def main(argv: list[str]) -> None:
    kubeconfig, out_path, *condition = argv
    api = k8s_config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]  # unannotated in the client
    core = k8s_client.CoreV1Api(api)
    with open(out_path, "a", encoding="utf-8") as stream:  # noqa: PTH123
        out = Output(stream)
        threading.Thread(target=watch_pods, args=(core, out), daemon=True).start()
        watch_nodes(core, out, condition[0] if condition else None)


if __name__ == "__main__":
    main(sys.argv[1:])
