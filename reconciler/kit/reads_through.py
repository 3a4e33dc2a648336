"""A base for `Api` wrappers that decide only the writes (the write fence, a dry run's preview):
every read, watch, Event and reading of the API server's time goes to the wrapped client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from nodegate.reconciler.kit.kube import Api, Page, RawObject, Selection, WatchCancel


class ReadsThrough:
    def __init__(self, inner: Api) -> None:
        self._inner = inner

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        return self._inner.list_page(selection, limit, continue_token)

    def watch(
        self,
        selection: Selection,
        resource_version: str,
        timeout_seconds: int,
        cancel: WatchCancel | None = None,
    ) -> Iterator[tuple[str, RawObject]]:
        return self._inner.watch(selection, resource_version, timeout_seconds, cancel)

    def get_node(self, name: str) -> RawObject | None:
        return self._inner.get_node(name)

    def read_configmap(self, namespace: str, name: str) -> RawObject | None:
        return self._inner.read_configmap(namespace, name)

    def create_event(self, namespace: str, event: RawObject) -> RawObject:
        return self._inner.create_event(namespace, event)

    def patch_event(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        return self._inner.patch_event(namespace, name, merge_patch)

    def server_time(self) -> datetime:
        return self._inner.server_time()
