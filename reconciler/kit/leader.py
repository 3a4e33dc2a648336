"""Leader election on a coordination.k8s.io Lease, and the fence that keeps a lost leader quiet.

The decision is ours, modelled on client-go's `leaderelection.tryAcquireOrRenew`, on the
official client's Lease read/create/replace calls. The official client's `LeaderElection` is not
used: it decides takeover by comparing `time.time()` with the Lease's `renewTime`, so a standby
whose wall clock steps forward (NTP, a VM resumed) takes over from a leader that is renewing in
time, and both write (measured: both fences held for about 7 s with the standby's clock stepped
60 s). Here, as in client-go, a standby records *when it observed* the Lease's record change, on
its own monotonic clock, and takes over only once `lease_duration` has passed on that clock
without a change. Wall time is only written into the record, for humans.

The fence is what makes "never two writers" hold whatever goes wrong: a write may start only
while the last successful renewal *started* less than `renew_deadline` ago. A standby observes a
renewal only after it was sent and waits `lease_duration` (> renew_deadline) past that, so the
old leader's fence has lapsed before the new leader's opens, even if the old one's election
thread hangs or dies, its Lease reads are slow, or anyone's wall clock steps. The fence also
counts writes in flight: on a clean hand-back it is revoked first (no write starts), then the
writes in flight are waited for, and only then is the Lease released, since a release lets the
standby lead within one retry period.

Every Lease call has its own deadline (half the renew deadline), so a silent connection costs one
attempt, not the leadership; failures are logged once per run, not once per retry.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from kubernetes import client

from nodegate.reconciler.kit.errors import (
    ConflictError,
    KubeError,
    NotFoundError,
    TemporaryError,
    TimedOutError,
)
from nodegate.reconciler.kit.kube import (
    CONNECT_TIMEOUT_SECONDS,
    RawObject,
    call,
    drop_idle_connections,
)

log = logging.getLogger("nodegate.leader")

Clock = Callable[[], float]
WallClock = Callable[[], datetime]


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


class LeaderFence:
    """Whether this process may write now, and which writes are in flight. Without leader
    election it always may."""

    def __init__(self, renew_deadline_seconds: float | None, clock: Clock = time.monotonic) -> None:
        self._deadline = renew_deadline_seconds
        self._clock = clock
        self._valid_until = float("inf") if renew_deadline_seconds is None else 0.0
        self._in_flight = 0
        self._changed = threading.Condition()

    def renewed(self, attempt_started: float) -> None:
        """A renewal that was sent at `attempt_started` (monotonic) succeeded."""
        if self._deadline is None:
            return
        with self._changed:
            self._valid_until = max(self._valid_until, attempt_started + self._deadline)

    def revoke(self) -> None:
        """No write may start from now on (writes in flight go on: see `wait_quiet`)."""
        with self._changed:
            self._valid_until = 0.0

    def holds(self) -> bool:
        with self._changed:
            return self._clock() < self._valid_until

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around one write: refused (TemporaryError) unless the fence holds, and counted as in
        flight until it returns, so a hand-back can wait for it."""
        with self._changed:
            if not self._clock() < self._valid_until:
                raise TemporaryError("not leading: the write fence does not hold")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def wait_quiet(self, timeout: float) -> bool:
        """Wait until no write is in flight; False if some still is after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._in_flight == 0, timeout)


# --- the Lease, its record and the decision ---------------------------------------------------


class LeaseApi(Protocol):
    """The Lease calls the elector makes (a fake in unit tests)."""

    def read_lease(self, namespace: str, name: str) -> RawObject | None: ...

    def create_lease(self, namespace: str, body: RawObject) -> RawObject: ...

    def replace_lease(self, namespace: str, name: str, body: RawObject) -> RawObject: ...


class KubeLeaseApi:
    """`LeaseApi` on the official client, each call cut at `timeout_seconds`."""

    def __init__(self, api_client: client.ApiClient, timeout_seconds: float) -> None:
        self._api_client = api_client
        self._api = client.CoordinationV1Api(api_client)
        self._timeout = (min(CONNECT_TIMEOUT_SECONDS, timeout_seconds), timeout_seconds)

    def read_lease(self, namespace: str, name: str) -> RawObject | None:
        try:
            return self._raw(self._api.read_namespaced_lease, name, namespace)
        except NotFoundError:
            return None

    def create_lease(self, namespace: str, body: RawObject) -> RawObject:
        return self._raw(self._api.create_namespaced_lease, namespace, cast(Any, body))

    def replace_lease(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's resourceVersion: a concurrent change answers 409."""
        return self._raw(self._api.replace_namespaced_lease, name, namespace, cast(Any, body))

    def _raw(self, function: Callable[..., Any], *args: Any) -> RawObject:
        try:
            response = call(function, *args, _preload_content=False, _request_timeout=self._timeout)
        except TimedOutError:
            drop_idle_connections(self._api_client)
            raise
        try:
            return cast(RawObject, json.loads(response.data))
        except ValueError as err:
            raise TemporaryError(f"Lease answer is not JSON: {err}") from err


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


def may_take(
    record: LeaseRecord, me: str, observed_at: float, now: float, lease_duration: float
) -> bool:
    """Whether `me` may write itself into the Lease now (client-go's rule): it is free, or
    ours, or its record has not changed for `lease_duration` on *our* monotonic clock since we
    first observed it (`observed_at`). The record's own times are never compared with ours."""
    if not record.holder or record.holder == me:
        return True
    return now - observed_at >= lease_duration


def claimed(record: LeaseRecord | None, me: str, duration: int, now: str) -> LeaseRecord:
    """The record that makes `me` the holder: a renewal keeps acquireTime and transitions, a
    takeover starts its own."""
    if record is not None and record.holder == me:
        return LeaseRecord(me, duration, record.acquire_time or now, now, record.transitions)
    transitions = 0 if record is None else record.transitions + (1 if record.holder else 0)
    return LeaseRecord(me, duration, now, now, transitions)


def micro_time(moment: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Election:
    """One replica's view of the Lease, and its acquire-or-renew attempts."""

    def __init__(
        self,
        api: LeaseApi,
        settings: LeaseSettings,
        fence: LeaderFence,
        clock: Clock = time.monotonic,
        wall: WallClock = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._settings = settings
        self._fence = fence
        self._clock = clock
        self._wall = wall
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self.held_by_other = False
        """Set by an attempt that found another holder whose Lease has not expired."""
        self._failing = False

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
        if ok:
            self._fence.renewed(started)
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
            return True
        record = LeaseRecord.of(lease)
        self._observe(record)
        if not may_take(record, me, self._observed_at, self._clock(), duration):
            self.held_by_other = True
            return False
        self.held_by_other = False
        body = {**lease, "spec": claimed(record, me, duration, now).spec()}
        answer = self._api.replace_lease(s.lease_namespace, s.lease_name, body)
        self._observe(LeaseRecord.of(answer))
        return True

    def release(self) -> None:
        """Hand the Lease back (holder cleared, duration 1 s) if it is still ours."""
        s = self._settings
        lease = self._api.read_lease(s.lease_namespace, s.lease_name)
        if lease is None or LeaseRecord.of(lease).holder != s.identity:
            return
        record = LeaseRecord.of(lease)
        now = micro_time(self._wall())
        released = LeaseRecord("", 1, now, now, record.transitions)
        self._api.replace_lease(s.lease_namespace, s.lease_name, {**lease, "spec": released.spec()})


class LeaderElector:
    """`on_leading(True/False)` is told every change of leadership (for a gauge)."""

    def __init__(
        self,
        api_client: client.ApiClient | None,
        settings: LeaseSettings,
        on_leading: Callable[[bool], None] = lambda _leading: None,
        *,
        lease_api: LeaseApi | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._settings = settings
        self._on_leading = on_leading
        self.fence = LeaderFence(settings.renew_deadline_seconds, clock)
        timeout = max(1.0, settings.renew_deadline_seconds / 2)
        if lease_api is None:
            if api_client is None:
                raise ValueError("give an api_client or a lease_api")
            lease_api = KubeLeaseApi(api_client, timeout)
        api = lease_api
        self._election = Election(api, settings, self.fence, clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leading = False

    def start(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Compete for the Lease in a thread; `on_started` once leading, `on_stopped` if lost."""
        self._thread = threading.Thread(
            target=self._run, args=(on_started, on_stopped), name="leader", daemon=True
        )
        self._thread.start()

    def _run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        settings, election = self._settings, self._election
        while not self._stop.is_set():
            if election.attempt():
                break
            self._stop.wait(settings.retry_period_seconds)
        else:
            return
        self.leading = True
        self._on_leading(True)
        log.info("became leader", extra={"identity": settings.identity})
        threading.Thread(target=on_started, name="lead", daemon=True).start()
        while not self._stop.wait(settings.retry_period_seconds):
            renewed = election.attempt()
            if self._stop.is_set():
                return
            if renewed or (self.fence.holds() and not election.held_by_other):
                continue
            self._lost(on_stopped)
            return

    def watch_fence(self, on_stopped: Callable[[], None]) -> bool:
        """Called periodically by the main loop: a leader whose fence expired has lost, even
        if the election thread is stuck in a call. True if leadership was lost."""
        if self.leading and not self.fence.holds() and not self._stop.is_set():
            self._lost(on_stopped)
            return True
        return False

    def _lost(self, on_stopped: Callable[[], None]) -> None:
        if not self.leading:
            return
        self.leading = False
        self.fence.revoke()
        self._on_leading(False)
        log.error(
            "lost leadership: could not renew the Lease within the renew deadline",
            extra={"identity": self._settings.identity},
        )
        on_stopped()

    def stop_and_release(self, drain_seconds: float | None = None) -> None:
        """Clean shutdown: stop competing, revoke the fence (no write starts), wait for the
        writes in flight, and only then hand the Lease back, so a standby, which leads within
        one retry period of the release, can never write while one of ours still lands. Writes
        still in flight after `drain_seconds` (default: the renew deadline) keep the Lease:
        the standby then takes over when it expires, as after a crash."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._settings.retry_period_seconds + 10)
        was_leading = self.leading and self.fence.holds()
        self.leading = False
        self.fence.revoke()
        self._on_leading(False)
        if not was_leading:
            return
        drain = self._settings.renew_deadline_seconds if drain_seconds is None else drain_seconds
        if not self.fence.wait_quiet(drain):
            log.warning(
                "writes still in flight; not releasing the Lease (it expires instead)",
                extra={"identity": self._settings.identity, "waited_seconds": drain},
            )
            return
        try:
            self._election.release()
            log.info("released leadership", extra={"identity": self._settings.identity})
        except KubeError as err:
            # Not fatal: the standby takes over once the lease expires.
            log.warning("could not release the lease", extra={"error": str(err)})
