"""Leader election on a coordination.k8s.io Lease, and the fence that keeps a lost leader quiet.

The decision is ours, modelled on client-go's `leaderelection.tryAcquireOrRenew`, on the
Lease's read/create/replace calls (`lease.KubeLeaseApi`). The official client's
`LeaderElection` is not used: it decides takeover by comparing `time.time()` with the Lease's
`renewTime`, so a standby whose wall clock steps forward (NTP, a VM resumed) takes over from a
leader that is renewing in time, and both write (measured: both fences held for about 7 s with
the standby's clock stepped 60 s). Here, as in client-go, a standby records *when it observed*
the Lease's record change, on its own monotonic clock, and takes over only once
`lease_duration` has passed on that clock without a change. Wall time is only written into the
record, for humans.

The fence is what makes "never two writers" hold whatever goes wrong: a write may start only
while the last successful renewal *started* less than `renew_deadline` ago. A standby observes a
renewal only after it was sent and waits `lease_duration` (> renew_deadline) past that, so the
old leader's fence has lapsed before the new leader's opens, even if the old one's election
thread hangs or dies, its Lease reads are slow, or anyone's wall clock steps (a clean
hand-back: `LeaderElector.stop_and_release`).

Every Lease call has its own deadline (half the renew deadline), so a silent connection costs one
attempt, not the leadership; failures are logged once per run, not once per retry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubernetes import client

from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.fence import Clock, LeaderFence, LeaseTerm
from nodegate.reconciler.kit.lease import Election, KubeLeaseApi, LeaseApi, LeaseSettings

log = logging.getLogger("nodegate.leader")


class LeaderElector:
    """`on_leading(True/False)` is told every change of leadership (for a gauge)."""

    def __init__(
        self,
        api: client.ApiClient | LeaseApi,
        settings: LeaseSettings,
        on_leading: Callable[[bool], None] = lambda _leading: None,
        *,
        clock: Clock = time.monotonic,
        note: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._on_leading = on_leading
        self.fence = LeaderFence(
            settings.renew_deadline_seconds, clock, settings.lease_duration_seconds
        )
        if isinstance(api, client.ApiClient):
            api = KubeLeaseApi(api, max(1.0, settings.renew_deadline_seconds / 2))
        self._election = Election(api, settings, self.fence, clock, note=note)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.leading = False

    def holds_term(self, term: LeaseTerm) -> bool:
        """Whether the Lease, read now, is held under `term` (KubeError if it cannot be read)."""
        return self._election.current_term() == term

    @property
    def leader_note(self) -> str | None:
        """What the leader last wrote for the standbys (`note` of the leading replica)."""
        return self._election.leader_note

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

    def watch_fence(self, on_stopped: Callable[[], None]) -> None:
        """Called periodically by the main loop: a leader whose fence expired has lost, even
        if the election thread is stuck in a call."""
        if self.leading and not self.fence.holds() and not self._stop.is_set():
            self._lost(on_stopped)

    def _lost(self, on_stopped: Callable[[], None]) -> None:
        if not self.leading:
            return
        self.leading = False
        deposed = self.fence.deposed_term is not None
        self.fence.revoke()
        self._on_leading(False)
        log.error(
            "lost leadership: the API server refused a write, the Lease has passed to another "
            "replica"
            if deposed
            else "lost leadership: could not renew the Lease within the renew deadline",
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
