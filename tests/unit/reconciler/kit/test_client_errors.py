"""How an API server's answer is classified: what the caller does next depends on the kind."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from nodegate.reconciler.kit.client import classify
from nodegate.reconciler.kit.errors import PermanentError, TemporaryError, ThrottledError


def answer(status: int, retry_after: str | None = None) -> ApiException:
    err = ApiException(status=status, reason="answer")
    err.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return err


def test_a_429_is_throttling_with_the_server_s_retry_after() -> None:
    err = classify(answer(429, "3"))
    assert isinstance(err, ThrottledError)
    assert err.retry_after == 3.0


def test_a_503_is_temporary_but_not_throttling() -> None:
    err = classify(answer(503, "1"))
    assert isinstance(err, TemporaryError) and not isinstance(err, ThrottledError)
    assert err.retry_after == 1.0


def test_an_unreadable_retry_after_is_no_delay_rather_than_an_error() -> None:
    err = classify(answer(429, "Wed, 21 Oct 2026 07:28:00 GMT"))
    assert isinstance(err, ThrottledError) and err.retry_after is None


def test_a_422_is_permanent() -> None:
    assert isinstance(classify(answer(422)), PermanentError)
