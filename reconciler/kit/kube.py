"""The thin layer over the Kubernetes API: raw JSON in and out, errors mapped to our kinds.

Raw camelCase JSON is used instead of the client's model classes: building a V1Node per watch
event costs several times the node's size in heap and CPU, and the reconciler keeps only a slim
view of each object anyway (see `informer.py`). Watch streams are read line by line here for the
same reason: the client's `Watch.stream` deserialises every event into model classes (and its
`deserialize=False` path cannot read ERROR events). Every request is sent by `client.Direct` on
the official client's configuration and pool, never through its generated API classes, whose
making alone cost a start about half its CPU (why: `Direct`'s docstring); where each kind is
served is said once, in `RESOURCES`.

Every connection has a liveness bound, because a partition that neither closes nor refuses a
connection (a stuck load balancer, a NAT that lost its state) is otherwise noticed only by the
kernel, after many minutes, and Python's client speaks HTTP/1.1, so it has no HTTP/2 pings as
client-go does (ReadIdleTimeout 30 s + PingTimeout 15 s):

* an ordinary call waits at most `REQUEST_TIMEOUT_SECONDS` for a byte, and a timed-out read is
  never retried under the caller (urllib3 would retry a GET three times, on the pool's other
  dead connections);
* a watch asks the server to end it after `timeout_seconds` (about 20 s): kube-apiserver sends a
  bookmark 2 s before that and then ends it, so a healthy watch is never silent for longer, and
  one silent for `WATCH_SILENCE_SLACK_SECONDS` more is presumed dead (`WatchStalledError`);
* a timed-out read drops the pool's idle connections and severs every other open watch of the
  client (they took the same path), so all are re-established at once, on new connections,
  instead of each after its own silence or on the next dead pooled connection;
* TCP keepalive is on, so the kernel closes an idle pooled connection whose peer vanished.

Every failure leaves this module as one of the `KubeError` kinds of `errors.py`, whatever the
transport raised (urllib3's `MaxRetryError` and `ProtocolError` are not `OSError`s).
"""

from __future__ import annotations

import contextlib
import copy
import email.utils
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, Protocol, Self
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from nodegate.reconciler.kit.client import (
    CONNECT_TIMEOUT_SECONDS,
    REQUEST_TIMEOUT_SECONDS,
    TRANSPORT_ERRORS,
    WATCH_SILENCE_SLACK_SECONDS,
    Direct,
    Query,
    call,
    classify,
    drain,
    json_body,
    timed_out,
)
from nodegate.reconciler.kit.errors import (
    NotFoundError,
    TemporaryError,
    TimedOutError,
    WatchStalledError,
)

RawObject = dict[str, Any]
"""An object as the API server sends it: camelCase JSON, never the client's model classes."""

Kind = Literal["Node", "ConfigMap", "Pod", "CSINode", "DaemonSet", "NodeRules", "Event"]
"""The kinds a `Selection` lists: an informer's (which watches them too) or a day-2 command's."""

ADMISSION = "admissionregistration.k8s.io/v1"
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Node": ("v1", "nodes", False),
    "ConfigMap": ("v1", "configmaps", True),
    "Pod": ("v1", "pods", True),
    "Event": ("v1", "events", True),
    "Secret": ("v1", "secrets", True),
    "DaemonSet": ("apps/v1", "daemonsets", True),
    "CSINode": ("storage.k8s.io/v1", "csinodes", False),
    "NodeRules": ("nodegate.dev/v1", "noderules", False),
    "Lease": ("coordination.k8s.io/v1", "leases", True),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "MutatingWebhookConfiguration": (ADMISSION, "mutatingwebhookconfigurations", False),
    "ValidatingAdmissionPolicy": (ADMISSION, "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": (ADMISSION, "validatingadmissionpolicybindings", False),
    "SelfSubjectReview": ("authentication.k8s.io/v1", "selfsubjectreviews", False),
}
"""Every kind the reconciler reads or writes: its group/version, its resource (plural), and
whether it is namespaced. The one place a kind's path is spelled (`path_of`)."""

MANAGED: Query = MappingProxyType({"fieldManager": "nodegate"})
"""The query of a create, replace or patch: the field manager the API server records."""
MERGE_PATCH = "application/merge-patch+json"


def path_of(
    kind: str, namespace: str | None = None, name: str | None = None, subresource: str = ""
) -> str:
    """The path of `kind`'s objects: all of them (in `namespace`, or in every namespace when
    None), or the one called `name`, or its `subresource`. A namespace given for a kind that
    has none is ignored (a `Selection` of Nodes in a namespace lists every Node)."""
    api_version, resource, namespaced = RESOURCES[kind]
    parts = ["/api/v1" if api_version == "v1" else f"/apis/{api_version}"]
    if namespaced and namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(resource)
    if name is not None:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


@dataclass(frozen=True)
class Selection:
    """Which objects of one kind an informer lists and watches (plain data, fake-friendly)."""

    kind: Kind
    namespace: str | None = None
    field_selector: str | None = None
    label_selector: str | None = None


@dataclass(frozen=True)
class Page:
    items: list[RawObject]
    resource_version: str
    continue_token: str | None


class WatchCancel:
    """Ends one watch from another thread, at once: a blocked read is interrupted (the informer
    asks for it when a relist must not wait for the watch's own end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Call `hook` when cancelled (at once if already cancelled)."""
        with self._lock:
            if not self._cancelled:
                self._hooks.append(hook)
                return
        hook()

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            with contextlib.suppress(Exception):
                hook()


class ListWatch(Protocol):
    """What an informer needs (client-go's ListerWatcher)."""

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page: ...

    def watch(
        self,
        selection: Selection,
        resource_version: str,
        timeout_seconds: int,
        cancel: WatchCancel | None = None,
    ) -> Iterator[tuple[str, RawObject]]: ...


class NodeApi(Protocol):
    """Reading one Node fresh and writing it (the node writer, the re-read after a 409)."""

    def get_node(self, name: str) -> RawObject | None: ...

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        """Its answer (the whole Node, ~11 KiB at kubelet size) is not read: nothing needs it,
        and the Node's watch event brings the same."""
        ...


class RulesObjectStatusApi(Protocol):
    """Writing a NodeRules object's status (what the leader says of each rules object)."""

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject: ...


class EventApi(Protocol):
    """Creating Events and counting their repeats (the event recorder)."""

    def create_event(self, namespace: str, event: RawObject) -> RawObject: ...

    def patch_event(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject: ...


class ConfigMapApi(Protocol):
    """The reconciler's own records (taint history, persisted labels)."""

    def read_configmap(self, namespace: str, name: str) -> RawObject | None: ...

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject: ...

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject: ...

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject: ...

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None: ...


class Api(ListWatch, NodeApi, RulesObjectStatusApi, EventApi, ConfigMapApi, Protocol):
    """Every call the reconciler makes: the boundary that unit tests replace with a fake."""

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject: ...

    def server_time(self) -> datetime:
        """The API server's own time: the one clock every replica reads alike."""
        ...

    def within(self, seconds: float) -> Self:
        """This API, whose writes each end within `seconds` (from the first connect attempt
        to the answer)."""
        ...


class KubeApi:
    """`Api` on the official client's configuration and pool, every call sent by `Direct`."""

    def __init__(
        self, api_client: client.ApiClient, request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS
    ) -> None:
        """`request_timeout_seconds` bounds each ordinary call (connect included); the Node
        admission webhook's client uses a short one to stay inside its own deadline."""
        self.api_client = api_client
        connect = min(CONNECT_TIMEOUT_SECONDS, request_timeout_seconds)
        self._timeout = (connect, request_timeout_seconds)
        self._write_timeout = self._timeout
        self._direct = Direct(api_client)
        self._watches: dict[int, tuple[Any, list[bool]]] = {}
        """Open watches: their responses, and whether each was severed (below)."""
        self._watch_ids = itertools.count()
        self._watches_lock = threading.Lock()

    def _path_dead(self, but: int | None = None) -> None:
        """A read timed out: the path is presumed dead (the module docstring's third bound); in
        client-go too, one dead HTTP/2 connection takes all its streams with it."""
        self.api_client.rest_client.pool_manager.clear()  # in use: closed when they come back
        with self._watches_lock:
            others = [watch for key, watch in self._watches.items() if key != but]
        for response, severed in others:
            severed[0] = True
            with contextlib.suppress(Exception):
                response.shutdown()

    @staticmethod
    def _selectors(selection: Selection) -> dict[str, str]:
        field, label = selection.field_selector, selection.label_selector
        given = {"fieldSelector": field, "labelSelector": label}
        return {key: value for key, value in given.items() if value}

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        query: dict[str, str | int | bool] = {"limit": limit, **self._selectors(selection)}
        if continue_token:
            query["continue"] = continue_token
        path = path_of(selection.kind, selection.namespace)
        data = self._raw("GET", path, query=query)
        metadata = data.get("metadata") or {}
        return Page(
            items=list(data.get("items") or []),
            resource_version=str(metadata.get("resourceVersion") or ""),
            continue_token=metadata.get("continue") or None,
        )

    def watch(
        self,
        selection: Selection,
        resource_version: str,
        timeout_seconds: int,
        cancel: WatchCancel | None = None,
    ) -> Iterator[tuple[str, RawObject]]:
        """(type, raw object) events after `resource_version`, until the server ends the watch.

        An ERROR event becomes the matching `KubeError` (410 -> `GoneError`); the generator ends
        normally when the server closes the stream at its timeout, or when `cancel` is
        cancelled. Silence past its liveness bound (the module docstring) raises
        `WatchStalledError`.
        """
        silence = timeout_seconds + WATCH_SILENCE_SLACK_SECONDS
        query: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
            **self._selectors(selection),
        }
        path = path_of(selection.kind, selection.namespace)
        try:
            response = self._call("GET", path, (CONNECT_TIMEOUT_SECONDS, silence), query=query)
        except TimedOutError as err:
            raise WatchStalledError(f"watch not answered within {silence:.0f}s: {err}") from err
        if cancel is not None:
            cancel.on_cancel(response.shutdown)
        key, severed = next(self._watch_ids), [False]
        with self._watches_lock:
            self._watches[key] = (response, severed)
        try:
            yield from self._events(response, key, severed, silence, cancel)
        finally:
            with self._watches_lock:
                self._watches.pop(key, None)
            response.close()
            response.release_conn()

    def _events(
        self,
        response: Any,
        key: int,
        severed: list[bool],
        silence: float,
        cancel: WatchCancel | None,
    ) -> Iterator[tuple[str, RawObject]]:
        lines = iter_resp_lines(response)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                if severed[0]:
                    raise WatchStalledError(
                        "another watch went silent: presumed dead too"
                    ) from None
                return
            except TRANSPORT_ERRORS as err:
                if cancel is not None and cancel.cancelled:
                    return
                if severed[0]:
                    raise WatchStalledError("another watch went silent: presumed dead too") from err
                if timed_out(err):
                    self._path_dead(but=key)
                    raise WatchStalledError(
                        f"watch delivered nothing for {silence:.0f}s: presumed dead"
                    ) from err
                raise TemporaryError(f"watch stream broke: {type(err).__name__}: {err}") from err
            if cancel is not None and cancel.cancelled:
                return
            if not line.strip():
                continue
            try:
                event = json.loads(line)
                kind, raw = str(event["type"]), event["object"]
                if not isinstance(raw, dict):
                    raise TypeError("a watch event's object is a JSON object")
            except (ValueError, KeyError, TypeError) as err:
                raise TemporaryError(f"unreadable watch event: {line[:200]!r}") from err
            if kind == "ERROR":
                status = int(raw.get("code") or 0)
                raise classify(ApiException(status=status, reason=str(raw.get("message"))))
            yield kind, raw

    def get_node(self, name: str) -> RawObject | None:
        return self._read_or_none(path_of("Node", name=name))

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        """JSON merge patch; its metadata.resourceVersion makes the server refuse stale writes."""
        response = call(
            self._direct.request,
            "PATCH",
            path_of("Node", name=name),
            self._write_timeout,
            query=MANAGED,
            body=merge_patch,
            content_type=MERGE_PATCH,
        )
        drain(response, self._write_timeout)

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject:
        """Strategic merge patch of the status subresource: `conditions` merge by type, so the
        kubelet's and other agents' conditions are neither read nor replaced."""
        return self._write(
            "PATCH",
            path_of("Node", name=name, subresource="status"),
            patch,
            "application/strategic-merge-patch+json",
        )

    def read_crd(self, name: str) -> RawObject | None:
        """One CustomResourceDefinition (the NodeRules CRD, for its confirmation annotation)."""
        return self._read_or_none(path_of("CustomResourceDefinition", name=name))

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject:
        """JSON merge patch of a NodeRules object's status subresource (only the leader
        writes it; its spec is the users')."""
        return self._write(
            "PATCH", path_of("NodeRules", name=name, subresource="status"), merge_patch, MERGE_PATCH
        )

    def create_event(self, namespace: str, event: RawObject) -> RawObject:
        return self._raw("POST", path_of("Event", namespace), body=event)

    def patch_event(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        return self._raw(
            "PATCH", path_of("Event", namespace, name), body=merge_patch, content_type=MERGE_PATCH
        )

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        return self._read_or_none(path_of("ConfigMap", namespace, name))

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        return self._write("POST", path_of("ConfigMap", namespace), body)

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's metadata.resourceVersion: a concurrent change answers 409."""
        return self._write("PUT", path_of("ConfigMap", namespace, name), body)

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        """JSON merge patch; its metadata.resourceVersion, if any, makes the server refuse a
        stale one."""
        return self._write("PATCH", path_of("ConfigMap", namespace, name), merge_patch, MERGE_PATCH)

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        """Delete only the version that was read: a concurrent edit answers 409."""
        body = {"preconditions": {"resourceVersion": resource_version}}
        self._write("DELETE", path_of("ConfigMap", namespace, name), body, query=None)

    def server_time(self) -> datetime:
        """The `Date` the API server puts on its answer to GET /version (whole seconds): its
        clock, not this host's. TemporaryError when it sends none."""
        response = self._call("GET", "/version", self._timeout)
        header = response.headers.get("Date") if response.headers is not None else None
        drain(response, self._timeout)  # the version itself is not needed
        try:
            return email.utils.parsedate_to_datetime(str(header)).astimezone(UTC)
        except (TypeError, ValueError) as err:
            raise TemporaryError(f"the API server sent no readable Date: {header!r}") from err

    def within(self, seconds: float) -> KubeApi:
        """A view of this API (same client, same watches) whose writes each end within
        `seconds`: each connect attempt an eighth (why: `KubeLeaseApi`), the answer half."""
        bounded = copy.copy(self)
        seconds = max(seconds, 0.001)
        bounded._write_timeout = (
            min(CONNECT_TIMEOUT_SECONDS, seconds / 8),
            min(REQUEST_TIMEOUT_SECONDS, seconds / 2),
        )
        return bounded

    def _write(
        self,
        method: str,
        path: str,
        body: object,
        content_type: str = "application/json",
        query: Query | None = MANAGED,
    ) -> RawObject:
        """One write, within the write deadline, answered as raw JSON. A write past its
        deadline failed; it is no sign of a dead path (the deadline is short by design: the
        watches' own silence bound notices a dead one), so the watches are left alone."""
        response = call(
            self._direct.request,
            method,
            path,
            self._write_timeout,
            query=query,
            body=body,
            content_type=content_type,
        )
        return json_body(response, self._write_timeout)

    def _raw(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> RawObject:
        """One ordinary call, within the ordinary timeout, answered as raw JSON; a timed-out
        read, in the head or the body, means the path is dead (`_path_dead`)."""
        response = self._call(
            method, path, self._timeout, query=query, body=body, content_type=content_type
        )
        try:
            return json_body(response, self._timeout)
        except TimedOutError:
            self._path_dead()
            raise

    def _call(self, method: str, path: str, timeout: tuple[float, float], **kwargs: Any) -> Any:
        try:
            return call(self._direct.request, method, path, timeout, **kwargs)
        except TimedOutError:
            self._path_dead()
            raise

    def _read_or_none(self, path: str) -> RawObject | None:
        try:
            return self._raw("GET", path)
        except NotFoundError:
            return None
