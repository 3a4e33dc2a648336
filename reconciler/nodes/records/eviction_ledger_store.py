"""The eviction ledger's ConfigMap (`nodegate.core.objects.eviction_ledger`) in the reconciler's
namespace, where nodes cannot write: read once by a new leader, written before each grant is
used, with optimistic concurrency (a 409 merges what is stored and tries again)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from nodegate.core.decisions.eviction_budget import Grant
from nodegate.core.objects.eviction_ledger import (
    LEDGER_CONFIGMAP,
    LedgerError,
    compact,
    decode_ledger,
    encode_ledger,
    merged,
)
from nodegate.reconciler.kit.configmap_data import write_data
from nodegate.reconciler.kit.errors import PermanentError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject


class LedgerStore:
    def __init__(self, api: ConfigMapApi, namespace: str) -> None:
        self._api = api
        self._namespace = namespace

    def load(self) -> list[Grant]:
        """The stored grants (none when there is no ledger). KubeError when it cannot be read;
        a ledger that cannot be decoded is a PermanentError: an admin must repair or delete it,
        and until then no evicting taint is granted (nodegate never guesses what was spent)."""
        return self._decode(self._api.read_configmap(self._namespace, LEDGER_CONFIGMAP))

    def save(self, grants: list[Grant], now: datetime, window: Callable[[str], timedelta]) -> None:
        """Store `grants` together with what is stored, compacted to what still counts
        (KubeError when it cannot be written)."""

        def data_of(raw: RawObject | None) -> dict[str, str]:
            return encode_ledger(compact(merged(grants, self._decode(raw)), window, now), now)

        write_data(self._api, self._namespace, LEDGER_CONFIGMAP, data_of)

    def _decode(self, raw: RawObject | None) -> list[Grant]:
        try:
            return decode_ledger((raw or {}).get("data"))
        except LedgerError as err:
            raise PermanentError(str(err), 422) from err
