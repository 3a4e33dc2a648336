"""The eviction ledger's ConfigMap: written with optimistic concurrency, merged with what another
writer stored, and never guessed when it cannot be read."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodegate.core.decisions.eviction_budget import Grant, Place
from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP, LEDGER_KEY, decode_ledger
from nodegate.reconciler.kit.errors import ConflictError, PermanentError
from nodegate.reconciler.nodes.fence.preview_api import PreviewApi
from nodegate.reconciler.nodes.records.eviction_ledger_store import LedgerStore
from tests.unit.core.builders import NOW
from tests.unit.reconciler.kit.fakes import FakeApi

WHERE = ("nodegate-system", LEDGER_CONFIGMAP)
A = Grant("network-problem", "a1", Place(), NOW - timedelta(minutes=1))
B = Grant("network-problem", "b1", Place(), NOW)


def WINDOW(_ledger: str) -> timedelta:  # noqa: N802 (a constant, as the breaker passes one)
    return timedelta(minutes=10)


def stored(api: FakeApi) -> list[Grant]:
    return decode_ledger(api.configmaps[WHERE]["data"])


def test_the_first_grant_creates_the_ledger_and_later_ones_add_to_it() -> None:
    api = FakeApi()
    store = LedgerStore(api, "nodegate-system")

    store.save([A], NOW, WINDOW)
    store.save([B], NOW, WINDOW)

    assert stored(api) == [A, B]
    assert store.load() == [A, B]


def test_a_concurrent_write_is_merged_not_overwritten() -> None:
    api = FakeApi()
    store = LedgerStore(api, "nodegate-system")
    store.save([A], NOW, WINDOW)
    api.fail("replace_configmap", ConflictError("changed since read"))

    store.save([B], NOW, WINDOW)

    assert stored(api) == [A, B]


def test_a_ledger_that_cannot_be_read_stops_grants_rather_than_being_guessed() -> None:
    api = FakeApi()
    store = LedgerStore(api, "nodegate-system")
    store.save([A], NOW, WINDOW)
    api.configmaps[WHERE]["data"] = {LEDGER_KEY: "{hand-edited"}

    with pytest.raises(PermanentError):
        store.load()
    with pytest.raises(PermanentError):
        store.save([B], NOW, WINDOW)


def test_a_dry_run_reads_the_ledger_and_records_nothing() -> None:
    api = FakeApi()
    LedgerStore(api, "nodegate-system").save([A], NOW, WINDOW)
    preview = LedgerStore(PreviewApi(api), "nodegate-system")  # a dry run's client

    preview.save([B], NOW, WINDOW)

    assert preview.load() == [A]


def test_what_is_stored_is_compacted_to_one_grant_per_node_within_the_window() -> None:
    api = FakeApi()
    store = LedgerStore(api, "nodegate-system")
    flaps = [Grant("network-problem", "a1", Place(), NOW - timedelta(seconds=s)) for s in range(50)]
    stale = Grant("network-problem", "old", Place(), NOW - timedelta(minutes=11))

    store.save([*flaps, stale], NOW, WINDOW)

    assert stored(api) == [flaps[0]]
