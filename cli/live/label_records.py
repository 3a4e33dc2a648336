"""The persisted-label records, for `nodegate labels`: listed, dropped, handed to another machine.

The day-2 layer's only writes, each preconditioned on the resourceVersion it read, so a record
the reconciler changed in between answers 409 and is left as it is. What a hand-over does to
the record, and under which key it is kept, is decided in core (`persisted_labels.hand_over`).
"""

from __future__ import annotations

from nodegate.cli.live.cluster import Cluster
from nodegate.core.decisions.persisted_labels import (
    HandOver,
    StoredRecord,
    encode_record,
    record_configmap,
    record_name,
)
from nodegate.reconciler.kit.errors import ConflictError, KubeError, NotFoundError
from nodegate.reconciler.kit.kube import RawObject


class LabelRecords(Cluster):
    """The cluster as the day-2 commands read it (`label_records`, `node`), and the writes."""

    def forget(self, stored: StoredRecord) -> None:
        self._api.delete_configmap(self.where.namespace, stored.name, stored.resource_version)

    def hand_over(self, stored: StoredRecord, handed: HandOver) -> tuple[str, str | None]:
        """Store the record as `persisted_labels.hand_over` decided: its name now, and why the
        record it came from was kept, if it was. Under the same key: replaced, if unchanged
        since read (ConflictError). Re-keyed: created under the new key first (ConflictError if
        a record appeared there meanwhile: nothing changed), then removed from the old key if
        unchanged since read, so whichever write fails, no labels are lost; if the removal
        fails, both hold them and the old one is said to be kept."""
        assert handed.record is not None
        namespace = self.where.namespace
        data = encode_record(handed.record)
        if not handed.from_key:
            self._api.replace_configmap(namespace, stored.name, {**stored.raw, "data": data})
            return stored.name, None
        name = record_name(handed.record.key)
        body: RawObject = record_configmap(namespace, name, data)
        self._api.create_configmap(namespace, body)
        try:
            self._api.delete_configmap(namespace, stored.name, stored.resource_version)
        # Forgotten meanwhile: gone, as wanted.
        except NotFoundError:
            return name, None
        # Written since it was read (the reconciler marked it gone, or its node changed).
        except ConflictError:
            return name, "it was written since it was read"
        # The new record is in place either way: the old one is only left over.
        except KubeError as err:
            return name, f"it could not be removed ({err})"
        return name, None
