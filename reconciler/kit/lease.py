"""The Lease: its calls, its record, and the takeover rule decided on this replica's monotonic
clock (client-go's `tryAcquireOrRenew`; why not the official client's: `leader.py`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

from nodegate.reconciler.kit.client import CONNECT_TIMEOUT_SECONDS
from nodegate.reconciler.kit.errors import ConflictError
from nodegate.reconciler.kit.fence import Clock, LeaderFence
from nodegate.reconciler.kit.kube import KubeApi, RawObject, path_of

log = logging.getLogger("nodegate.leader")


class LeaseSettings(Protocol):
    """What the elector reads of its settings (the reconciler's LeaderElectionSettings)."""

    @property
    def lease_name(self) -> str: ...
    @property
    def lease_namespace(self) -> str: ...
    @property
    def identity(self) -> str: ...
    @property
    def lease_duration_seconds(self) -> int: ...
    @property
    def renew_deadline_seconds(self) -> int: ...
    @property
    def retry_period_seconds(self) -> int: ...


class LeaseApi(Protocol):
    """The Lease calls the elector makes (a fake in unit tests)."""

    def read_lease(self, namespace: str, name: str) -> RawObject | None: ...

    def create_lease(self, namespace: str, body: RawObject) -> RawObject: ...

    def replace_lease(self, namespace: str, name: str, body: RawObject) -> RawObject: ...


class KubeLeaseApi(KubeApi):
    """`LeaseApi` sent as `KubeApi`'s calls are, each cut at `timeout_seconds`.

    urllib3 tries a connect up to four times (`load_api_client`), so each attempt gets an
    eighth of the cut (at most the usual connect timeout): with the whole cut per attempt, a
    path that drops connects silently held a call four cuts long (20 s at the default renew
    deadline), past the renew deadline, and a leader whose path came back after 6 s had
    already stepped down."""

    def __init__(self, api_client: client.ApiClient, timeout_seconds: float) -> None:
        super().__init__(api_client, timeout_seconds)
        self._timeout = (min(CONNECT_TIMEOUT_SECONDS, timeout_seconds / 8), timeout_seconds)

    def read_lease(self, namespace: str, name: str) -> RawObject | None:
        return self._read_or_none(path_of("Lease", namespace, name))

    def create_lease(self, namespace: str, body: RawObject) -> RawObject:
        return self._raw("POST", path_of("Lease", namespace), body=body)

    def replace_lease(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's resourceVersion: a concurrent change answers 409."""
        return self._raw("PUT", path_of("Lease", namespace, name), body=body)


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec as elections read it (client-go's LeaderElectionRecord)."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def of(cls, lease: RawObject) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> RawObject:
        spec: RawObject = {
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.holder:
            spec["holderIdentity"] = self.holder
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


def claimed(
    record: LeaseRecord | None, me: str, duration: int, now: str, renewing: bool = True
) -> LeaseRecord:
    """The record that makes `me` the holder: a renewal keeps acquireTime and transitions, a
    takeover starts its own and counts one more transition, also after a release (client-go's
    rule), so each term of leadership has a larger number than every earlier one (the fence
    token of core/decisions/fencing.py relies on it). A process that finds its identity in a Lease
    it has not itself acquired (`renewing` False: a restart under a fixed `--lease-identity`) takes
    it over: the paused process that wrote it must not share its term."""
    if record is not None and record.holder == me and renewing:
        return LeaseRecord(me, duration, record.acquire_time or now, now, record.transitions)
    transitions = 0 if record is None else record.transitions + 1
    return LeaseRecord(me, duration, now, now, transitions)


LEADER_NOTE = "nodegate.dev/leader-note"
"""Annotation on the Lease: what the leader tells the standbys (they read the Lease anyway)."""


def micro_time(moment: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _claimed_lease(lease: RawObject, record: LeaseRecord, note: str | None) -> RawObject:
    """The Lease with `record` as its spec and, if given, `note` in its annotations."""
    body: RawObject = {**lease, "spec": record.spec()}
    if note is not None:
        metadata: dict[str, Any] = dict(lease.get("metadata") or {})
        metadata["annotations"] = {**(metadata.get("annotations") or {}), LEADER_NOTE: note}
        body["metadata"] = metadata
    return body


def _note_of(lease: RawObject) -> str | None:
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    note = annotations.get(LEADER_NOTE)
    return str(note) if note is not None else None


class Election:
    """One replica's view of the Lease, and its acquire-or-renew attempts."""

    def __init__(
        self,
        api: LeaseApi,
        settings: LeaseSettings,
        fence: LeaderFence,
        clock: Clock = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        note: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._api = api
        self._note = note
        self.leader_note: str | None = None
        """The holder's note, as last read or written (`LEADER_NOTE`)."""
        self._settings = settings
        self._fence = fence
        self._clock = clock
        self._wall = wall
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self.held_by_other = False
        """Set by an attempt that found another holder whose Lease has not expired."""
        self._failing = False
        self._acquired = False
        """Whether this process has itself acquired the Lease (and renews from then on)."""
        self._transitions = -1
        """The leaseTransitions of the term this process acquired."""

    def _observe(self, record: LeaseRecord) -> None:
        """Remember when the record last changed, on our own clock, taken after the read
        returned: the change happened before that, so waiting from here is never too short."""
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()

    def attempt(self) -> bool:
        """One acquire-or-renew; True if we hold the Lease now. Any error at all is a failed
        attempt (logged once per run of failures), never a dead thread."""
        started = self._clock()
        try:
            ok = self._try(started)
        except ConflictError:
            ok = False  # someone wrote the Lease between our read and our write
        except Exception as err:
            if not self._failing:
                self._failing = True
                log.warning(
                    "lease attempt failed; retrying every retry period (logged once)",
                    extra={"error": f"{type(err).__name__}: {err}"},
                )
            return False
        if self._failing:
            self._failing = False
            log.warning("lease calls work again")
        if ok and self._observed is not None:
            self._fence.renewed(started, (self._observed.holder, self._observed.transitions))
        return ok

    def _try(self, started: float) -> bool:
        s = self._settings
        me, duration = s.identity, s.lease_duration_seconds
        lease = self._api.read_lease(s.lease_namespace, s.lease_name)
        now = micro_time(self._wall())
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.lease_name, "namespace": s.lease_namespace},
                "spec": claimed(None, me, duration, now).spec(),
            }
            self._observe(LeaseRecord.of(self._api.create_lease(s.lease_namespace, body)))
            self.held_by_other = False
            self._acquired, self._transitions = True, 0
            return True
        record = LeaseRecord.of(lease)
        self._observe(record)
        self.leader_note = _note_of(lease)
        if self._acquired and record.holder == me and record.transitions != self._transitions:
            # Another process under our identity took it (a restart under a fixed identity)
            # while this one was paused: its term, not ours.
            self.held_by_other = True
            return False
        # client-go's rule: we may write ourselves in if the Lease is free, or ours, or its
        # record has not changed for the lease duration (`lease_duration_seconds`) on *our*
        # monotonic clock since we first observed it. The record's own times are never
        # compared with ours.
        if record.holder not in ("", me) and self._clock() - self._observed_at < duration:
            self.held_by_other = True
            return False
        self.held_by_other = False
        note = self._note()
        if note is not None:  # until it has one, the last leader's note stands
            self.leader_note = note
        record = claimed(record, me, duration, now, renewing=self._acquired)
        body = _claimed_lease(lease, record, note)
        answer = self._api.replace_lease(s.lease_namespace, s.lease_name, body)
        self._observe(LeaseRecord.of(answer))
        self._acquired, self._transitions = True, record.transitions
        return True

    def current_term(self) -> tuple[str, int]:
        """The Lease's holder and transitions, read now (KubeError if it cannot be read)."""
        s = self._settings
        lease = self._api.read_lease(s.lease_namespace, s.lease_name)
        record = LeaseRecord.of(lease) if lease is not None else LeaseRecord("", 0, None, None, -1)
        return record.holder, record.transitions

    def release(self) -> None:
        """Hand the Lease back (holder cleared, duration 1 s) if it is still ours."""
        s = self._settings
        lease = self._api.read_lease(s.lease_namespace, s.lease_name)
        if lease is None or LeaseRecord.of(lease).holder != s.identity:
            return
        record = LeaseRecord.of(lease)
        now = micro_time(self._wall())
        released = LeaseRecord("", 1, now, now, record.transitions)
        self._acquired = False
        self._api.replace_lease(s.lease_namespace, s.lease_name, {**lease, "spec": released.spec()})
