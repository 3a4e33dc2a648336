"""The reconciler's status record (`nodegate.core.objects.status_record`): written by the leader
when the rules in force change or an update is held or released, read by `nodegate
status|explain|plan`.

Plain data in one ConfigMap of the reconciler's namespace, written with update, then create if it
does not exist (no read: only the leader writes it); the shipped Role grants update on it by name
(`manifests/rbac.py`). A failed write is kept and tried again with backoff (`retry_when_due`,
one of the leader's frequent chores): the record is for humans and must never hold up the
reconciler, but a transient failure must not leave it stale until the next resync (5 minutes).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

from nodegate.core.objects.status_record import (
    STATUS_CONFIGMAP,
    HeldUpdate,
    ReconcilerStatus,
    RecordedRules,
    encode_status,
    rules_of_record,
)
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import KubeError, NotFoundError, PermanentError
from nodegate.reconciler.kit.kube import ConfigMapApi, RawObject
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate

log = logging.getLogger("nodegate.status")

PERMANENT_RETRY_SECONDS = 300.0
"""How long after a permanent refusal (403, 422) the record is tried again: as often as the
resync used to, since only a change of RBAC or of the record mends it."""


def installed_version() -> str:
    try:
        return version("nodegate")
    except PackageNotFoundError:  # a source tree never installed: say so rather than fail
        return "unknown"


def this_process() -> str:
    """The status record's `writerProcess`: what wrote it, where (a Pod's host name is its
    name) and which process."""
    return f"nodegate reconcile on {socket.gethostname()}, pid {os.getpid()}"


class StatusPublisher:
    """Keeps the status record equal to what it was last told; `retry` after a failed write."""

    def __init__(
        self,
        api: ConfigMapApi,
        namespace: str,
        writer: str,
        clock: Callable[[], datetime],
        max_untaint_share: float | None = None,
        on_error: Callable[[str], None] = lambda _kind: None,
        process: str | None = None,
    ) -> None:
        """`process`: the record's `writerProcess` (default: `this_process()`)."""
        self._api = api
        self._namespace = namespace
        self._now = clock
        self._on_error = on_error
        self._lock = threading.Lock()
        proc = this_process() if process is None else process
        self._status = ReconcilerStatus(
            writer, installed_version(), 0, None, "", None, None, clock(), max_untaint_share, proc
        )
        self._rules_text = ""
        self._pending = False
        self._writing = threading.Lock()
        self._backoff = Backoff()
        self._next_attempt = 0.0
        """Monotonic time before which `retry_when_due` does not try a failed write again."""

    def recover(self) -> RecordedRules | None:
        """The record a former leader (or this replica before a restart) left, checked, and
        taken as this publisher's state so that nothing is rewritten until something changes;
        None when there is none. TemporaryError: try again; StatusRecordError: it cannot say."""
        raw = self._api.read_configmap(self._namespace, STATUS_CONFIGMAP)
        if raw is None:
            return None
        recorded = rules_of_record(raw.get("data"))
        with self._lock:
            mine = self._status
            ours = replace(
                recorded.status,
                writer=mine.writer,
                version=mine.version,
                max_untaint_share=mine.max_untaint_share,
                writer_process=mine.writer_process,
            )
            self._status = replace(ours, updated_at=self._now())
            self._rules_text = recorded.text
            # Who writes it and with which limit (`nodegate plan` uses the recorded one) is
            # this process's to say, as soon as it differs; the rest is written when it changes.
            self._pending = ours != recorded.status
        self.retry()
        return recorded

    def recorded_in_force(self) -> tuple[str, NodeRules] | None:
        """The record's rules in force and their digest, read and checked, taking nothing as
        this publisher's state (a standby's webhook asks for them); None when there are none."""
        raw = self._api.read_configmap(self._namespace, STATUS_CONFIGMAP)
        if raw is None:
            return None
        recorded = rules_of_record(raw.get("data"))
        if recorded.rules is None or recorded.status.digest is None:
            return None
        return recorded.status.digest, recorded.rules

    def applied(self, update: RulesUpdate, generation: int) -> None:
        """A rules generation took effect (and nothing is held any more)."""
        now = self._now()
        with self._lock:
            self._status = replace(
                self._status,
                generation=generation,
                digest=update.digest,
                source=update.source,
                applied_at=now,
                held=None,
                updated_at=now,
            )
            self._rules_text = update.text
            self._pending = True
        self.retry()

    def held(self, update: RulesUpdate, reason: str) -> None:
        """A valid update is held by the blast-radius guard."""
        now = self._now()
        with self._lock:
            held = self._status.held
            since = held.since if held is not None and held.digest == update.digest else now
            self._status = replace(
                self._status,
                held=HeldUpdate(update.digest, reason, update.source, since),
                updated_at=now,
            )
            self._pending = True
        self.retry()

    def released(self) -> None:
        """The held update was reverted: nothing is held any more."""
        with self._lock:
            if self._status.held is None:
                return
            self._status = replace(self._status, held=None, updated_at=self._now())
            self._pending = True
        self.retry()

    def retry_when_due(self) -> bool:
        """`retry`, unless the last write failed less than its backoff ago (800 ms doubling to
        30 s): called every few milliseconds, it writes at that pace only while writes work."""
        if time.monotonic() < self._next_attempt:
            return False
        # Never waits for the rules' thread's write: the chores have others to do meanwhile.
        if not self._writing.acquire(blocking=False):
            return False
        try:
            return self._retry()
        finally:
            self._writing.release()

    def retry(self) -> bool:
        """Write the record if a write is due; True once it is stored. One write at a time: the
        chores' retry and the rules' thread would both find no record and both create it."""
        with self._writing:
            return self._retry()

    def _retry(self) -> bool:
        with self._lock:
            if not self._pending:
                return True
            data = encode_status(self._status, self._rules_text)
        body: RawObject = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": STATUS_CONFIGMAP, "namespace": self._namespace},
            "data": data,
        }
        try:
            try:
                # No resourceVersion: the leader alone writes it, and the last word is its own.
                self._api.replace_configmap(self._namespace, STATUS_CONFIGMAP, body)
            except NotFoundError:
                self._api.create_configmap(self._namespace, body)
        except KubeError as err:
            log.warning("could not store the status record", extra={"error": str(err)})
            self._on_error("api")
            with self._lock:
                wait = max(self._backoff.next_delay(), getattr(err, "retry_after", None) or 0.0)
                if isinstance(err, PermanentError):  # RBAC, a record too large: not soon
                    wait = max(wait, PERMANENT_RETRY_SECONDS)
                self._next_attempt = time.monotonic() + wait
            return False
        with self._lock:
            self._backoff.reset()
            if encode_status(self._status, self._rules_text) == data:
                self._pending = False
        return True
