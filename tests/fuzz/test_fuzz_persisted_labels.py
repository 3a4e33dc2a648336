"""Persisted-label records are ConfigMaps anyone with access may hand-edit: whatever their data
holds, decoding returns a record or raises RecordError (the reconciler then quarantines it),
never another exception."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.persisted_labels import (
    DATA_KEY,
    LabelRecord,
    RecordError,
    decode_record,
    encode_record,
)
from tests.fuzz.profiles import fuzz

GOOD = json.loads(
    encode_record(
        LabelRecord(
            "oci://ocid1.instance.oc1.phx.a",
            "uid-1",
            {"persist.example.com/team": "ml"},
            datetime(2026, 11, 23, tzinfo=UTC),
            ("n1",),
        )
    )[DATA_KEY]
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
DOCUMENTS = st.one_of(
    st.text(max_size=400),
    JSON_VALUES.map(json.dumps),
    st.dictionaries(st.sampled_from(sorted(GOOD)), JSON_VALUES, max_size=8).map(
        lambda changes: json.dumps({**GOOD, **changes})
    ),
)


@fuzz
@given(DOCUMENTS)
def test_a_record_decodes_or_is_a_record_error(text: str) -> None:
    try:
        record = decode_record({DATA_KEY: text})
    except RecordError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in record.labels.items())
    assert decode_record(encode_record(record)) == record
