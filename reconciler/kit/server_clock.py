"""The API server's clock, disciplined: no single reading of it moves nodegate's time.

Why not the wall clock: the eviction budget counts windows across processes (a restart, a new
leader), and a host's clock steps (NTP, a paused VM) and differs from another host's. Anchored on
the API server's `Date`, every replica reads the same time to within a second.

Why not every reading as it comes: a `Date` is one source's word. A bad NTP source on the API
server's host, a resumed VM, or one HA replica behind the load balancer running ahead would, if
adopted, move every decision at once (a `for: 10m` hold firing after seconds, a gate timeout
lifting, a budget window ending early). So, as NTP disciplines a host clock, time between
readings moves by this process's monotonic clock alone; a reading that disagrees with it by
more than `TOLERANCE` is believed only once every reading for `CONFIRM_SECONDS` (at least
`CONFIRM_READINGS` of them) said the same, and the clock then slews towards it at `SLEW_RATE`,
never steps, in either direction. Within any span of this process, nodegate's time moves by the
monotonic clock's span times 1 ± `SLEW_RATE`: that is the bound every duration it measures has.

The discipline (`Discipline`, `first_reading`, `read`) is pure over plain readings, so its
property tests run over generated histories (jumps, noise, skewed replicas) without threads; the
`AnchoredClock` around it reads, locks and reports.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from nodegate.reconciler.kit.errors import KubeError

log = logging.getLogger(__name__)

DATE_RESOLUTION = timedelta(seconds=1)
"""`Date` has whole seconds: the server's time was somewhere in the second it names."""
TOLERANCE = 2.0
"""Seconds a reading may disagree with the clock, beyond its own uncertainty (half the `Date`'s
resolution and half the round trip), and still be taken as agreeing: readings of a healthy
server stay within a second of each other."""
CONFIRM_SECONDS = 60.0
"""How long every reading must say the same disagreement before it is believed: longer than a
stepped `Date` lasts while NTP corrects it or a replica is taken out of rotation."""
CONFIRM_READINGS = 3
"""And at least this many readings: a believed disagreement is never one sample's."""
SLEW_RATE = 0.01
"""Seconds the clock may move away from the monotonic clock per second, once a disagreement is
believed: a `for: 10m` hold ends at most 6 s early or late; a lasting 1-minute step of the
server's clock is followed in 100 minutes (and alerted on while it is)."""
FIRST_READINGS = 3
"""Readings at the first anchor, of which the median is taken (a lone replica whose `Date` is
off, behind a load balancer, is outvoted)."""


def boot_clock() -> float:
    """Seconds on a clock that never steps and, unlike `time.monotonic` on Linux, counts a
    suspend of the host (CLOCK_BOOTTIME): a resumed VM's clock has not stood still."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except AttributeError:  # pragma: no cover - not Linux: the monotonic clock is the best there
        return time.monotonic()


@dataclass(frozen=True)
class Reading:
    """One answer of the API server: its time, when (monotonic) and how sure."""

    server: datetime
    """The middle of the second its `Date` names."""
    at: float
    """This process's monotonic clock at the middle of the round trip."""
    uncertainty: float
    """Seconds the server's time at `at` may be from `server`: half a second and half the trip."""


def reading_of(date: datetime, before: float, after: float) -> Reading:
    return Reading(
        date + DATE_RESOLUTION / 2,
        (before + after) / 2,
        DATE_RESOLUTION.total_seconds() / 2 + (after - before) / 2,
    )


Outcome = Literal["agrees", "disagrees", "believed"]


@dataclass(frozen=True)
class Verdict:
    """What one reading did: agreed with the clock (within tolerance of where it is heading),
    disagreed (not believed yet), or made a disagreement believed (the clock now slews)."""

    outcome: Outcome
    disagreement: float
    """Seconds the reading is ahead (+) or behind (-) of the clock at the moment it was read."""


@dataclass(frozen=True)
class Discipline:
    """The clock: `origin` at monotonic `origin_at`, advanced by the monotonic clock, plus a
    correction that slews from `offset` (as of `offset_at`) towards `target` at `SLEW_RATE`."""

    origin: datetime
    origin_at: float
    offset: float = 0.0
    offset_at: float = 0.0
    target: float = 0.0
    doubted: tuple[float, ...] = ()
    """The corrections implied by the disagreeing readings since the disagreement began."""
    doubted_since: float = 0.0
    """When (monotonic) its first reading was made."""

    def correction(self, at: float) -> float:
        most = SLEW_RATE * max(0.0, at - self.offset_at)
        return self.offset + max(-most, min(most, self.target - self.offset))

    def now(self, at: float) -> datetime:
        return self.origin + timedelta(seconds=at - self.origin_at + self.correction(at))

    def implied(self, reading: Reading) -> float:
        """The correction that would make the clock say what the reading says."""
        return (reading.server - self.origin).total_seconds() - (reading.at - self.origin_at)


def first_reading(readings: Sequence[Reading]) -> Discipline:
    """The clock from its first readings: the median one (by what each says of the server's
    time at the first one's moment), so one replica's odd `Date` among three is outvoted."""
    first = readings[0]
    base = Discipline(first.server, first.at, offset_at=first.at)
    median = statistics.median_low(base.implied(r) for r in readings)
    return replace(base, origin=first.server + timedelta(seconds=median))


def read(
    clock: Discipline, reading: Reading, applied_at: float | None = None
) -> tuple[Discipline, Verdict]:
    """The clock after one more reading, applied at monotonic `applied_at` (default: the
    reading's own moment), and what the reading did to it. The slew is rebased where it is
    applied, never at the reading's moment, which is already past (half a round trip): a
    change of direction there would take back time already told."""
    rebased_at = max(reading.at if applied_at is None else applied_at, clock.offset_at)
    now = clock.correction(rebased_at)
    clock = replace(clock, offset=now, offset_at=rebased_at)
    implied = clock.implied(reading)
    allowed = TOLERANCE + reading.uncertainty
    if abs(implied - clock.target) <= allowed:
        # It agrees with where the clock is heading: follow it only beyond what the reading
        # itself cannot tell (drift is followed; a whole-second `Date`'s noise is not).
        target = min(
            max(clock.target, implied - reading.uncertainty), implied + reading.uncertainty
        )
        return replace(clock, target=target, doubted=()), Verdict("agrees", implied - now)
    if clock.doubted and abs(implied - statistics.median(clock.doubted)) <= allowed:
        doubted, since = (*clock.doubted, implied), clock.doubted_since
    else:
        doubted, since = (implied,), reading.at
    if len(doubted) >= CONFIRM_READINGS and reading.at - since >= CONFIRM_SECONDS:
        believed = statistics.median(doubted)
        return replace(clock, target=believed, doubted=()), Verdict("believed", implied - now)
    return replace(clock, doubted=doubted, doubted_since=since), Verdict("disagrees", implied - now)


class NotAnchoredError(RuntimeError):
    """The API server's time has not been read yet."""


class AnchoredClock:
    """The disciplined clock of one process: reads the API server's time, tells it, reports
    each reading's verdict to `on_reading` (the log, the metrics)."""

    def __init__(
        self,
        server_time: Callable[[], datetime],
        monotonic: Callable[[], float] = boot_clock,
        on_reading: Callable[[Verdict], None] = lambda _verdict: None,
    ) -> None:
        self._server_time = server_time
        self._monotonic = monotonic
        self._on_reading = on_reading
        self._lock = threading.Lock()
        self._clock: Discipline | None = None

    def _read_once(self) -> Reading:
        before = self._monotonic()
        date = self._server_time()
        return reading_of(date, before, self._monotonic())

    def anchor(self) -> None:
        """Read the API server's time (KubeError when it cannot be reached): the first time a
        few readings, whose median starts the clock; after that one, which moves the clock only
        as `read` allows."""
        if self._clock is None:
            readings = [self._read_once()]
            with contextlib.suppress(KubeError):
                readings += [self._read_once() for _ in range(FIRST_READINGS - 1)]
            with self._lock:
                if self._clock is None:
                    self._clock = first_reading(readings)
                    return
        reading = self._read_once()
        with self._lock:
            assert self._clock is not None
            self._clock, verdict = read(self._clock, reading, self._monotonic())
            # Under the lock: two readers (the follower, the breaker's load) report in order.
            self._on_reading(verdict)

    @property
    def anchored(self) -> bool:
        with self._lock:
            return self._clock is not None

    def now(self) -> datetime:
        """The API server's time now; NotAnchoredError before `anchor` succeeded."""
        with self._lock:
            clock, at = self._clock, self._monotonic()
        if clock is None:
            raise NotAnchoredError("the API server's time has not been read yet")
        return clock.now(at)

    def correction(self) -> float:
        """Seconds nodegate's clock has been moved, by believed disagreements, off what its
        first reading and the monotonic clock alone would say (0 until anchored)."""
        with self._lock:
            clock = self._clock
        return 0.0 if clock is None else clock.correction(self._monotonic())

    def follow(self, stop: threading.Event, every_seconds: float = 300.0) -> None:
        """Read the server's time now and every `every_seconds` until `stop` (for a part of
        the process that must never wait for it on its own path: the webhook's reviews)."""
        failing = False
        while True:
            try:
                self.anchor()
                failing = False
            # Unreachable, or no readable Date: read again next time; said once a streak.
            except KubeError as err:
                if not failing:
                    log.warning("the API server's time not read", extra={"error": str(err)})
                failing = True
            if stop.wait(every_seconds if self.anchored else min(every_seconds, 5.0)):
                return

    def now_or_host(self) -> datetime:
        """The API server's time once anchored; before that (the API server not reached yet,
        so nothing is written either) this host's."""
        return self.now() if self.anchored else datetime.now(UTC)


class ClockReport:
    """Says a disagreement once when it begins, once when it is believed and once when it is
    over (a log line each); shows every reading's disagreement and counts each disagreeing one
    (the metrics behind the `NodegateServerClockDisagrees` alert)."""

    def __init__(self, show: Callable[[float], None], count: Callable[[], None]) -> None:
        self._show = show
        self._count = count
        self._last: Outcome = "agrees"

    def __call__(self, verdict: Verdict) -> None:
        self._show(verdict.disagreement)
        last, self._last = self._last, verdict.outcome
        extra = {"disagreement_seconds": round(verdict.disagreement, 3)}
        if verdict.outcome != "agrees":
            self._count()
        if verdict.outcome == "disagrees" and last != "disagrees":
            log.warning(
                "the API server's clock disagrees with nodegate's; not followed unless it lasts",
                extra={**extra, "confirm_seconds": CONFIRM_SECONDS},
            )
        elif verdict.outcome == "believed":
            log.warning(
                "the API server's clock disagrees with nodegate's, lastingly: followed slowly",
                extra={**extra, "slew_rate": SLEW_RATE},
            )
        elif verdict.outcome == "agrees" and last == "disagrees":
            log.info("the API server's clock agrees with nodegate's again", extra=extra)
