"""The eviction ledger's ConfigMap (`nodegate.core.eviction_ledger`) in the reconciler's
namespace, where nodes cannot write: read once by a new leader, written before each grant is
used, with optimistic concurrency (a 409 merges what is stored and tries again)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from nodegate.core.eviction_budget import Grant
from nodegate.core.eviction_ledger import (
    LEDGER_CONFIGMAP,
    LedgerError,
    compact,
    decode_ledger,
    encode_ledger,
    merged,
)
from nodegate.reconciler.kit.errors import ConflictError, PermanentError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject

CONFLICT_RETRIES = 5
Window = Callable[[str], timedelta]
"""A ledger's window under the rules in force."""


class LedgerStore:
    def __init__(self, api: ConfigMapApi, namespace: str) -> None:
        self._api = api
        self._namespace = namespace

    def load(self) -> list[Grant]:
        """The stored grants (none when there is no ledger). KubeError when it cannot be read;
        a ledger that cannot be decoded is a PermanentError: an admin must repair or delete it,
        and until then no evicting taint is granted (nodegate never guesses what was spent)."""
        return self._decode(self._api.read_configmap(self._namespace, LEDGER_CONFIGMAP))

    def save(self, grants: list[Grant], now: datetime, window: Window) -> None:
        """Store `grants` together with what is stored, compacted to what still counts
        (KubeError when it cannot be written)."""
        for _ in range(CONFLICT_RETRIES):
            raw = self._api.read_configmap(self._namespace, LEDGER_CONFIGMAP)
            data = encode_ledger(compact(merged(grants, self._decode(raw)), window, now), now)
            try:
                if raw is None:
                    body: RawObject = {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": LEDGER_CONFIGMAP, "namespace": self._namespace},
                        "data": data,
                    }
                    self._api.create_configmap(self._namespace, body)
                elif raw.get("data") != data:
                    raw["data"] = data  # with its resourceVersion: a concurrent write is a 409
                    self._api.replace_configmap(self._namespace, LEDGER_CONFIGMAP, raw)
                return
            except ConflictError:
                continue
        raise ConflictError(f"{LEDGER_CONFIGMAP}: still conflicting after {CONFLICT_RETRIES} tries")

    def _decode(self, raw: RawObject | None) -> list[Grant]:
        try:
            return decode_ledger((raw or {}).get("data"))
        except LedgerError as err:
            raise PermanentError(str(err), 422) from err


class PreviewLedgerStore(LedgerStore):
    """A dry run's: it reads what the real leader spent, and records nothing, so a preview
    spends no budget a real leader would later find spent."""

    def save(self, grants: list[Grant], now: datetime, window: Window) -> None:
        del grants, now, window
