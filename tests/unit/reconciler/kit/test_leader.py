"""Leader election decided on each replica's own monotonic clock, and the fence that covers
writes in flight at hand-back. A fake Lease API and injected clocks; the e2e tier runs the same
against a real API server with a stepped wall clock and slowed Lease reads."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from nodegate.reconciler.kit.errors import ConflictError, TemporaryError
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.kit.leader import LeaderElector
from nodegate.reconciler.kit.lease import LEADER_NOTE, Election


@dataclass(frozen=True)
class Settings:
    identity: str
    lease_name: str = "lease"
    lease_namespace: str = "default"
    lease_duration_seconds: int = 15
    renew_deadline_seconds: int = 10
    retry_period_seconds: int = 2


class FakeLeaseApi:
    def __init__(self) -> None:
        self.lease: RawObject | None = None
        self.replaced: list[RawObject] = []
        self._rv = itertools.count(1)
        self._lock = threading.Lock()

    def read_lease(self, namespace: str, name: str) -> RawObject | None:
        with self._lock:
            return copy.deepcopy(self.lease)

    def create_lease(self, namespace: str, body: RawObject) -> RawObject:
        with self._lock:
            if self.lease is not None:
                raise ConflictError("exists")
            self.lease = {**copy.deepcopy(body), "metadata": {"resourceVersion": "0"}}
            return copy.deepcopy(self.lease)

    def replace_lease(self, namespace: str, name: str, body: RawObject) -> RawObject:
        with self._lock:
            assert self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise ConflictError("changed")
            self.lease = copy.deepcopy(body)
            self.lease["metadata"] = {**body["metadata"], "resourceVersion": str(next(self._rv))}
            self.replaced.append(copy.deepcopy(self.lease))
            return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity") or "")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def election(
    api: FakeLeaseApi,
    me: str,
    clock: Clock,
    wall_offset: float = 0.0,
    note: Callable[[], str | None] = lambda: None,
) -> Election:
    start = datetime(2026, 11, 24, tzinfo=UTC)
    settings = Settings(identity=me)
    return Election(
        api,
        settings,
        LeaderFence(settings.renew_deadline_seconds, clock),
        clock,
        wall=lambda: start + timedelta(seconds=clock.now + wall_offset),
        note=note,
    )


def test_a_standby_whose_wall_clock_steps_forward_never_takes_over_a_renewing_leader() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = election(api, "leader", clock)
    assert leader.attempt()
    standby = election(api, "standby", clock, wall_offset=60)  # its wall clock 60 s ahead
    assert not standby.attempt()
    for _ in range(30):  # a minute of renewals every 2 s
        clock.now += 2
        assert leader.attempt()
        assert not standby.attempt()
    assert api.holder == "leader"


def test_a_standby_takes_over_a_lease_duration_after_it_last_saw_the_record_change() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = election(api, "leader", clock)
    standby = election(api, "standby", clock)
    assert leader.attempt()
    clock.now += 5
    assert not standby.attempt()  # first sight of the record: the wait starts now
    clock.now += 14.9
    assert not standby.attempt()
    clock.now += 0.1
    assert standby.attempt()
    assert api.holder == "standby"


def test_a_standby_does_not_trust_an_old_renew_time_in_the_record() -> None:
    """The record's renewTime is an hour old by its writer's clock: only our own observation
    counts, so a fresh standby still waits a whole lease duration."""
    api, clock = FakeLeaseApi(), Clock()
    old = election(api, "leader", clock, wall_offset=-3600)
    assert old.attempt()
    standby = election(api, "standby", clock)
    assert not standby.attempt()
    clock.now += 14
    assert not standby.attempt()


def test_the_leaders_note_reaches_the_standby_and_outlives_a_takeover_until_replaced() -> None:
    api, clock = FakeLeaseApi(), Clock()
    note: list[str | None] = ["digest-1"]
    leader = election(api, "leader", clock, note=lambda: note[0])
    standby = election(api, "standby", clock, note=lambda: None)
    assert leader.attempt()  # creates the Lease
    clock.now += 2
    assert leader.attempt()  # renews it, with its note
    assert not standby.attempt()
    assert standby.leader_note == "digest-1"
    clock.now += 15
    assert standby.attempt()  # takes over, with nothing in force yet: the note stands
    assert standby.leader_note == "digest-1"
    assert api.lease is not None
    assert LEADER_NOTE in api.lease["metadata"]["annotations"]


def test_a_released_lease_is_taken_at_once() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = election(api, "leader", clock)
    standby = election(api, "standby", clock)
    assert leader.attempt()
    assert not standby.attempt()
    leader.release()
    assert standby.attempt()


def test_a_leader_that_sees_another_holder_says_so() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = election(api, "leader", clock)
    other = election(api, "other", clock)
    assert leader.attempt()
    assert not other.attempt()
    clock.now += 16  # the leader was stuck; the other one took over
    assert other.attempt()
    assert not leader.attempt()
    assert leader.held_by_other


def test_an_attempt_that_finds_another_holder_lets_no_write_start() -> None:
    """A leader stuck past its renew deadline while another replica took the Lease over: its
    next attempt fails, and must not raise the fence again (under the new holder's term or
    any other)."""
    api, clock = FakeLeaseApi(), Clock()
    fence = LeaderFence(10, clock)
    leader = Election(api, Settings(identity="leader"), fence, clock)
    other = election(api, "other", clock)
    assert leader.attempt()
    assert not other.attempt()
    clock.now += 16
    assert other.attempt()

    assert not leader.attempt()

    assert not fence.holds()
    with pytest.raises(TemporaryError, match="fence does not hold"), fence.writing():
        pass


def test_a_renewal_that_lost_a_race_is_a_failed_attempt() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = election(api, "leader", clock)
    assert leader.attempt()
    original = api.replace_lease

    def racing(namespace: str, name: str, body: RawObject) -> RawObject:
        raise ConflictError("someone wrote first")

    api.replace_lease = racing  # type: ignore[method-assign]
    clock.now += 2
    assert not leader.attempt()
    api.replace_lease = original  # type: ignore[method-assign]


def test_the_fence_refuses_a_write_once_revoked() -> None:
    fence = LeaderFence(10)
    fence.renewed(time.monotonic())
    with fence.writing():
        pass
    fence.revoke()
    with pytest.raises(TemporaryError), fence.writing():
        pass


def leading_elector(api: FakeLeaseApi) -> LeaderElector:
    elector = LeaderElector(api, Settings("leader", retry_period_seconds=1))
    started = threading.Event()
    elector.start(started.set, lambda: None)
    assert started.wait(5)
    return elector


def write_in_flight(elector: LeaderElector) -> tuple[threading.Thread, threading.Event]:
    """A node write under way on the leader; it ends when the returned event is set."""
    in_write, finish = threading.Event(), threading.Event()

    def write() -> None:
        with elector.fence.writing():
            in_write.set()
            finish.wait(10)

    writer = threading.Thread(target=write)
    writer.start()
    assert in_write.wait(5)
    return writer, finish


def test_a_hand_back_waits_for_the_writes_in_flight_before_releasing_the_lease() -> None:
    api = FakeLeaseApi()
    elector = leading_elector(api)
    writer, finish = write_in_flight(elector)
    stopper = threading.Thread(target=elector.stop_and_release)
    stopper.start()
    time.sleep(1.5)
    assert api.holder == "leader", "released while a write could still land"
    with pytest.raises(TemporaryError), elector.fence.writing():
        pass  # and no new write starts meanwhile
    finish.set()
    writer.join(5)
    stopper.join(5)
    assert api.holder == ""


def test_a_write_still_in_flight_after_the_drain_keeps_the_lease() -> None:
    api = FakeLeaseApi()
    elector = leading_elector(api)
    writer, finish = write_in_flight(elector)
    elector.stop_and_release(drain_seconds=0.2)
    assert api.holder == "leader"  # the standby waits for it to expire, as after a crash
    finish.set()
    writer.join(5)


def taken_over(api: FakeLeaseApi, holder: str) -> None:
    """`holder` writes itself into the Lease as a takeover does (one more transition), on the
    version it read, as often as the leader's renewals get in first."""
    while True:
        lease = api.read_lease("default", "lease")
        assert lease is not None
        spec = lease["spec"]
        lease["spec"] = {
            **spec,
            "holderIdentity": holder,
            "leaseTransitions": spec["leaseTransitions"] + 1,
        }
        try:
            api.replace_lease("default", "lease", lease)
            return
        except ConflictError:
            continue


def test_a_leader_that_sees_another_replica_holding_its_lease_stops_writing_at_once() -> None:
    """The Lease taken while this leader's fence would still hold by its own deadline (a
    replica that saw it stuck, or a Lease deleted and created anew): at its next attempt the
    leader finds another holder, says it lost, and no write starts from then on, not at the
    end of its renew deadline."""
    api = FakeLeaseApi()
    lost = threading.Event()
    elector = LeaderElector(api, Settings("leader", retry_period_seconds=1))
    started = threading.Event()
    elector.start(started.set, lost.set)
    assert started.wait(5)
    with elector.fence.writing():
        pass  # leading: writes start
    taken_over(api, "other")

    assert lost.wait(5), "the leader never noticed it lost the Lease"
    assert not elector.leading
    with pytest.raises(TemporaryError, match="fence does not hold"), elector.fence.writing():
        pass


def test_every_takeover_counts_a_transition_a_released_lease_included() -> None:
    """Each term of leadership has a larger number than every earlier one (the API server's
    fence compares them: core/decisions/fencing.py)."""
    api, clock = FakeLeaseApi(), Clock()
    first, second, third = (election(api, me, clock) for me in ("a", "b", "c"))
    assert first.attempt()
    numbers = [api.lease["spec"]["leaseTransitions"]]  # type: ignore[index]
    first.release()
    assert second.attempt()
    numbers.append(api.lease["spec"]["leaseTransitions"])  # type: ignore[index]
    clock.now += 15
    assert not third.attempt()  # first sight of b's record
    clock.now += 15
    assert third.attempt()
    numbers.append(api.lease["spec"]["leaseTransitions"])  # type: ignore[index]

    assert numbers == [0, 1, 2]


def test_the_fence_tells_each_write_the_term_it_was_last_renewed_under() -> None:
    api, clock = FakeLeaseApi(), Clock()
    fence = LeaderFence(10, clock)
    leader = Election(api, Settings(identity="a"), fence, clock)
    assert leader.attempt()

    with fence.writing() as term:
        assert term == ("a", 0)


def test_a_fence_deposed_by_the_api_server_lets_no_write_start() -> None:
    clock = Clock()
    fence = LeaderFence(10, clock)
    fence.renewed(clock.now, ("a", 3))

    fence.deposed(("a", 2))  # an older term's refusal changes nothing
    assert fence.holds()
    fence.deposed(("a", 3))
    assert not fence.holds()


def test_a_process_finding_its_own_identity_in_the_lease_starts_a_new_term() -> None:
    """A restart under a fixed --lease-identity: the paused process that wrote the Lease must
    not share the new process's term (the API server's fence tells terms apart by it)."""
    api, clock = FakeLeaseApi(), Clock()
    assert election(api, "fixed", clock).attempt()
    restarted = election(api, "fixed", clock)

    assert restarted.attempt()
    assert api.lease["spec"]["leaseTransitions"] == 1  # type: ignore[index]
    clock.now += 2
    assert restarted.attempt()  # its own renewals keep the term
    assert api.lease["spec"]["leaseTransitions"] == 1  # type: ignore[index]


def test_the_lease_says_which_term_holds_it_now() -> None:
    api, clock = FakeLeaseApi(), Clock()
    leader = LeaderElector(api, Settings(identity="a"), clock=clock)
    election(api, "a", clock).attempt()

    assert leader.holds_term(("a", 0))
    assert not leader.holds_term(("a", 1))


def test_a_paused_process_never_takes_on_the_term_of_a_restart_under_its_identity() -> None:
    api, clock = FakeLeaseApi(), Clock()
    paused = LeaderFence(10, clock)
    old = Election(api, Settings(identity="fixed"), paused, clock)
    assert old.attempt()
    restarted = election(api, "fixed", clock)
    assert restarted.attempt()  # a new term: fixed/1

    clock.now += 2
    assert not old.attempt()  # resumed: fixed/1 is not its term

    with paused.writing() as term:
        assert term == ("fixed", 0)


def test_a_term_the_api_server_said_is_over_is_not_raised_again_by_a_renewal() -> None:
    clock = Clock()
    fence = LeaderFence(10, clock)
    fence.renewed(clock.now, ("a", 3))
    fence.deposed(("a", 3))

    fence.renewed(clock.now + 1, ("a", 3))

    assert not fence.holds()
