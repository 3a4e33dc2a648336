"""The persisted-label records, for `nodegate labels`: listed, dropped, handed to another machine.

The day-2 layer's only writes, each preconditioned on the resourceVersion it read, so a record
the reconciler changed in between answers 409 and is left as it is. What a hand-over does to
the record is decided in core (`persisted_labels.handed_over`).
"""

from __future__ import annotations

from kubernetes import client

from nodegate.core.decisions.persisted_labels import (
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    encode_record,
    handed_over,
)
from nodegate.core.objects.label_records import StoredRecord, stored_record
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.kube import KubeApi, Selection

PAGE_SIZE = 500


class NoSuchNodeError(LookupError):
    pass


class LabelRecords:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self._api = KubeApi(api_client)

    def all(self) -> list[StoredRecord]:
        """Every record in the namespace, in pages (one paginated LIST)."""
        selection = Selection(
            "ConfigMap", self.namespace, label_selector=f"{RECORD_LABEL}={RECORD_LABEL_VALUE}"
        )
        found: list[StoredRecord] = []
        token: str | None = None
        while True:
            page = self._api.list_page(selection, PAGE_SIZE, token)
            found += [stored_record(raw) for raw in page.items]
            token = page.continue_token
            if token is None:
                return found

    def forget(self, stored: StoredRecord) -> None:
        self._api.delete_configmap(self.namespace, stored.name, stored.resource_version)

    def node(self, name: str) -> NodeState:
        """The Node records are handed to, read once for all of them (NoSuchNodeError)."""
        raw = self._api.get_node(name)
        if raw is None:
            raise NoSuchNodeError(name)
        return NodeState.from_k8s(raw, lambda _key: False)

    def hand_over(self, stored: StoredRecord, target: NodeState) -> None:
        """Hand a readable record to the machine of `target`."""
        assert stored.record is not None
        data = encode_record(handed_over(stored.record, target))
        self._api.replace_configmap(self.namespace, stored.name, {**stored.raw, "data": data})
