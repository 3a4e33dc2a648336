"""Leader election on a coordination.k8s.io Lease, and the fence that keeps a lost leader quiet.

The official client's `LeaderElection` makes the decisions (`try_acquire_or_renew`: read the
Lease, take it if free or expired, renew it if ours) and is used for exactly that. Its loops are
replaced, because as shipped they (1) end the election thread on any error that is not an
`ApiException` (an API-server outage raises urllib3 errors), without calling
`onstopped_leading`, so the old leader keeps writing while a standby takes over; (2) cannot be
stopped, so after a clean release the renew loop takes the Lease straight back.

The fence is what makes "never two writers" hold whatever goes wrong: a write is allowed only
while the last successful renewal *started* less than `renew_deadline` ago. A standby can only
take over once `lease_duration` (> renew_deadline) has passed since it last saw the Lease
change, which is after that renewal was sent, so the old leader has stopped writing before the
new one starts, even if the election thread hangs or dies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.kube import call

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


class LeaderFence:
    """Whether this process may write now. Without leader election it always may."""

    def __init__(
        self, renew_deadline_seconds: float | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._deadline = renew_deadline_seconds
        self._clock = clock
        self._valid_until = float("inf") if renew_deadline_seconds is None else 0.0
        self._lock = threading.Lock()

    def renewed(self, attempt_started: float) -> None:
        """A renewal that was sent at `attempt_started` (monotonic) succeeded."""
        if self._deadline is None:
            return
        with self._lock:
            self._valid_until = max(self._valid_until, attempt_started + self._deadline)

    def revoke(self) -> None:
        with self._lock:
            self._valid_until = 0.0

    def holds(self) -> bool:
        with self._lock:
            return self._clock() < self._valid_until


class _InjectedLeaseLock(LeaseLock):
    """The client's LeaseLock on our ApiClient (it otherwise builds one from global config)."""

    def __init__(self, api_client: client.ApiClient, name: str, namespace: str, identity: str):
        super().__init__(name, namespace, identity)
        self.api_instance = client.CoordinationV1Api(api_client)


class _Election(leaderelection.LeaderElection):
    def __init__(
        self, config: electionconfig.Config, fence: LeaderFence, stop: threading.Event
    ) -> None:
        super().__init__(config)
        self._fence = fence
        self._stop = stop

    def attempt(self) -> bool:
        """One acquire-or-renew; any error at all is a failed attempt, never a dead thread."""
        started = time.monotonic()
        try:
            ok = bool(self.try_acquire_or_renew())
        except Exception as err:
            log.warning("lease attempt failed", extra={"error": f"{type(err).__name__}: {err}"})
            return False
        if ok:
            self._fence.renewed(started)
        return ok


class LeaderElector:
    """`on_leading(True/False)` is told every change of leadership (for a gauge)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        settings: LeaseSettings,
        on_leading: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self._settings = settings
        self._on_leading = on_leading
        self._lock = _InjectedLeaseLock(
            api_client, settings.lease_name, settings.lease_namespace, settings.identity
        )
        self.fence = LeaderFence(settings.renew_deadline_seconds)
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
        settings = self._settings
        config = electionconfig.Config(
            self._lock,
            lease_duration=settings.lease_duration_seconds,
            renew_deadline=settings.renew_deadline_seconds,
            retry_period=settings.retry_period_seconds,
            onstarted_leading=on_started,
            onstopped_leading=on_stopped,
        )
        election = _Election(config, self.fence, self._stop)
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
            if election.attempt() or self.fence.holds():
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

    def stop_and_release(self) -> None:
        """Stop competing, then hand the Lease back if we hold it (clean shutdown), so a standby
        takes over within one retry period. The loop is stopped first, so it cannot take the
        released Lease back; a renewal still in flight carries the old resourceVersion and is
        refused with 409 once the release is written."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._settings.retry_period_seconds + 10)
        was_leading = self.leading and self.fence.holds()
        self.leading = False
        self.fence.revoke()
        self._on_leading(False)
        if was_leading:
            self._release()

    def _release(self) -> None:
        name, namespace = self._settings.lease_name, self._settings.lease_namespace
        try:
            lease = call(self._api.read_namespaced_lease, name, namespace, _request_timeout=5)
            if lease.spec is None or lease.spec.holder_identity != self._settings.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            call(self._api.replace_namespaced_lease, name, namespace, lease, _request_timeout=5)
            log.info("released leadership", extra={"identity": self._settings.identity})
        except KubeError as err:
            # Not fatal: the standby takes over once the lease expires.
            log.warning("could not release the lease", extra={"error": str(err)})
