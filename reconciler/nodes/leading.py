"""What the node controller does besides reconciling nodes: it reads back what the last leader
left (`ReadBacks`, each in the one retry loop `kit.backoff.read_back`), and runs the leader's
periodic chores, one runnable (`Chores`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nodegate.core.objects.status_record import RECORD_SOURCE, StatusRecordError
from nodegate.core.rules.merge import parts_of
from nodegate.reconciler.kit.backoff import read_back
from nodegate.reconciler.kit.errors import KubeError, PermanentError
from nodegate.reconciler.kit.server_clock import AnchoredClock
from nodegate.reconciler.kit.workqueue import WorkQueue
from nodegate.reconciler.nodes.decide.eviction_breaker import EvictionBreaker
from nodegate.reconciler.nodes.metrics import ControllerMetrics
from nodegate.reconciler.nodes.records.sightings_store import SightingsStore
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.rules.rules_in_force import RulesInForce
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.nodes.rules.status_publisher import StatusPublisher

log = logging.getLogger("nodegate.controller")

RESYNC_POLL_SECONDS = 0.02
"""How often the chores look whether a resync under way is done (its timing's resolution)."""


@dataclass(frozen=True)
class ReadBacks:
    """What the last leader left, and where each goes."""

    history: TaintHistory
    breaker: EvictionBreaker
    clock: AnchoredClock
    sightings: SightingsStore
    status: StatusPublisher
    in_force: RulesInForce
    errors: Callable[[str], None]
    """Count an error of this kind."""
    recovered: threading.Event

    def run(self, stop: threading.Event) -> None:
        """Before anything is planned, in this order, each retried for
        `kit.backoff.READ_BACK_SECONDS` and then gone on without: the taint history (without it
        the planner removes only what the current rules own, which is safe; every write of the
        history merges what is stored, and one that fails is tried again at each resync), the
        eviction ledger (until it is read every evicting taint waits), the API server's time
        for as long as it takes (every first sight, record and `timeAdded` is dated on it; one
        dated on this host's clock would move when the clock jumps to the server's), the
        sightings and departures (without them holds under way and re-gates start again,
        later, never earlier), then the rules in force (`rules`)."""
        read_back(stop, self.history.load, self._history_not_read, stops=(PermanentError,))
        read_back(
            stop,
            self.breaker.load,
            lambda _err: log.error("eviction ledger not read; evicting taints wait until it is"),
        )
        said: list[bool] = []

        def time_not_read(err: Exception | None) -> None:
            if not said:  # said once
                said.append(True)
                log.error(
                    "the API server's time not read; nothing is planned until it is",
                    extra={"error": str(err)},
                )

        def read_time() -> None:
            if not self.clock.anchored:
                self.clock.anchor()

        read_back(
            stop,
            read_time,
            time_not_read,
            retried=(KubeError,),
            forever=True,
            on_retry=time_not_read,
        )
        read_back(stop, self.sightings.load, self._sightings_not_read)
        self.rules(stop)

    def rules(self, stop: threading.Event) -> None:
        """The rules in force, from the status record, before the node cache syncs, so that no
        update is judged against nothing: a restart or a failover while an update is held
        leaves the rules that were in force in force. A record that cannot say is reported and
        the reconciler goes on as on a first start."""
        try:
            read_back(
                stop,
                self._recover_rules,
                self._not_recovered,
                # Whatever a hand-edited record does to the parsers: reported, never fatal.
                stops=(Exception,),
                on_retry=self._not_read_yet,
            )
        finally:
            self.recovered.set()

    def _not_read_yet(self, err: Exception | None) -> None:
        log.warning("status record not read yet", extra={"error": str(err)})

    def _history_not_read(self, err: Exception | None) -> None:
        if isinstance(err, PermanentError):
            log.error("taint history cannot be read", extra={"error": str(err)})
            self.errors("permanent")
        else:
            log.error("taint history not loaded; going on without it", extra={"error": str(err)})

    def _sightings_not_read(self, err: Exception | None) -> None:
        self.errors("sightings")
        log.error("sightings record not read; holds start again", extra={"error": str(err)})

    def _recover_rules(self) -> None:
        recorded = self.status.recover()
        if recorded is not None and recorded.rules is not None:
            digest = recorded.status.digest
            assert digest is not None  # rules_of_record checked it
            parts = parts_of(recorded.text, RECORD_SOURCE)
            update = RulesUpdate(
                recorded.rules, digest, recorded.status.source, text=recorded.text, parts=parts
            )
            self.in_force.restore(update, recorded.status.generation)

    def _not_recovered(self, err: Exception | None) -> None:
        if not isinstance(err, KubeError | StatusRecordError):
            log.error("status record could not be read", exc_info=err)
        log.error(
            "rules in force cannot be recovered from the status record; "
            "the rules source is judged as on a first start",
            extra={"error": f"{type(err).__name__}: {err}"},
        )
        self.errors("status")


class Resync:
    """The periodic resync: every node queued in the resync lane, unless the last pass is still
    under way (re-queueing every node in the middle of a storm gains nothing). A pass is done
    once every node it queued was reconciled; nodes that changed meanwhile went ahead in the
    event lane and are not waited for."""

    def __init__(
        self,
        queue: WorkQueue,
        metrics: ControllerMetrics,
        ready: Callable[[], bool],
        queue_all: Callable[[], None],
    ) -> None:
        self._queue = queue
        self._metrics = metrics
        self._ready = ready
        self._queue_all = queue_all
        self._started: float | None = None
        """When the pass under way queued every node (monotonic), or None."""

    def start(self) -> None:
        if not self._ready():
            return
        if self._started is not None:
            log.info("resync skipped: the last one is still under way")
            return
        self._started = time.monotonic()
        self._queue_all()

    def finish(self) -> None:
        """Time the pass under way, once it is done."""
        started = self._started
        if started is None or self._queue.resync_pending():
            return
        self._started = None
        self._metrics.resync_seconds.set(time.monotonic() - started)
        self._metrics.resyncs.inc()


@dataclass(frozen=True)
class Chores:
    """The leader's periodic chores, one runnable: `often` every few milliseconds, `periodic`
    once every `period` seconds."""

    period: float
    often: list[Callable[[], object]]
    periodic: Sequence[Callable[[], object]]

    def run(self, stop: threading.Event) -> None:
        next_period = time.monotonic() + self.period
        while not stop.wait(min(RESYNC_POLL_SECONDS, self.period)):
            for chore in self.often:
                chore()
            if time.monotonic() < next_period:
                continue
            next_period = time.monotonic() + self.period
            for chore in self.periodic:
                chore()
