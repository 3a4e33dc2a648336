"""The one place that turns a reconcile's outcome into queue actions, counts and times it."""

from __future__ import annotations

import pytest

from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.worker import (
    Done,
    Outcome,
    Refused,
    RequeueAfter,
    Retry,
    Worker,
    error_kind,
)
from nodegate.reconciler.kit.workqueue import WorkQueue


class Recorded:
    def __init__(self) -> None:
        self.durations: list[float] = []
        self.errors: list[str] = []


def worker_returning(outcome: Outcome | Exception) -> tuple[Worker, WorkQueue, Recorded]:
    queue = WorkQueue()
    seen = Recorded()

    def reconcile(_key: str) -> Outcome:
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    worker = Worker(queue, reconcile, seen.durations.append, seen.errors.append, "node")
    return worker, queue, seen


def test_done_forgets_the_key_s_failures_and_does_not_requeue() -> None:
    worker, queue, _ = worker_returning(Done())
    queue.add_rate_limited("n1")
    assert queue.num_requeues("n1") == 1
    worker.process("n1")
    assert queue.num_requeues("n1") == 0


def test_requeue_after_looks_again_after_the_delay_and_forgets_failures() -> None:
    worker, queue, seen = worker_returning(RequeueAfter(42.0))
    queue.add_rate_limited("n1")
    worker.process("n1")
    due = queue.due_in("n1")
    assert due is not None and due <= 42.0
    assert queue.num_requeues("n1") == 0
    assert seen.errors == []


def test_retry_backs_off_per_key_and_counts_a_temporary_error() -> None:
    worker, queue, seen = worker_returning(Retry(TemporaryError("503"), "node write failed"))
    worker.process("n1")
    first = queue.due_in("n1")
    assert first is not None and 0.9 < first <= 2.0
    assert queue.num_requeues("n1") == 1
    assert seen.errors == ["temporary"]


def test_retry_waits_at_least_the_server_s_retry_after() -> None:
    worker, queue, _ = worker_returning(Retry(TemporaryError("429"), "throttled", at_least=7.0))
    worker.process("n1")
    due = queue.due_in("n1")
    assert due is not None and due > 6.5


def test_refused_is_counted_as_permanent_and_not_requeued() -> None:
    worker, queue, seen = worker_returning(Refused(PermanentError("403", 403), "refused"))
    queue.add_rate_limited("n1")
    worker.process("n1")
    assert seen.errors == ["permanent"]
    assert queue.num_requeues("n1") == 0


def test_an_exception_is_an_internal_error_retried_with_backoff() -> None:
    worker, queue, seen = worker_returning(RuntimeError("a bug"))
    outcome = worker.process("n1")
    assert isinstance(outcome, Retry)
    assert seen.errors == ["internal"]
    assert queue.due_in("n1") is not None


@pytest.mark.parametrize(
    "outcome",
    [
        Done(),
        RequeueAfter(1.0),
        Retry(ConflictError("409"), "conflict"),
        Refused(PermanentError("422", 422), "refused"),
        RuntimeError("a bug"),
    ],
    ids=["done", "requeue-after", "retry", "refused", "exception"],
)
def test_every_exit_is_timed(outcome: Outcome | Exception) -> None:
    worker, _, seen = worker_returning(outcome)
    worker.process("n1")
    assert len(seen.durations) == 1


def test_a_processed_key_is_marked_done_so_it_can_be_handed_out_again() -> None:
    worker, queue, _ = worker_returning(Done())
    queue.add("n1")
    assert queue.get() == "n1"
    queue.add("n1")  # changed while being processed
    worker.process("n1")
    assert queue.get() == "n1"


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (Retry(TemporaryError("503"), "x"), "temporary"),
        (Retry(ConflictError("409"), "x"), "temporary"),
        (Retry(PermanentError("403", 403), "x"), "permanent"),
        (Retry(ValueError("bug"), "x"), "internal"),
        (Refused(PermanentError("403", 403), "x"), "permanent"),
    ],
)
def test_error_kinds(outcome: Retry | Refused, kind: str) -> None:
    assert error_kind(outcome) == kind
