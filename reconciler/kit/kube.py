"""The thin layer over the Kubernetes API: raw JSON in and out, errors mapped to our kinds.

Raw camelCase JSON (`_preload_content=False`) is used instead of the client's model classes:
building a V1Node per watch event costs several times the node's size in heap and CPU, and the
reconciler keeps only a slim view of each object anyway (see `informer.py`). Watch streams are
read line by line here for the same reason: the client's `Watch.stream` deserialises every event
into model classes (and its `deserialize=False` path cannot read ERROR events).

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

Every failure leaves this module as one of the `KubeError` kinds below, whatever the transport
raised (urllib3's `MaxRetryError` and `ProtocolError` are not `OSError`s).
"""

from __future__ import annotations

import contextlib
import copy
import email.utils
import itertools
import json
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Literal, Protocol, Self, cast
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
    call,
    classify,
    drain,
    drop_idle_connections,
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

Kind = Literal["Node", "ConfigMap", "Pod", "CSINode", "DaemonSet", "NodeRules"]

NODE_RULES = ("nodegate.dev", "v1", "noderules")
"""The NodeRules custom resource: group, version, plural (cluster-scoped)."""


@dataclass(frozen=True)
class Selection:
    """Which objects of one kind an informer lists and watches (plain data, fake-friendly)."""

    kind: Kind
    namespace: str | None = None
    field_selector: str | None = None
    label_selector: str | None = None

    def describe(self) -> str:
        parts = [self.kind, self.namespace or "*", self.field_selector or "", self.label_selector]
        return "/".join(p for p in parts if p)


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


class NodeStatusApi(Protocol):
    """Reading one Node fresh and patching its status (the OCI conditions' writer)."""

    def get_node(self, name: str) -> RawObject | None: ...

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject: ...


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


class ServerClock(Protocol):
    """The API server's own time: the one clock every replica reads alike."""

    def server_time(self) -> datetime: ...


class Api(
    ListWatch,
    NodeApi,
    NodeStatusApi,
    RulesObjectStatusApi,
    EventApi,
    ConfigMapApi,
    ServerClock,
    Protocol,
):
    """Every call the reconciler makes: the boundary that unit tests replace with a fake."""

    def within(self, seconds: float) -> Self:
        """This API, whose writes each end within `seconds` (from the first connect attempt
        to the answer)."""
        ...


def watch_timeout(base_seconds: int) -> int:
    """A server-side watch timeout in [base, 1.25*base), so replicas don't reconnect in step
    (the jitter is small: the timeout is also the watch's liveness bound)."""
    return base_seconds + random.randrange(max(1, base_seconds // 4))


class KubeApi:
    """`Api` on the official client."""

    def __init__(
        self, api_client: client.ApiClient, request_timeout_seconds: float = REQUEST_TIMEOUT_SECONDS
    ) -> None:
        """`request_timeout_seconds` bounds each ordinary call (connect included); the Node
        admission webhook's client uses a short one to stay inside its own deadline."""
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        connect = min(CONNECT_TIMEOUT_SECONDS, request_timeout_seconds)
        self._timeout = (connect, request_timeout_seconds)
        self._write_timeout = self._timeout
        self._direct = Direct(api_client)
        self._watches: dict[int, tuple[Any, list[bool]]] = {}
        """Open watches: their responses, and whether each was severed (below)."""
        self._watch_ids = itertools.count()
        self._watches_lock = threading.Lock()

    # The official client's API classes load the models of every call they have when first
    # touched (kubernetes.client's lazy imports): AppsV1Api and StorageV1Api cost 0.27 s of CPU
    # at start, and are read only while rules name DaemonSets or CSI drivers. Made on first use.
    @cached_property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api_client)

    @cached_property
    def storage(self) -> client.StorageV1Api:
        return client.StorageV1Api(self.api_client)

    @cached_property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api_client)

    def _path_dead(self, but: int | None = None) -> None:
        """A read timed out: the path to the API server is presumed dead. Its idle connections
        are dropped and every other open watch is severed (its read cut, a `WatchStalledError`
        raised), so all of them are re-established now, not each after its own silence: one
        dead HTTP/2 connection takes all its streams with it in client-go too."""
        drop_idle_connections(self.api_client)
        with self._watches_lock:
            others = [watch for key, watch in self._watches.items() if key != but]
        for response, severed in others:
            severed[0] = True
            with contextlib.suppress(Exception):
                response.shutdown()

    def _list_call(self, selection: Selection) -> tuple[Callable[..., Any], tuple[str, ...]]:
        if selection.kind == "Node":
            return self.core.list_node, ()
        if selection.kind == "CSINode":
            return self.storage.list_csi_node, ()
        if selection.kind == "NodeRules":
            return self.custom.list_cluster_custom_object, NODE_RULES
        calls = {
            "ConfigMap": (
                self.core.list_namespaced_config_map,
                self.core.list_config_map_for_all_namespaces,
            ),
            "Pod": (self.core.list_namespaced_pod, self.core.list_pod_for_all_namespaces),
            "DaemonSet": (
                self.apps.list_namespaced_daemon_set,
                self.apps.list_daemon_set_for_all_namespaces,
            ),
        }
        namespaced, cluster_wide = calls[selection.kind]
        if selection.namespace:
            return namespaced, (selection.namespace,)
        return cluster_wide, ()

    @staticmethod
    def _selectors(selection: Selection) -> dict[str, str]:
        selectors = {}
        if selection.field_selector:
            selectors["field_selector"] = selection.field_selector
        if selection.label_selector:
            selectors["label_selector"] = selection.label_selector
        return selectors

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        list_call, args = self._list_call(selection)
        kwargs: dict[str, Any] = {"limit": limit, **self._selectors(selection)}
        if continue_token:
            kwargs["_continue"] = continue_token
        data = self._json(
            list_call, *args, _preload_content=False, _request_timeout=self._timeout, **kwargs
        )
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
        cancelled. Silence past `timeout_seconds + WATCH_SILENCE_SLACK_SECONDS` raises
        `WatchStalledError`: the server would have sent a bookmark or ended the watch by then.
        """
        list_call, args = self._list_call(selection)
        silence = timeout_seconds + WATCH_SILENCE_SLACK_SECONDS
        try:
            response = self._call(
                list_call,
                *args,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT_SECONDS, silence),
                **self._selectors(selection),
            )
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
        """The events of one open watch stream, read line by line, until it ends."""
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
            except (ValueError, KeyError, TypeError) as err:
                raise TemporaryError(f"unreadable watch event: {line[:200]!r}") from err
            if kind == "ERROR":
                status = int(raw.get("code") or 0)
                raise classify(ApiException(status=status, reason=str(raw.get("message"))))
            yield kind, raw

    def get_node(self, name: str) -> RawObject | None:
        return self._read_or_none(self.core.read_node, name)

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        """JSON merge patch; its metadata.resourceVersion makes the server refuse stale writes.
        The one write of every change: sent by `Direct`, its answer drained undecoded."""
        response = call(
            self._direct.request,
            "PATCH",
            f"/api/v1/nodes/{quote(name, safe='')}?fieldManager=nodegate",
            merge_patch,
            "application/merge-patch+json",
            self._write_timeout,
        )
        drain(response, self._write_timeout)

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject:
        """Strategic merge patch of the status subresource: `conditions` merge by type, so the
        kubelet's and other agents' conditions are neither read nor replaced."""
        return self._write(
            self.core.patch_node_status,
            name,
            patch,
            field_manager="nodegate",
            _content_type="application/strategic-merge-patch+json",
        )

    def read_crd(self, name: str) -> RawObject | None:
        """One CustomResourceDefinition (the NodeRules CRD, for its confirmation annotation)."""
        extensions = client.ApiextensionsV1Api(self.api_client)
        return self._read_or_none(extensions.read_custom_resource_definition, name)

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject:
        """JSON merge patch of a NodeRules object's status subresource (only the leader
        writes it; its spec is the users')."""
        return self._write(
            self.custom.patch_cluster_custom_object_status,
            *NODE_RULES,
            name,
            merge_patch,
            field_manager="nodegate",
            _content_type="application/merge-patch+json",
        )

    def create_event(self, namespace: str, event: RawObject) -> RawObject:
        """An Event for every change: sent by `Direct`."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
        response = self._call(
            self._direct.request, "POST", path, event, "application/json", self._timeout
        )
        return cast(RawObject, self._body(response))

    def patch_event(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events/{quote(name, safe='')}"
        response = self._call(
            self._direct.request,
            "PATCH",
            path,
            merge_patch,
            "application/merge-patch+json",
            self._timeout,
        )
        return cast(RawObject, self._body(response))

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        return self._read_or_none(self.core.read_namespaced_config_map, name, namespace)

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        return self._write(
            self.core.create_namespaced_config_map,
            namespace,
            cast(Any, body),
            field_manager="nodegate",
        )

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's metadata.resourceVersion: a concurrent change answers 409."""
        return self._write(
            self.core.replace_namespaced_config_map,
            name,
            namespace,
            cast(Any, body),
            field_manager="nodegate",
        )

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        """JSON merge patch; its metadata.resourceVersion, if any, makes the server refuse a
        stale one."""
        return self._write(
            self.core.patch_namespaced_config_map,
            name,
            namespace,
            merge_patch,
            field_manager="nodegate",
            _content_type="application/merge-patch+json",
        )

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        """Delete only the version that was read: a concurrent edit answers 409."""
        body = {"preconditions": {"resourceVersion": resource_version}}
        self._write(self.core.delete_namespaced_config_map, name, namespace, body=body)

    def server_time(self) -> datetime:
        """The `Date` the API server puts on its answer to GET /version (whole seconds): its
        clock, not this host's. TemporaryError when it sends none."""
        response = self._call(
            client.VersionApi(self.api_client).get_code,
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        header = response.headers.get("Date") if response.headers is not None else None
        try:
            return email.utils.parsedate_to_datetime(str(header)).astimezone(UTC)
        except (TypeError, ValueError) as err:
            raise TemporaryError(f"the API server sent no readable Date: {header!r}") from err

    def _raw(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> RawObject:
        """One call with our timeout, answered as raw JSON."""
        return cast(
            RawObject,
            self._json(
                function, *args, _preload_content=False, _request_timeout=self._timeout, **kwargs
            ),
        )

    def within(self, seconds: float) -> KubeApi:
        """A view of this API (same client, same watches) whose writes each end within
        `seconds`: urllib3 tries a connect up to four times (`load_api_client`), so each
        attempt gets an eighth (at most the usual connect timeout) and the answer half."""
        bounded = copy.copy(self)
        seconds = max(seconds, 0.001)
        bounded._write_timeout = (
            min(CONNECT_TIMEOUT_SECONDS, seconds / 8),
            min(REQUEST_TIMEOUT_SECONDS, seconds / 2),
        )
        return bounded

    def _write(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> RawObject:
        """One write, within the write deadline, answered as raw JSON. A write past its
        deadline failed; it is no sign of a dead path (the deadline is short by design: the
        watches' own silence bound notices a dead one), so the watches are left alone."""
        response = call(
            function, *args, _preload_content=False, _request_timeout=self._write_timeout, **kwargs
        )
        return cast(RawObject, json_body(response))

    def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call`; a timed-out read means the path is dead (`_path_dead`)."""
        try:
            return call(function, *args, **kwargs)
        except TimedOutError:
            self._path_dead()
            raise

    def _json(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`_call` and its body as JSON."""
        return self._body(self._call(function, *args, **kwargs))

    def _body(self, response: Any) -> Any:
        """An answer's body as JSON: a body that stalls is a timed-out read like a head that
        does (`_path_dead`)."""
        try:
            return json_body(response)
        except TimedOutError:
            self._path_dead()
            raise

    def _read_or_none(self, read_call: Callable[..., Any], *args: Any) -> RawObject | None:
        """The object as raw JSON, or None if it does not exist."""
        try:
            return self._raw(read_call, *args)
        except NotFoundError:
            return None
