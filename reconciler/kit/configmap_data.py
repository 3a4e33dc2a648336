"""Writing the data of one of the reconciler's own ConfigMaps (the eviction ledger, the
sightings record, the taint history): read, compute, create or replace under the read's
resourceVersion, and on a conflict read again. The official client has no such loop; this is
the one copy of it."""

from __future__ import annotations

from collections.abc import Callable

from nodegate.reconciler.kit.errors import ConflictError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject

CONFLICT_RETRIES = 5

DataOf = Callable[[RawObject | None], dict[str, str]]
"""The data to store, given the ConfigMap as read (None: there is none yet)."""


def write_data(api: ConfigMapApi, namespace: str, name: str, data_of: DataOf) -> None:
    """Store `data_of(what is stored)` (KubeError when it cannot be written); nothing is sent
    when it is already so."""
    for _ in range(CONFLICT_RETRIES):
        raw = api.read_configmap(namespace, name)
        data = data_of(raw)
        try:
            if raw is None:
                body: RawObject = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace},
                    "data": data,
                }
                api.create_configmap(namespace, body)
            elif raw.get("data") != data:
                raw["data"] = data  # with its resourceVersion: a concurrent write is a 409
                api.replace_configmap(namespace, name, raw)
            return
        except ConflictError:
            continue
    raise ConflictError(f"{name}: still conflicting after {CONFLICT_RETRIES} tries")
