"""A persisted-label record ConfigMap as read back: decoded, or why it cannot be, and the name
of a quarantined copy's reason. Read alike by the reconciler's label store and by
`nodegate status|explain|labels`. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from nodegate.core.decisions.persisted_labels import LabelRecord, RecordError, decode_record
from nodegate.core.views.raw import RawObject

QUARANTINE_REASON_ANNOTATION = "nodegate.dev/quarantine-reason"


@dataclass(frozen=True)
class StoredRecord:
    """A record ConfigMap as cached: decoded, or the reason it cannot be."""

    name: str
    resource_version: str
    record: LabelRecord | None
    error: str | None
    raw: RawObject


def stored_record(raw: RawObject) -> StoredRecord:
    meta = raw.get("metadata") or {}
    try:
        record, error = decode_record(raw.get("data")), None
    except RecordError as err:
        record, error = None, str(err)
    return StoredRecord(
        str(meta.get("name")), str(meta.get("resourceVersion") or ""), record, error, raw
    )
