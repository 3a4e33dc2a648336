"""What a reconcile returns, and the one place that turns it into queue actions.

controller-runtime's `reconcileHandler` is the model: a reconcile says what happened (done; look
again after N seconds; failed, retry with backoff; refused for good) and this loop alone decides
what the queue does about it, counts the error and observes the duration in a `finally`, so every
exit of every reconcile is counted the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from nodegate.reconciler.kit.errors import KubeError, ThrottledError
from nodegate.reconciler.kit.workqueue import WorkQueue

ErrorKind = Literal["temporary", "throttled", "internal"]


@dataclass(frozen=True)
class Done:
    """Nothing more to do for this key until something happens to it."""


@dataclass(frozen=True)
class RequeueAfter:
    """Done for now; look again after `seconds` (a gate's timeout, a cache still syncing)."""

    seconds: float


@dataclass(frozen=True)
class Retry:
    """Failed for a reason that may pass: retry after the key's backoff (not before
    `at_least` seconds, a server's Retry-After). `kind` is what the failure counts as in the
    error metric; None for a lost race that is no error (a 409 on a record)."""

    error: BaseException
    what: str
    at_least: float = 0.0
    kind: ErrorKind | None = "temporary"


@dataclass(frozen=True)
class Refused:
    """Refused for good (403, 422...): the same attempt cannot succeed until something else
    changes, so the key is not retried; the next change or resync brings it back, and so does
    `recheck_after`, a moment the key's plan waits for anyway (a gate's timeout)."""

    error: BaseException
    what: str
    recheck_after: float | None = None


Outcome = Done | RequeueAfter | Retry | Refused


def retry(err: KubeError, what: str) -> Retry:
    """A failed call retried with the key's backoff, no sooner than the server asked (its
    Retry-After, on a 429 or 503); a 429 (the API server's flow control at work) counts as
    `throttled`, not as a failure."""
    kind: ErrorKind = "throttled" if isinstance(err, ThrottledError) else "temporary"
    return Retry(err, what, getattr(err, "retry_after", None) or 0.0, kind)


class Worker:
    """Takes keys from the queue, reconciles each, and applies the outcome.

    `observe_seconds` gets every reconcile's duration, `count_error` the kind of every failed
    one; `key_field` names the key in the logs, written to the controller's `log`.
    """

    def __init__(
        self,
        queue: WorkQueue,
        reconcile: Callable[[str], Outcome],
        observe_seconds: Callable[[float], None],
        count_error: Callable[[str], None],
        log: logging.Logger,
        key_field: str = "key",
    ) -> None:
        self._queue = queue
        self._reconcile = reconcile
        self._observe_seconds = observe_seconds
        self._count_error = count_error
        self._log = log
        self._key_field = key_field

    def run(self, _stop: threading.Event) -> None:
        """Work until the queue shuts down."""
        while (key := self._queue.get()) is not None:
            self.process(key)

    def process(self, key: str) -> Outcome:
        """Reconcile one key taken from the queue, apply the outcome, mark the key done."""
        started = time.perf_counter()
        outcome: Outcome = Done()
        try:
            outcome = self._reconcile(key)
        except Exception as err:
            # A bug or an unexpected answer for one key must not stop the others.
            outcome = Retry(err, "reconcile failed", kind="internal")
        finally:
            try:
                self._observe_seconds(time.perf_counter() - started)
                self._apply(key, outcome)
            finally:
                self._queue.done(key)  # else the key is never handed out again
        return outcome

    def _apply(self, key: str, outcome: Outcome) -> None:
        queue = self._queue
        if isinstance(outcome, Done):
            queue.forget(key)
        elif isinstance(outcome, RequeueAfter):
            queue.forget(key)
            queue.add_after(key, outcome.seconds)
        elif isinstance(outcome, Retry):
            if outcome.kind is not None:
                self._count_error(outcome.kind)
            delay = queue.add_rate_limited(key, outcome.at_least)
            level = {"internal": logging.ERROR, "temporary": logging.WARNING}
            self._log.log(
                level.get(outcome.kind or "", logging.INFO),
                outcome.what,
                extra=self._context(key, outcome.error, retry_in_seconds=round(delay, 2)),
                exc_info=outcome.error if outcome.kind == "internal" else None,
            )
        else:
            queue.forget(key)
            if outcome.recheck_after is not None:
                queue.add_after(key, outcome.recheck_after)
            self._count_error("permanent")
            status = getattr(outcome.error, "status", None)
            self._log.error(outcome.what, extra=self._context(key, outcome.error, status=status))

    def _context(self, key: str, error: BaseException, **more: object) -> dict[str, object]:
        return {self._key_field: key, "error": f"{error}", **more}
