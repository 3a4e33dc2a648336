"""Backoff grows with jitter up to its cap; the write rate limit passes a burst, then paces."""

from __future__ import annotations

from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.ratelimit import TokenBucket


def test_backoff_doubles_from_800ms_to_a_30s_cap_with_up_to_100_percent_jitter() -> None:
    backoff = Backoff()
    delays = [backoff.next_delay() for _ in range(10)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, 30, 30]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay < 2 * base


def test_backoff_starts_over_after_a_success() -> None:
    backoff = Backoff()
    for _ in range(5):
        backoff.next_delay()
    backoff.reset()
    assert 0.8 <= backoff.next_delay() < 1.6


def test_token_bucket_lets_a_burst_through_then_paces_at_qps() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert bucket.reserve() == 0.1
    assert round(bucket.reserve(), 6) == 0.2
    now[0] = 10.0  # idle time refills up to the burst, not beyond
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert bucket.reserve() > 0
