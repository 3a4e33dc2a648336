"""The one place that turns a reconcile's outcome into queue actions, counts and times it."""

from __future__ import annotations

import logging
import threading

import pytest

from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.worker import (
    Done,
    Outcome,
    Refused,
    RequeueAfter,
    Retry,
    Worker,
)
from nodegate.reconciler.kit.workqueue import WorkQueue
from tests.unit.reconciler.kit.queue_state import due_in, num_requeues

LOG = logging.getLogger("nodegate.test")


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

    worker = Worker(
        queue, reconcile, seen.durations.append, seen.errors.append, LOG, key_field="node"
    )
    return worker, queue, seen


def test_done_forgets_the_key_s_failures_and_does_not_requeue() -> None:
    worker, queue, _ = worker_returning(Done())
    queue.add_rate_limited("n1")
    assert num_requeues(queue, "n1") == 1
    worker.process("n1")
    assert num_requeues(queue, "n1") == 0


def test_requeue_after_looks_again_after_the_delay_and_forgets_failures() -> None:
    worker, queue, seen = worker_returning(RequeueAfter(42.0))
    queue.add_rate_limited("n1")
    worker.process("n1")
    due = due_in(queue, "n1")
    assert due is not None and due <= 42.0
    assert num_requeues(queue, "n1") == 0
    assert seen.errors == []


def test_retry_backs_off_per_key_and_counts_a_temporary_error() -> None:
    worker, queue, seen = worker_returning(Retry(TemporaryError("503"), "node write failed"))
    worker.process("n1")
    first = due_in(queue, "n1")
    assert first is not None and 0.9 < first <= 2.0
    assert num_requeues(queue, "n1") == 1
    assert seen.errors == ["temporary"]


def test_retry_waits_at_least_the_server_s_retry_after() -> None:
    worker, queue, _ = worker_returning(Retry(TemporaryError("429"), "throttled", at_least=7.0))
    worker.process("n1")
    due = due_in(queue, "n1")
    assert due is not None and due > 6.5


def test_refused_is_counted_as_permanent_and_not_requeued() -> None:
    worker, queue, seen = worker_returning(Refused(PermanentError("403", 403), "refused"))
    queue.add_rate_limited("n1")
    worker.process("n1")
    assert seen.errors == ["permanent"]
    assert num_requeues(queue, "n1") == 0


def test_a_refused_key_comes_back_at_the_moment_its_plan_waits_for() -> None:
    worker, queue, _ = worker_returning(Refused(PermanentError("403", 403), "x", 120.0))
    worker.process("n1")
    due = due_in(queue, "n1")
    assert due is not None and 119 < due <= 120
    assert num_requeues(queue, "n1") == 0


def test_a_lost_race_is_retried_but_not_counted_as_an_error() -> None:
    worker, queue, seen = worker_returning(Retry(ConflictError("409"), "raced", kind=None))
    worker.process("n1")
    assert seen.errors == []
    assert num_requeues(queue, "n1") == 1


@pytest.mark.parametrize(
    "raised", [RuntimeError("a bug"), TemporaryError("a stray API error")], ids=["bug", "api"]
)
def test_an_exception_is_an_internal_error_retried_with_backoff(raised: Exception) -> None:
    worker, queue, seen = worker_returning(raised)
    outcome = worker.process("n1")
    assert isinstance(outcome, Retry)
    assert seen.errors == ["internal"]
    assert due_in(queue, "n1") is not None


def test_the_key_is_marked_done_even_when_counting_fails() -> None:
    queue = WorkQueue()

    def broken_histogram(_seconds: float) -> None:
        raise ValueError("a bug in a metric")

    worker = Worker(queue, lambda _key: Done(), broken_histogram, lambda _kind: None, LOG)
    queue.add("n1")
    assert queue.get() == "n1"
    queue.add("n1")  # changed while being processed
    with pytest.raises(ValueError):
        worker.process("n1")
    handed_out: list[str | None] = []
    getter = threading.Thread(target=lambda: handed_out.append(queue.get()), daemon=True)
    getter.start()
    getter.join(2)
    queue.shutdown()
    assert handed_out == ["n1"]


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
