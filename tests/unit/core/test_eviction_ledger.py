"""The eviction ledger as stored: every grant kept for a day, read back exactly, and a ledger
that cannot be read refused, never guessed."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from nodegate.core.decisions.eviction_budget import Grant, Place
from nodegate.core.objects.eviction_ledger import (
    KEEP,
    LEDGER_KEY,
    LedgerError,
    decode_ledger,
    encode_ledger,
    merged,
)
from tests.unit.core.builders import NOW

GRANTS = [
    Grant("network-problem", "n1", Place("gpu", "zone-a"), NOW - timedelta(minutes=3)),
    Grant("", "n2", Place(None, None), NOW - timedelta(seconds=1, microseconds=250)),
]


def test_grants_read_back_exactly_as_written() -> None:
    assert decode_ledger(encode_ledger(GRANTS, NOW)) == GRANTS


def test_grants_older_than_any_window_are_dropped_on_write() -> None:
    old = Grant("network-problem", "n3", Place(), NOW - KEEP)

    assert decode_ledger(encode_ledger([*GRANTS, old], NOW)) == GRANTS


def test_no_ledger_is_no_grant() -> None:
    assert decode_ledger(None) == []
    assert decode_ledger({}) == []


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"version": 2, "grants": []}),
        json.dumps({"version": 1}),
        json.dumps({"version": 1, "grants": [{"ledger": "x", "node": "n1"}]}),
        json.dumps({"version": 1, "grants": [{"ledger": "x", "node": "n1", "at": "yesterday"}]}),
        "[" * 100_000,
    ],
)
def test_a_ledger_that_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(LedgerError):
        decode_ledger({LEDGER_KEY: text})


def test_merging_keeps_every_grant_of_either_once() -> None:
    assert merged(GRANTS[:1], GRANTS) == GRANTS
