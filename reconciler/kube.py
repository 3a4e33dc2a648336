"""The thin layer over the Kubernetes API: raw JSON in and out, errors mapped to our kinds.

Raw camelCase JSON (`_preload_content=False`, watch `raw_object`) is used instead of the client's
model classes so parsing happens once, in `NodeState.from_k8s`, whatever the client version.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

RawObject = dict[str, Any]


class KubeError(Exception):
    """An API call failed in a way worth retrying later (network, 5xx, throttling)."""


class ConflictError(KubeError):
    """409: the object changed since it was read. Re-read, re-plan, retry."""


class NotFoundError(KubeError):
    """404: the object is gone (a node deleted while we worked on it)."""


class GoneError(KubeError):
    """410: a watch's resourceVersion is too old; list again."""


def _mapped(err: ApiException) -> KubeError:
    kinds: dict[int, type[KubeError]] = {409: ConflictError, 404: NotFoundError, 410: GoneError}
    return kinds.get(int(err.status or 0), KubeError)(f"{err.status} {err.reason}: {err.body}")


def _json(response: Any) -> Any:
    """Body of a `_preload_content=False` call (typed by the client as the model it skips)."""
    return json.loads(response.data)


def load_api_client(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or the in-cluster service account."""
    if kubeconfig:
        api_client: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)
        return api_client
    config.load_incluster_config()
    return client.ApiClient()


class KubeApi:
    """The handful of calls the reconciler makes."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)

    def list_nodes(self) -> tuple[list[RawObject], str]:
        try:
            response = self.core.list_node(_preload_content=False)
        except ApiException as err:
            raise _mapped(err) from err
        data = _json(response)
        return list(data.get("items") or []), str(data["metadata"]["resourceVersion"])

    def watch_nodes(
        self, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, RawObject]]:
        """Watch events after `resource_version`; BOOKMARKs carry only a new resourceVersion."""
        return _watch(
            self.core.list_node,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
        )

    def get_node(self, name: str) -> RawObject | None:
        return _read_or_none(self.core.read_node, name)

    def patch_node(self, name: str, merge_patch: RawObject) -> RawObject:
        """JSON merge patch; its metadata.resourceVersion makes the server refuse stale writes."""
        try:
            response = self.core.patch_node(
                name,
                merge_patch,
                field_manager="nodegate",
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        except ApiException as err:
            raise _mapped(err) from err
        result: RawObject = _json(response)
        return result

    def create_event(self, namespace: str, event: RawObject) -> None:
        try:
            self.core.create_namespaced_event(namespace, cast(Any, event), _preload_content=False)
        except ApiException as err:
            raise _mapped(err) from err

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        return _read_or_none(self.core.read_namespaced_config_map, name, namespace)

    def watch_configmap(
        self, namespace: str, name: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, RawObject]]:
        return _watch(
            self.core.list_namespaced_config_map,
            namespace,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
        )


def _read_or_none(read_call: Any, *args: Any) -> RawObject | None:
    """The object as raw JSON, or None if it does not exist."""
    try:
        response = read_call(*args, _preload_content=False)
    except ApiException as err:
        if err.status == 404:
            return None
        raise _mapped(err) from err
    result: RawObject = _json(response)
    return result


def _watch(list_call: Any, *args: Any, **kwargs: Any) -> Iterator[tuple[str, RawObject]]:
    """(type, raw object) events of one watch; a 410 in the stream becomes `GoneError`."""
    try:
        for event in watch.Watch().stream(list_call, *args, **kwargs):
            raw = event.get("raw_object") or {}
            if event.get("type") == "ERROR":
                code = int(raw.get("code") or 0)
                raise GoneError(str(raw)) if code == 410 else KubeError(str(raw))
            yield str(event["type"]), raw
    except ApiException as err:
        raise _mapped(err) from err
