"""A dry run's client: it reads the installation as a leader does and writes none of it.

A preview (`nodegate reconcile --dry-run`) is pointed at the installation's namespace so that
it plans against what the real leader left there: the rules in force and the held update (the
status record), what the eviction budget has spent (the ledger), the holds under way (the
sightings), the taints nodegate owned (the taint history) and the persisted labels (their
records). It must leave each of them as it found it: after a restart the real leader puts back
the rules the status record names, so a preview that rewrote the record had its own rules
enforced (issue 56). Every part of the reconciler that writes is built on one client, and in a
dry run that client is this one (`installation_api`), so a record store added later cannot
forget the dry run: it has nothing to write with.

A ConfigMap write (a record) is not sent and answers as if stored, so each store goes on as a
leader's would (a grant counts as spent in the preview's own memory, a failed write is not
retried every resync); each object's first withheld write is logged. A Node write never comes
here (the node writer and the OCI poller say a dry run's would-be changes themselves); one that
did is refused as a PermanentError, never sent. Reads, watches, Events (a preview's report) and
the API server's time go through.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any, Self

from nodegate.core.decisions.persisted_labels import RECORD_LABEL, RECORD_LABEL_VALUE
from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP
from nodegate.core.objects.sightings_record import SIGHTINGS_CONFIGMAP
from nodegate.core.objects.status_record import STATUS_CONFIGMAP
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.reconciler.kit.errors import PermanentError
from nodegate.reconciler.kit.kube import Api, RawObject
from nodegate.reconciler.kit.reads_through import ReadsThrough
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.preview")


def installation_api(api: Api, dry_run: bool) -> Api:
    """The client the reconciler's writing parts are built on: `api` itself, or in a dry run
    a `PreviewApi` over it."""
    return PreviewApi(api) if dry_run else api


class PreviewApi(ReadsThrough):
    """`Api` that reads through `inner` and sends no write (see the module's docstring)."""

    def __init__(self, inner: Api) -> None:
        super().__init__(inner)
        self._said: set[str] = set()
        self._lock = threading.Lock()

    # --- reads, watches, Events and the time: as the installation's client (ReadsThrough) ---

    def within(self, seconds: float) -> Self:
        bounded = copy.copy(self)  # the same record of what was said
        bounded._inner = self._inner.within(seconds)
        return bounded

    # --- writes: none is sent ------------------------------------------------------------------

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        return self._as_if_stored("create", namespace, body)

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        del name  # the body's
        return self._as_if_stored("replace", namespace, body)

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        meta = {**(merge_patch.get("metadata") or {}), "name": name}
        return self._as_if_stored("patch", namespace, {**merge_patch, "metadata": meta})

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        del resource_version
        self._withheld("delete", f"ConfigMap {namespace}/{name}")

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        del merge_patch
        raise self._refused(f"Node {name}")

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject:
        del patch
        raise self._refused(f"Node {name} (status)")

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject:
        del merge_patch
        raise self._refused(f"NodeRules {name} (status)")

    def _as_if_stored(self, verb: str, namespace: str, body: RawObject) -> RawObject:
        stored: RawObject = copy.deepcopy(body)
        meta: dict[str, Any] = stored.setdefault("metadata", {})
        meta["namespace"] = namespace
        self._withheld(verb, f"ConfigMap {namespace}/{meta.get('name', '')}")
        return stored

    def _withheld(self, verb: str, what: str) -> None:
        with self._lock:
            if what in self._said:
                return
            self._said.add(what)
        log.info("dry run: not written", extra={"write": verb, "object": what})

    def _refused(self, what: str) -> PermanentError:
        log.error("dry run: a Node write reached the client; refused", extra={"object": what})
        # 403: the node writer does not split a refusal of permission into a taints-only write.
        return PermanentError(f"a dry run writes nothing: {what} not written", 403)


def preview_reads(settings: ReconcilerSettings) -> dict[str, object]:
    """What a dry run reads from the installation, said once at start (the log's fields): the
    records in the state namespace, read and never written; the Lease, not taken."""
    namespace = settings.records_namespace
    lease = settings.leader_election
    return {
        "state_namespace": namespace,
        "reads": [
            f"ConfigMap {namespace}/{STATUS_CONFIGMAP} (the rules in force, a held update)",
            f"ConfigMap {namespace}/{LEDGER_CONFIGMAP} (the eviction budgets' grants)",
            f"ConfigMap {namespace}/{SIGHTINGS_CONFIGMAP} (for holds under way)",
            f"ConfigMap {namespace}/{HISTORY_CONFIGMAP} (the taints nodegate owned)",
            f"ConfigMaps {RECORD_LABEL}={RECORD_LABEL_VALUE} in {namespace} (persisted labels, "
            "while the rules persist labels)",
        ],
        "writes": "Events only; no record, no Node, no Lease",
        "lease": (
            f"{lease.lease_namespace}/{lease.lease_name} not taken: "
            "a dry run takes no part in leader election"
        ),
    }
