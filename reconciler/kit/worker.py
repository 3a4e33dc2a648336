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

from nodegate.reconciler.kit.errors import KubeError, PermanentError, TemporaryError
from nodegate.reconciler.kit.workqueue import WorkQueue

log = logging.getLogger("nodegate.worker")


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
    `at_least` seconds, a server's Retry-After)."""

    error: BaseException
    what: str
    at_least: float = 0.0


@dataclass(frozen=True)
class Refused:
    """Refused for good (403, 422...): the same attempt cannot succeed until something else
    changes, so the key is not requeued; the next change or resync brings it back."""

    error: BaseException
    what: str


Outcome = Done | RequeueAfter | Retry | Refused


def error_kind(outcome: Retry | Refused) -> str:
    """The `kind` an outcome's error is counted under: temporary, permanent or internal."""
    if isinstance(outcome, Refused) or isinstance(outcome.error, PermanentError):
        return "permanent"
    if isinstance(outcome.error, KubeError):
        return "temporary"
    return "internal"


def retry_after(err: KubeError) -> float:
    """A server's Retry-After (429, 503) as the least delay of the retry."""
    return (err.retry_after or 0.0) if isinstance(err, TemporaryError) else 0.0


class Worker:
    """Takes keys from the queue, reconciles each, and applies the outcome.

    `observe_seconds` gets every reconcile's duration, `count_error` the kind of every failed
    one; `key_field` names the key in logs ("node").
    """

    def __init__(
        self,
        queue: WorkQueue,
        reconcile: Callable[[str], Outcome],
        observe_seconds: Callable[[float], None],
        count_error: Callable[[str], None],
        key_field: str = "key",
    ) -> None:
        self._queue = queue
        self._reconcile = reconcile
        self._observe_seconds = observe_seconds
        self._count_error = count_error
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
            outcome = Retry(err, "reconcile failed")
        finally:
            self._observe_seconds(time.perf_counter() - started)
            self._apply(key, outcome)
            self._queue.done(key)
        return outcome

    def _apply(self, key: str, outcome: Outcome) -> None:
        queue = self._queue
        if isinstance(outcome, Done):
            queue.forget(key)
        elif isinstance(outcome, RequeueAfter):
            queue.forget(key)
            queue.add_after(key, outcome.seconds)
        elif isinstance(outcome, Retry):
            kind = error_kind(outcome)
            self._count_error(kind)
            delay = queue.add_rate_limited(key, outcome.at_least)
            log.log(
                logging.ERROR if kind == "internal" else logging.WARNING,
                outcome.what,
                extra=self._context(key, outcome.error, retry_in_seconds=round(delay, 2)),
                exc_info=outcome.error if kind == "internal" else None,
            )
        else:
            queue.forget(key)
            self._count_error("permanent")
            status = getattr(outcome.error, "status", None)
            log.error(outcome.what, extra=self._context(key, outcome.error, status=status))

    def _context(self, key: str, error: BaseException, **more: object) -> dict[str, object]:
        return {self._key_field: key, "error": f"{error}", **more}
