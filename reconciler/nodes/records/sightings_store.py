"""The sightings record's ConfigMap (`nodegate.core.objects.sightings_record`) in the reconciler's
namespace, where nodes cannot write: read once by a new leader (`load`), written by the leader
when what it keeps changes (`save`, every `SAVE_INTERVAL_SECONDS` at most; a write that fails is
tried again then). It holds the conditions' sightings and, under a key of their own, the Node
objects seen go (`re_registration`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from nodegate.core.objects.sightings_record import (
    SIGHTINGS_CONFIGMAP,
    SightingsRecordError,
    decode_departures,
    decode_sightings,
    encode_departures,
    encode_sightings,
)
from nodegate.reconciler.kit.configmap_data import write_data
from nodegate.reconciler.kit.errors import KubeError, PermanentError
from nodegate.reconciler.kit.kube import ConfigMapApi
from nodegate.reconciler.nodes.records.condition_sightings import ConditionSightings, Departures

log = logging.getLogger("nodegate.controller")

SAVE_INTERVAL_SECONDS = 5.0
"""How often the record may be written: a node flapping its condition sets no pace."""


class SightingsStore:
    def __init__(
        self,
        api: ConfigMapApi,
        namespace: str,
        conditions: ConditionSightings,
        departures: Departures,
        errors: Callable[[str], None],
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._conditions = conditions
        self._departures = departures
        self._errors = errors
        self._next = 0.0

    def load(self) -> None:
        """Put back the stored sightings and departures (none when there is no record).
        KubeError when it cannot be read; PermanentError when it cannot be decoded (then nothing
        is restored: every hold starts again, which is late, never early, and a name registered
        again waits for its pods to be written for it)."""
        raw = self._api.read_configmap(self._namespace, SIGHTINGS_CONFIGMAP)
        data = (raw or {}).get("data")
        try:
            found, departed = decode_sightings(data), decode_departures(data)
        except SightingsRecordError as err:
            raise PermanentError(str(err), 422) from err
        self._conditions.restore(found)
        self._departures.restore(departed)

    def save(self) -> None:
        """Store exactly what the tables keep, if it changed (the leader's view replaces any
        other; a dry run's client sends nothing, `preview_api`)."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + SAVE_INTERVAL_SECONDS
        conditions, departures = self._conditions, self._departures
        changed, departed = conditions.changes(), departures.changes()
        if changed is None and departed is None:
            return
        data = {
            **encode_sightings(changed if changed is not None else conditions.kept()),
            **encode_departures(departed if departed is not None else departures.kept()),
        }
        try:
            write_data(self._api, self._namespace, SIGHTINGS_CONFIGMAP, lambda _raw: data)
        except KubeError as err:
            conditions.changed_again()
            departures.changed_again()
            self._errors("sightings")
            log.warning("sightings record not written", extra={"error": str(err)})
