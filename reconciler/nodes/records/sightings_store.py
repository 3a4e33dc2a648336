"""The sightings record's ConfigMap (`nodegate.core.objects.sightings_record`) in the reconciler's
namespace, where nodes cannot write: read once by a new leader, written by the leader when
what it keeps changes (at most every `SAVE_INTERVAL_SECONDS`). It holds the conditions'
sightings and, under a key of their own, the Node objects seen go (`re_registration`)."""

from __future__ import annotations

from collections.abc import Mapping

from nodegate.core.decisions.re_registration import Departure
from nodegate.core.objects.sightings_record import (
    SIGHTINGS_CONFIGMAP,
    NodeSightings,
    SightingsRecordError,
    decode_departures,
    decode_sightings,
    encode_departures,
    encode_sightings,
)
from nodegate.reconciler.kit.configmap_data import write_data
from nodegate.reconciler.kit.errors import PermanentError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject

SAVE_INTERVAL_SECONDS = 5.0
"""How often the record may be written: a node flapping its condition sets no pace."""


class SightingsStore:
    def __init__(self, api: ConfigMapApi, namespace: str) -> None:
        self._api = api
        self._namespace = namespace

    def load(self) -> tuple[dict[str, NodeSightings], dict[str, Departure]]:
        """The stored sightings and departures (none when there is no record). KubeError when
        it cannot be read; PermanentError when it cannot be decoded (then nothing is restored:
        every hold starts again, which is late, never early, and a name registered again
        waits for its pods to be written for it)."""
        raw = self._api.read_configmap(self._namespace, SIGHTINGS_CONFIGMAP)
        data = (raw or {}).get("data")
        try:
            return decode_sightings(data), decode_departures(data)
        except SightingsRecordError as err:
            raise PermanentError(str(err), 422) from err

    def save(self, nodes: Mapping[str, NodeSightings], departed: Mapping[str, Departure]) -> None:
        """Store exactly `nodes` and `departed` (the leader's view replaces any other; a dry
        run's client sends nothing, `preview_api`). KubeError when it cannot be written."""

        def data_of(raw: RawObject | None) -> dict[str, str]:
            del raw
            return {**encode_sightings(nodes), **encode_departures(departed)}

        write_data(self._api, self._namespace, SIGHTINGS_CONFIGMAP, data_of)
