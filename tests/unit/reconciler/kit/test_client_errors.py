"""How an API server's answer is classified: what the caller does next depends on the kind."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from nodegate.reconciler.kit.client import classify, json_body
from nodegate.reconciler.kit.errors import (
    PermanentError,
    TemporaryError,
    ThrottledError,
    TimedOutError,
)


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


def test_a_refusal_keeps_what_the_api_server_said_for_a_person_to_read() -> None:
    forbidden = answer(403)
    forbidden.body = '{"kind":"Status","message":"pods is forbidden: cannot list","code":403}'
    not_json = answer(403)
    not_json.body = "<html>proxy says no</html>"

    err, other = classify(forbidden), classify(not_json)

    assert isinstance(err, PermanentError) and isinstance(other, PermanentError)
    assert err.said == "pods is forbidden: cannot list"
    assert other.said == str(other)


class _BrokenOff:
    """An answer whose head arrived and whose body breaks off as it is read."""

    def __init__(self, error: Exception) -> None:
        self._error = error

    def read1(self, _size: int) -> bytes:
        raise self._error

    def close(self) -> None:
        pass


def test_a_body_reset_midway_is_temporary_not_a_bare_urllib3_error() -> None:
    reset = urllib3.exceptions.ProtocolError("Connection broken", ConnectionResetError(104))
    with pytest.raises(TemporaryError) as raised:
        json_body(_BrokenOff(reset), (1.0, 1.0))
    assert not isinstance(raised.value, TimedOutError)


def test_a_body_that_stalls_midway_is_a_timed_out_read() -> None:
    pool = urllib3.HTTPSConnectionPool("127.0.0.1")
    stalled = urllib3.exceptions.ReadTimeoutError(pool, "/api/v1/nodes", "Read timed out.")
    with pytest.raises(TimedOutError):
        json_body(_BrokenOff(stalled), (1.0, 1.0))
