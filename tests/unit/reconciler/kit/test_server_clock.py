"""The anchored clock: the API server's time once, then this process's monotonic clock."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from nodegate.reconciler.kit.errors import TemporaryError
from nodegate.reconciler.kit.server_clock import DATE_RESOLUTION, AnchoredClock, NotAnchoredError

SERVER = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_it_says_the_servers_time_advanced_by_the_monotonic_clock() -> None:
    ticks = [100.0]
    clock = AnchoredClock(lambda: SERVER, lambda: ticks[0])
    clock.anchor()

    ticks[0] += 42.5

    # The middle of the second the server's Date names: it has whole seconds.
    assert clock.now() == SERVER + DATE_RESOLUTION / 2 + timedelta(seconds=42.5)


def test_a_later_answer_of_the_server_moves_nothing_until_anchored_again() -> None:
    """A step of any clock after the anchor (here the server's own) leaves `now` counting on."""
    server = [SERVER]
    ticks = [0.0]
    clock = AnchoredClock(lambda: server[0], lambda: ticks[0])
    clock.anchor()
    server[0] = SERVER - timedelta(hours=1)
    ticks[0] = 10.0

    assert clock.now() == SERVER + DATE_RESOLUTION / 2 + timedelta(seconds=10)


def test_the_anchor_is_read_at_the_middle_of_the_round_trip() -> None:
    ticks = [100.0]

    def slow_server() -> datetime:
        ticks[0] += 4.0  # a 4 s round trip: the Date was stamped somewhere inside it
        return SERVER

    clock = AnchoredClock(slow_server, lambda: ticks[0])
    clock.anchor()

    assert clock.now() == SERVER + DATE_RESOLUTION / 2 + timedelta(seconds=2)


def test_it_refuses_to_guess_before_the_server_answered() -> None:
    clock = AnchoredClock(lambda: SERVER)

    assert not clock.anchored
    with pytest.raises(NotAnchoredError):
        clock.now()


def test_reading_again_follows_the_server_forward_after_a_suspend() -> None:
    """The monotonic clock stood still for 60 s (a suspended VM); the next reading catches up."""
    server = [SERVER]
    ticks = [0.0]
    clock = AnchoredClock(lambda: server[0], lambda: ticks[0])
    clock.anchor()
    server[0] = SERVER + timedelta(seconds=70)
    ticks[0] = 10.0
    clock.anchor()

    assert clock.now() == SERVER + timedelta(seconds=70) + DATE_RESOLUTION / 2


def test_reading_again_never_steps_back() -> None:
    server = [SERVER]
    ticks = [0.0]
    clock = AnchoredClock(lambda: server[0], lambda: ticks[0])
    clock.anchor()
    ticks[0] = 10.0
    before = clock.now()
    server[0] = SERVER + timedelta(seconds=3)  # another API server, its clock 7 s behind
    clock.anchor()

    assert clock.now() == before


def test_following_reads_the_time_again_until_stopped_and_survives_an_unreachable_server() -> None:
    answers: list[datetime | TemporaryError] = [TemporaryError("away"), SERVER, SERVER]
    asked: list[int] = []

    def server_time() -> datetime:
        asked.append(1)
        answer = answers[min(len(asked), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = AnchoredClock(server_time)
    stop = threading.Event()
    follower = threading.Thread(target=clock.follow, args=(stop, 0.01))
    follower.start()
    try:
        deadline = time.monotonic() + 5
        while len(asked) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        follower.join(5)

    assert len(asked) >= 3
    assert clock.anchored
    assert not follower.is_alive()
