"""The disciplined clock: the API server's time, moved by no single reading of it."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from nodegate.reconciler.kit.errors import TemporaryError
from nodegate.reconciler.kit.server_clock import (
    CONFIRM_SECONDS,
    DATE_RESOLUTION,
    SLEW_RATE,
    AnchoredClock,
    ClockReport,
    NotAnchoredError,
    Outcome,
    Verdict,
)

SERVER = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_it_says_the_servers_time_advanced_by_the_monotonic_clock() -> None:
    ticks = [100.0]
    clock = AnchoredClock(lambda: SERVER, lambda: ticks[0])
    clock.anchor()

    ticks[0] += 42.5

    # The middle of the second the server's Date names: it has whole seconds.
    assert clock.now() == SERVER + DATE_RESOLUTION / 2 + timedelta(seconds=42.5)


def test_a_later_answer_of_the_server_moves_nothing_until_read_again() -> None:
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
        # A 4 s round trip: the server stamps its Date in the middle of it.
        ticks[0] += 2.0
        date = SERVER + timedelta(seconds=ticks[0] - 100)
        ticks[0] += 2.0
        return date

    clock = AnchoredClock(slow_server, lambda: ticks[0])
    clock.anchor()

    assert clock.now() == SERVER + timedelta(seconds=ticks[0] - 100) + DATE_RESOLUTION / 2


def test_it_refuses_to_guess_before_the_server_answered() -> None:
    clock = AnchoredClock(lambda: SERVER)

    assert not clock.anchored
    with pytest.raises(NotAnchoredError):
        clock.now()


class _Server:
    """An API server whose `Date` a test sets, read through an `AnchoredClock` on fake ticks."""

    def __init__(self) -> None:
        self.ticks = 0.0
        self.offset = timedelta()
        self.verdicts: list[Verdict] = []
        self.clock = AnchoredClock(self.date, lambda: self.ticks, self.verdicts.append)

    def date(self) -> datetime:
        return SERVER + timedelta(seconds=int(self.ticks)) + self.offset

    def read_every(self, seconds: float, until: float) -> None:
        while self.ticks + seconds <= until:
            self.ticks += seconds
            self.clock.anchor()

    def behind(self) -> float:
        """Seconds nodegate's clock is behind the server's true (un-stepped) time now."""
        true = SERVER + timedelta(seconds=self.ticks) + DATE_RESOLUTION / 2
        return (true - self.clock.now()).total_seconds()


def test_one_reading_of_a_step_moves_nothing() -> None:
    """An API server whose `Date` runs 15 minutes ahead for one reading: nodegate's time goes
    on by its own clock, and a `for: 10m` hold counts on undisturbed."""
    server = _Server()
    server.clock.anchor()
    server.read_every(30, until=120)
    server.offset = timedelta(minutes=15)
    server.read_every(30, until=150)
    server.offset = timedelta()
    server.read_every(30, until=600)

    assert abs(server.behind()) < 0.01
    assert [v.outcome for v in server.verdicts].count("disagrees") == 1


def test_a_step_shorter_than_the_confirmation_is_never_believed_however_often_read() -> None:
    server = _Server()
    server.clock.anchor()
    server.offset = timedelta(minutes=15)
    server.read_every(1, until=CONFIRM_SECONDS - 1)
    server.offset = timedelta()
    server.read_every(1, until=300)

    assert abs(server.behind()) < 0.01
    assert "believed" not in {v.outcome for v in server.verdicts}


def test_a_lasting_step_is_believed_then_followed_at_the_slew_rate_not_stepped() -> None:
    server = _Server()
    server.clock.anchor()
    server.offset = timedelta(minutes=15)
    server.read_every(10, until=CONFIRM_SECONDS + 10)
    believed_at = server.ticks
    behind_then = server.behind()

    server.read_every(10, until=believed_at + 100)

    assert [v.outcome for v in server.verdicts].count("believed") == 1
    assert abs(behind_then) < 0.01  # nothing moved before it was believed
    assert server.behind() == pytest.approx(-SLEW_RATE * 100, abs=0.01)


def test_a_lasting_step_back_is_followed_at_the_same_rate_and_time_never_goes_back() -> None:
    server = _Server()
    server.clock.anchor()
    server.offset = -timedelta(minutes=15)
    server.read_every(10, until=CONFIRM_SECONDS + 10)
    server.read_every(10, until=CONFIRM_SECONDS + 20)
    before = server.clock.now()
    server.ticks += 100

    assert (server.clock.now() - before).total_seconds() == pytest.approx(100 * (1 - SLEW_RATE))


def test_small_drift_is_followed_but_a_whole_second_dates_noise_is_not() -> None:
    server = _Server()
    server.clock.anchor()
    # The server's clock runs 0.1 % fast: after 3,000 s it is 3 s ahead.
    for _ in range(100):
        server.ticks += 30
        server.offset = timedelta(seconds=server.ticks / 1000)
        server.clock.anchor()

    assert -3 - 1.1 < server.behind() < -3 + 1.1
    assert {v.outcome for v in server.verdicts} == {"agrees"}


def test_the_first_anchor_is_the_median_of_three_readings() -> None:
    """One replica behind the load balancer 15 minutes ahead, answering one read in three."""
    answers = [SERVER + timedelta(minutes=15), SERVER, SERVER]
    clock = AnchoredClock(lambda: answers.pop(0), lambda: 0.0)
    clock.anchor()

    assert clock.now() == SERVER + DATE_RESOLUTION / 2


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


def test_time_told_is_never_taken_back_by_a_reading_with_a_long_round_trip() -> None:
    """A believed step is being followed when the server comes back; the reading that makes
    the return believed took 30 s to answer and turns the slew round. It is rebased where it is
    applied, not half a trip back: a moment told while it was on its way is not told again."""
    server = _Server()
    server.clock.anchor()
    server.offset = timedelta(seconds=100)
    server.read_every(10, until=CONFIRM_SECONDS + 110)  # believed, and followed a while
    server.offset = timedelta()
    back = server.ticks + 10
    server.read_every(10, until=back + CONFIRM_SECONDS - 10)
    told: list[datetime] = []
    honest = server.date

    def slow() -> datetime:
        server.ticks += 15
        answer = honest()
        server.ticks += 15
        told.append(server.clock.now())  # told just before the answer is applied
        return answer

    server.clock._server_time = slow
    server.clock.anchor()

    assert server.verdicts[-1].outcome == "believed"
    assert server.clock.now() >= told[0]


def _reported(outcomes: list[Outcome], caplog: pytest.LogCaptureFixture) -> list[str]:
    """The log lines a ClockReport writes for these verdicts, in order."""
    shown: list[float] = []
    counted: list[None] = []
    report = ClockReport(shown.append, lambda: counted.append(None))
    with caplog.at_level(logging.INFO, logger="nodegate.reconciler.kit.server_clock"):
        for outcome in outcomes:
            report(Verdict(outcome, 0.0 if outcome == "agrees" else 900.0))
    assert len(shown) == len(outcomes)
    assert len(counted) == sum(o != "agrees" for o in outcomes)
    return [r.getMessage().split(";")[0].split(":")[0] for r in caplog.records]


DISAGREES = "the API server's clock disagrees with nodegate's"
BELIEVED = "the API server's clock disagrees with nodegate's, lastingly"
AGREES = "the API server's clock agrees with nodegate's again"


def test_a_disagreement_is_said_when_it_begins_when_believed_and_when_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes: list[Outcome] = ["agrees", "disagrees", "disagrees", "believed", "agrees"]
    assert _reported(outcomes, caplog) == [DISAGREES, BELIEVED]


def test_a_disagreement_over_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    outcomes: list[Outcome] = ["disagrees", "disagrees", "agrees", "agrees"]
    assert _reported(outcomes, caplog) == [DISAGREES, AGREES]


def test_a_new_disagreement_right_after_one_believed_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes: list[Outcome] = ["disagrees", "believed", "disagrees", "agrees"]
    assert _reported(outcomes, caplog) == [DISAGREES, BELIEVED, DISAGREES, AGREES]
