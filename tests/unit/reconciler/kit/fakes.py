"""A fake of the client boundary (`nodegate.reconciler.kit.kube.Api`) for the retry and error paths
that are hard to hit on a real API server. The e2e tier proves the happy and racy paths there.

Nodes live in a dict with resourceVersions; scripted failures are queued per call name and
raised before the call does anything, as a failed request would.
"""

from __future__ import annotations

import copy
import itertools
import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from nodegate.reconciler.kit.errors import ConflictError, GoneError, NotFoundError
from nodegate.reconciler.kit.kube import Page, RawObject, Selection, WatchCancel

END_OF_WATCH: tuple[str, RawObject] = ("END", {})


def fake_node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> RawObject:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
        "spec": dict(spec),
        "status": {"conditions": []},
    }


class FakeApi:
    def __init__(self) -> None:
        self.nodes: dict[str, RawObject] = {}
        self.rules_objects: dict[str, RawObject] = {}
        self.configmaps: dict[tuple[str, str], RawObject] = {}
        self.events: dict[tuple[str, str], RawObject] = {}
        self.failures: dict[str, deque[BaseException]] = defaultdict(deque)
        self.calls: list[tuple[str, Any]] = []
        self.watch_events: queue.Queue[tuple[str, RawObject]] = queue.Queue()
        self.server_offset = timedelta()
        self.watch_quiet_seconds = 0.0
        """How long a watch with nothing to deliver stays open (0: it ends at once)."""
        self.watch_timeouts: list[int] = []
        self.write_deadlines: list[float] = []
        self._rv = itertools.count(1)
        self._names = itertools.count(1)
        self._lock = threading.Lock()

    # --- test controls -------------------------------------------------------------------------

    def server_time(self) -> datetime:
        """The fake API server's clock: this host's, shifted by `server_offset`."""
        self._enter("server_time")
        return datetime.now(UTC) + self.server_offset

    def fail(self, call: str, *errors: BaseException) -> None:
        """The next calls named `call` raise these, in order."""
        self.failures[call].extend(errors)

    def add_node(self, raw: RawObject) -> RawObject:
        raw = copy.deepcopy(raw)
        raw["metadata"]["resourceVersion"] = str(next(self._rv))
        self.nodes[raw["metadata"]["name"]] = raw
        return raw

    def push_watch(self, kind: str, raw: RawObject) -> None:
        self.watch_events.put((kind, copy.deepcopy(raw)))

    def end_watch(self) -> None:
        self.watch_events.put(END_OF_WATCH)

    def count(self, call: str) -> int:
        return sum(1 for name, _ in self.calls if name == call)

    def _enter(self, call: str, detail: Any = None) -> None:
        with self._lock:
            self.calls.append((call, detail))
            if self.failures[call]:
                raise self.failures[call].popleft()

    # --- Api -----------------------------------------------------------------------------------

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        self._enter("list_page", (selection.kind, continue_token))
        items: list[RawObject]
        if selection.kind == "Node":
            items = [copy.deepcopy(n) for _, n in sorted(self.nodes.items())]
        else:
            items = [
                copy.deepcopy(cm)
                for (ns, name), cm in sorted(self.configmaps.items())
                if ns == selection.namespace
                and selection.field_selector in (None, f"metadata.name={name}")
                and _selected(cm, selection.label_selector)
            ]
        start = int(continue_token or 0)
        page = items[start : start + limit]
        more = start + limit < len(items)
        return Page(page, str(next(self._rv)), str(start + limit) if more else None)

    def watch(
        self,
        selection: Selection,
        resource_version: str,
        timeout_seconds: int,
        cancel: WatchCancel | None = None,
    ) -> Iterator[tuple[str, RawObject]]:
        self._enter("watch", resource_version)
        self.watch_timeouts.append(timeout_seconds)
        opened = time.monotonic()
        while True:
            if cancel is not None and cancel.cancelled:
                return  # cut by the informer
            try:
                event = self.watch_events.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() - opened < self.watch_quiet_seconds:
                    continue  # a quiet but open watch, as a real one is until its timeout
                return  # the server ended the watch
            if event == END_OF_WATCH:
                return
            kind, raw = event
            if kind == "RAISE":
                raise raw["error"]
            yield kind, raw

    def within(self, seconds: float) -> Self:
        """Writes here take no time: the deadline is recorded, the API is the same."""
        self.write_deadlines.append(seconds)
        return self

    def get_node(self, name: str) -> RawObject | None:
        self._enter("get_node", name)
        node = self.nodes.get(name)
        return copy.deepcopy(node) if node else None

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        self._enter("patch_node", merge_patch)
        node = self.nodes.get(name)
        if node is None:
            raise NotFoundError(name)
        meta = merge_patch.get("metadata") or {}
        if meta.get("resourceVersion") != node["metadata"]["resourceVersion"]:
            raise ConflictError(name)
        if "spec" in merge_patch:
            node["spec"].update(merge_patch["spec"])
        for field in ("labels", "annotations"):
            if field in meta:
                merged = {**(node["metadata"].get(field) or {}), **meta[field]}
                node["metadata"][field] = {k: v for k, v in merged.items() if v is not None}
        node["metadata"]["resourceVersion"] = str(next(self._rv))

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject:
        """A merge patch of a NodeRules object's status (kept in `rules_objects`)."""
        self._enter("patch_noderules_status", merge_patch)
        found = self.rules_objects.get(name)
        if found is None:
            raise NotFoundError(name)
        status = {**(found.get("status") or {}), **(merge_patch.get("status") or {})}
        found["status"] = {k: v for k, v in status.items() if v is not None}
        return found

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject:
        """A strategic merge patch of `status.conditions`, merged by type as the API server
        does."""
        self._enter("patch_node_status", patch)
        node = self.nodes.get(name)
        if node is None:
            raise NotFoundError(name)
        status = node.setdefault("status", {})
        merged = {c["type"]: c for c in status.get("conditions") or []}
        for condition in (patch.get("status") or {}).get("conditions") or []:
            merged[condition["type"]] = {**merged.get(condition["type"], {}), **condition}
        status["conditions"] = list(merged.values())
        node["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(node)

    def create_event(self, namespace: str, event: RawObject) -> RawObject:
        self._enter("create_event", event)
        name = f"event-{next(self._names)}"
        stored = {**event, "metadata": {**event["metadata"], "name": name}}
        self.events[(namespace, name)] = stored
        return stored

    def patch_event(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        self._enter("patch_event", merge_patch)
        if (namespace, name) not in self.events:
            raise NotFoundError(name)
        self.events[(namespace, name)].update(merge_patch)
        return self.events[(namespace, name)]

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        self._enter("read_configmap", name)
        found = self.configmaps.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        self._enter("create_configmap", body)
        key = (namespace, body["metadata"]["name"])
        if key in self.configmaps:
            raise ConflictError("exists")
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.configmaps[key] = stored
        return stored

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        self._enter("replace_configmap", body)
        current = self.configmaps.get((namespace, name))
        if current is None:
            raise NotFoundError(name)
        # As the API server: no resourceVersion in the body is an unconditional update.
        given = body["metadata"].get("resourceVersion")
        if given is not None and given != current["metadata"]["resourceVersion"]:
            raise ConflictError(name)
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._rv))
        self.configmaps[(namespace, name)] = stored
        return stored

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        self._enter("patch_configmap", merge_patch)
        current = self.configmaps.get((namespace, name))
        if current is None:
            raise NotFoundError(name)
        meta = merge_patch.get("metadata") or {}
        given = meta.get("resourceVersion")
        if given is not None and given != current["metadata"]["resourceVersion"]:
            raise ConflictError(name)
        if "annotations" in meta:
            merged = {**(current["metadata"].get("annotations") or {}), **meta["annotations"]}
            current["metadata"]["annotations"] = {k: v for k, v in merged.items() if v is not None}
        if "data" in merge_patch:
            current["data"] = {**(current.get("data") or {}), **merge_patch["data"]}
        current["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(current)

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        self._enter("delete_configmap", name)
        current = self.configmaps.get((namespace, name))
        if current is None:
            raise NotFoundError(name)
        if current["metadata"]["resourceVersion"] != resource_version:
            raise ConflictError(name)
        del self.configmaps[(namespace, name)]


def gone() -> GoneError:
    return GoneError("410 Gone")


def _selected(raw: RawObject, label_selector: str | None) -> bool:
    """`key=value` selectors only (all the reconciler uses)."""
    if not label_selector:
        return True
    labels = raw["metadata"].get("labels") or {}
    return all(
        labels.get(k) == v
        for k, _, v in (term.partition("=") for term in label_selector.split(","))
    )
