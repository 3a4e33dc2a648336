"""The fence that keeps a lost leader quiet on the client: a write may start only while the
last successful renewal started less than `renew_deadline` ago; it counts the writes in flight
so a clean hand-back can wait for them (`leader.py`), and it tells each write the term of
leadership it is made under, which the API server checks where the write lands
(core/decisions/fencing.py), since a process paused after this check sends its write whenever it
resumes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nodegate.reconciler.kit.errors import TemporaryError

Clock = Callable[[], float]
LeaseTerm = tuple[str, int]
"""One leadership of the Lease: its holderIdentity and leaseTransitions as last renewed."""


class LeaderFence:
    """Whether this process may write now, and which writes are in flight. Without leader
    election it always may."""

    def __init__(
        self,
        renew_deadline_seconds: float | None,
        clock: Clock = time.monotonic,
        lease_duration_seconds: float | None = None,
    ) -> None:
        """`lease_duration_seconds`: how long after a renewal a standby may take over, so how
        long a write started under it may take (`time_left`)."""
        self._deadline = renew_deadline_seconds
        self._grace = (
            0.0
            if lease_duration_seconds is None or renew_deadline_seconds is None
            else lease_duration_seconds - renew_deadline_seconds
        )
        self._clock = clock
        self._valid_until = float("inf") if renew_deadline_seconds is None else 0.0
        self._in_flight = 0
        self._changed = threading.Condition()
        self.term: LeaseTerm | None = None
        """The term the Lease was last renewed under (None without leader election)."""
        self.deposed_term: LeaseTerm | None = None
        """A term the API server said is over: no renewal raises the fence under it again."""

    def renewed(self, attempt_started: float, term: LeaseTerm | None = None) -> None:
        """A renewal that was sent at `attempt_started` (monotonic) succeeded, under `term`."""
        if self._deadline is None:
            return
        with self._changed:
            if term is not None and term == self.deposed_term:
                return
            if term is not None and term != self.term:
                # A new term starts from its own renewal, never from the last term's.
                self.term = term
                self._valid_until = attempt_started + self._deadline
            self._valid_until = max(self._valid_until, attempt_started + self._deadline)

    def revoke(self) -> None:
        """No write may start from now on (writes in flight go on: see `wait_quiet`)."""
        with self._changed:
            self._valid_until = 0.0

    def holds(self) -> bool:
        with self._changed:
            return self._clock() < self._valid_until

    def time_left(self) -> float | None:
        """How long a write starting now may take before a standby could lead (None: no
        Lease, no bound): the fence's validity, plus lease duration minus renew deadline."""
        if self._deadline is None:
            return None
        with self._changed:
            return self._valid_until + self._grace - self._clock()

    def deposed(self, term: LeaseTerm) -> None:
        """The API server refused a write of `term` because the Lease has moved on: no write
        starts again under it (the main loop then sees the fence down and exits). Nothing
        changes if the fence had already moved to another term."""
        with self._changed:
            if self.term == term:
                self.deposed_term = term
                self._valid_until = 0.0

    @contextmanager
    def writing(self) -> Iterator[LeaseTerm | None]:
        """Around one write: refused (TemporaryError) unless the fence holds, and counted as in
        flight until it returns, so a hand-back can wait for it. Yields the term the write is
        made under (None without leader election)."""
        with self._changed:
            if not self._clock() < self._valid_until:
                raise TemporaryError("not leading: the write fence does not hold")
            self._in_flight += 1
            term = self.term
        try:
            yield term
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def wait_quiet(self, timeout: float) -> bool:
        """Wait until no write is in flight; False if some still is after `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: self._in_flight == 0, timeout)
