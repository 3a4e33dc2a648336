"""The eviction breaker in the node controller: concurrent workers, waiting nodes, one Warning."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from nodegate.core.decisions.eviction_budget import Charge, Grant, charges
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.eviction_ledger import compact, merged
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeState
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.server_clock import AnchoredClock
from nodegate.reconciler.nodes.decide import eviction_breaker
from nodegate.reconciler.nodes.decide.eviction_breaker import REPORT_AFTER, EvictionBreaker, Hold
from nodegate.reconciler.nodes.metrics import Metrics
from tests.unit.core.builders import NOW, rules

STORM = rules(
    """\
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
    """
)
BROKEN = (NodeCondition("NetworkProblem", "True"),)


@dataclass
class FakeRecorder:
    """What the breaker reports, kept for the test."""

    events: list[tuple[str, str]] = field(default_factory=list)

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((reason, message))

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        self.events.append((reason, message))

    def warn(self, reason: str, message: str) -> None:
        """A Warning on the rules' source (the breaker's and the reports' `warn`)."""
        self.events.append((reason, message))

    def on_rules_object(
        self, name: str, uid: str, reason: str, message: str, warning: bool = True
    ) -> None:
        self.events.append((reason, message))


@dataclass
class Clock:
    """The API server's time as the test sets it; the breaker reads it through an anchored
    clock, whose monotonic part follows it."""

    now: datetime = NOW

    def server_time(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return (self.now - NOW).total_seconds()


@dataclass
class MemoryLedger:
    """The eviction ledger's store, in memory, keeping what the breaker last handed it (the real
    store's merge and compaction are tested in test_eviction_ledger_store.py); `failing`: every
    call raises it."""

    grants: list[Grant] = field(default_factory=list)
    failing: KubeError | None = None

    def load(self) -> list[Grant]:
        if self.failing is not None:
            raise self.failing
        return list(self.grants)

    saves: int = 0

    def save(self, grants: list[Grant], now: datetime, window: Callable[[str], timedelta]) -> None:
        if self.failing is not None:
            raise self.failing
        self.saves += 1
        self.grants = compact(merged(grants, self.grants), window, now)  # as the real store


def breaker(
    nodes: list[NodeState], clock: Clock | None = None, ledger: MemoryLedger | None = None
) -> tuple[EvictionBreaker, FakeRecorder, Metrics]:
    recorder = FakeRecorder()
    metrics = Metrics(registry=CollectorRegistry())
    clock = clock or Clock()
    anchored = AnchoredClock(clock.server_time, clock.monotonic)
    store = ledger if ledger is not None else MemoryLedger()
    made = EvictionBreaker(recorder.warn, metrics.breaker, lambda: nodes, anchored, store)
    return made, recorder, metrics


def storm_nodes(count: int) -> list[NodeState]:
    return [NodeState(name=f"n{i:02d}", conditions=BROKEN) for i in range(count)]


def wanted(node: NodeState, rules: NodeRules) -> tuple[Charge, ...]:
    """The evicting taints the node's plan adds, as the reconcile asks the breaker of them."""
    return charges(node, plan(node, rules, PlanFacts(NOW)), rules)


def ask(made: EvictionBreaker, node: NodeState) -> Hold:
    return made.admit(node, wanted(node, STORM), STORM)


def waiting(metrics: Metrics) -> float:
    return (
        metrics.registry.get_sample_value("nodegate_evictions_waiting", {"rule": "network-problem"})
        or 0.0
    )


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(2, 8))
def test_concurrent_workers_never_grant_more_than_the_budget(count: int, workers: int) -> None:
    nodes = storm_nodes(count)
    made, _, _ = breaker(nodes)
    start = threading.Barrier(workers)
    granted: list[str] = []
    lock = threading.Lock()

    def work(mine: list[NodeState]) -> None:
        start.wait()
        for node in mine:
            if not ask(made, node).waiting:
                with lock:
                    granted.append(node.name)

    threads = [threading.Thread(target=work, args=(nodes[i::workers],)) for i in range(workers)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)

    assert len(granted) == max(1, int(0.2 * count + 1e-9))


def test_the_rest_wait_and_are_counted_in_the_metric() -> None:
    nodes = storm_nodes(20)
    made, _, metrics = breaker(nodes)

    holds = [ask(made, node) for node in nodes]

    assert sum(1 for h in holds if h.waiting) == 16
    assert waiting(metrics) == 16


def test_a_waiting_node_is_let_through_once_the_window_has_room() -> None:
    nodes = storm_nodes(20)
    clock = Clock()
    made, _, _ = breaker(nodes, clock)
    holds = [ask(made, node) for node in nodes]
    retry = holds[-1].retry_after
    assert retry is not None and retry <= REPORT_AFTER.total_seconds()

    clock.now = NOW + timedelta(minutes=5)

    assert not ask(made, nodes[-1]).waiting


def test_a_node_whose_condition_recovers_stops_waiting() -> None:
    nodes = storm_nodes(20)
    made, _, metrics = breaker(nodes)
    for node in nodes:
        ask(made, node)

    made.settle(nodes[-1].name)

    assert waiting(metrics) == 15


def test_a_hold_is_reported_once_naming_the_rule_the_share_and_the_nodes() -> None:
    nodes = storm_nodes(20)
    clock = Clock()
    made, recorder, _ = breaker(nodes, clock)
    for node in nodes:
        ask(made, node)
    assert recorder.events == []  # not before the storm has arrived

    clock.now = NOW + REPORT_AFTER
    for node in nodes:
        ask(made, node)

    assert [reason for reason, _ in recorder.events] == ["EvictionBudgetSpent"]
    message = recorder.events[0][1]
    assert "rule network-problem: 4 of 20 nodes of the cluster (20%" in message
    assert "16 node(s) wait for it: n04, n05" in message


# --- the ledger: what was spent survives a restart, counted on the API server's clock ---------


def test_a_grant_is_in_the_ledger_before_the_taint_it_allows_is_written() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    made, _, _ = breaker(nodes, ledger=ledger)

    assert not ask(made, nodes[0]).waiting

    assert [g.node for g in ledger.grants] == ["n00"]


def test_a_restart_counts_what_was_spent_even_on_nodes_that_recovered() -> None:
    """Issue 42: four grants, then the nodes recover (no taint is left on any of them) and the
    process restarts inside the window: the new breaker still finds the budget spent."""
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    first, _, _ = breaker(nodes, ledger=ledger)
    assert [bool(ask(first, node).waiting) for node in nodes[:5]] == [False] * 4 + [True]

    restarted, _, _ = breaker(storm_nodes(20), ledger=ledger)

    assert ask(restarted, nodes[10]).waiting


def test_without_its_ledger_a_restart_would_spend_the_budget_again() -> None:
    """The contrast that shows what the ledger is for: an empty ledger lets four more through."""
    nodes = storm_nodes(20)
    first, _, _ = breaker(nodes, ledger=MemoryLedger())
    for node in nodes[:4]:
        ask(first, node)

    restarted, _, _ = breaker(storm_nodes(20), ledger=MemoryLedger())

    assert not ask(restarted, nodes[10]).waiting


def test_a_grant_the_ledger_cannot_record_is_not_granted() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    made, _, metrics = breaker(nodes, ledger=ledger)
    ask(made, nodes[0])  # the ledger is read
    ledger.failing = KubeError("connection refused")

    hold = ask(made, nodes[1])

    assert "could not be written" in hold.waiting["network-problem"]
    assert hold.retry_after is not None
    assert [g.node for g in ledger.grants] == ["n00"]
    assert metrics.registry.get_sample_value("nodegate_errors_total", {"kind": "ledger"}) == 1


def test_nothing_is_granted_before_the_ledger_is_read() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger(failing=KubeError("503"))
    made, _, _ = breaker(nodes, ledger=ledger)

    assert not made.load()
    assert "not read yet" in ask(made, nodes[0]).waiting["network-problem"]


def test_a_ledger_outage_is_said_once_on_the_rules_source_and_again_after_it_healed() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger(failing=KubeError("503"))
    made, recorder, _ = breaker(nodes, ledger=ledger)
    made.load()
    for node in nodes[:3]:
        ask(made, node)
    said = [reason for reason, _ in recorder.events if reason == "EvictionLedgerUnavailable"]
    assert said == ["EvictionLedgerUnavailable"]

    ledger.failing = None
    made._next_load = 0.0  # its retry pause over
    assert not ask(made, nodes[3]).waiting
    ledger.failing = KubeError("503")
    made._next_save = 0.0
    ask(made, nodes[4])
    said = [reason for reason, _ in recorder.events if reason == "EvictionLedgerUnavailable"]
    assert said == ["EvictionLedgerUnavailable"] * 2


def test_a_wall_clock_step_moves_no_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The breaker reads the API server's time once and then counts on the monotonic clock:
    this host's wall clock stepped a day ahead frees no budget."""

    class SteppedAhead(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> SteppedAhead:
            return cls.fromtimestamp((NOW + timedelta(days=1)).timestamp(), tz)

    nodes = storm_nodes(20)
    clock = Clock()
    made, _, _ = breaker(nodes, clock)
    for node in nodes[:4]:
        ask(made, node)

    monkeypatch.setattr(eviction_breaker, "datetime", SteppedAhead)
    clock.now = NOW + timedelta(seconds=30)  # the server's time: inside the window

    assert ask(made, nodes[10]).waiting


TWO_BUDGETS = rules(
    """\
    evictionBudget: {cluster: {maxNodes: 1}}
    conditionTaints:
      - name: own
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/own, effect: NoExecute}
        evictionBudget: {cluster: {maxNodes: 5}}
      - name: shared
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/shared, effect: NoExecute}
    """
)


def test_a_ledger_that_cannot_be_written_holds_every_budgeted_taint_of_the_node() -> None:
    """The shared budget is spent (n00 got it), the rule's own has room: when the grant of the
    own rule cannot be written, the shared rule's taint must not go out with the re-plan."""
    nodes = storm_nodes(3)
    ledger = MemoryLedger()
    made, _, _ = breaker(nodes, ledger=ledger)
    made.admit(nodes[0], wanted(nodes[0], TWO_BUDGETS), TWO_BUDGETS)
    ledger.failing = KubeError("timed out")

    hold = made.admit(nodes[1], wanted(nodes[1], TWO_BUDGETS), TWO_BUDGETS)

    assert set(hold.waiting) == {"own", "shared"}


def test_after_a_failed_write_grants_wait_without_asking_the_api_again_at_once() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    made, _, _ = breaker(nodes, ledger=ledger)
    ask(made, nodes[0])
    ledger.failing = KubeError("timed out")
    ask(made, nodes[1])
    ledger.failing = None

    assert "cannot be written" in ask(made, nodes[2]).waiting["network-problem"]
    assert ledger.saves == 1


def test_a_grant_a_previous_leader_dated_ahead_of_this_clock_counts_as_made_now() -> None:
    """The previous leader's anchor ran 3 s ahead: its grants are in this leader's future, and
    still count (a grant not yet made would free the budget)."""
    nodes = storm_nodes(20)
    ahead = Clock(NOW + timedelta(seconds=3))
    ledger = MemoryLedger()
    first, _, _ = breaker(nodes, ahead, ledger=ledger)
    for node in nodes[:4]:
        ask(first, node)

    second, _, _ = breaker(storm_nodes(20), Clock(NOW), ledger=ledger)

    assert ask(second, nodes[10]).waiting


def test_a_flapping_node_is_one_entry_of_the_ledger() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    clock = Clock()
    made, _, _ = breaker(nodes, clock, ledger=ledger)
    for second in range(100):
        clock.now = NOW + timedelta(seconds=second)
        ask(made, nodes[0])
        made.settle(nodes[0].name)

    assert [g.node for g in ledger.grants] == ["n00"]


def test_grants_past_their_window_leave_the_ledger() -> None:
    nodes = storm_nodes(20)
    ledger = MemoryLedger()
    clock = Clock()
    made, _, _ = breaker(nodes, clock, ledger=ledger)
    for node in nodes[:4]:
        ask(made, node)

    clock.now = NOW + timedelta(hours=1)
    ask(made, nodes[10])

    assert [g.node for g in ledger.grants] == ["n10"]


@dataclass
class StuckLedger(MemoryLedger):
    """A ledger whose first write hangs until `release` is set (an API server that stopped
    answering mid-request)."""

    release: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)

    def save(self, grants: list[Grant], now: datetime, window: Callable[[str], timedelta]) -> None:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(10)
        super().save(grants, now, window)


@contextmanager
def first_write_hung(
    nodes: list[NodeState], asking: Callable[[EvictionBreaker, NodeState], Hold]
) -> Iterator[EvictionBreaker]:
    """A breaker whose first ledger write (for nodes[0], asked by another worker) hangs while
    the block runs; released and joined after it."""
    ledger = StuckLedger()
    made, _, _ = breaker(nodes, ledger=ledger)
    made.load()
    first = threading.Thread(target=asking, args=(made, nodes[0]))
    first.start()
    assert ledger.entered.wait(5)
    try:
        yield made
    finally:
        ledger.release.set()
        first.join(5)


def test_a_ledger_write_that_hangs_holds_up_no_other_nodes_admission() -> None:
    answered = threading.Event()
    with first_write_hung([*storm_nodes(1), NodeState("fine")], ask) as made:

        def settle_another() -> None:
            made.settle("fine")
            answered.set()

        other = threading.Thread(target=settle_another)
        other.start()
        assert answered.wait(2), "another node's admission waited for the hung ledger write"
    other.join(5)


ONE_AT_A_TIME = rules(
    """\
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
        evictionBudget: {window: 10m, cluster: {maxNodes: 1}}
    """
)


def ask_one_at_a_time(made: EvictionBreaker, node: NodeState) -> Hold:
    return made.admit(node, wanted(node, ONE_AT_A_TIME), ONE_AT_A_TIME)


def test_a_grant_reserved_while_its_ledger_write_hangs_is_counted_by_other_workers() -> None:
    nodes = storm_nodes(20)
    with first_write_hung(nodes, ask_one_at_a_time) as made:
        assert ask_one_at_a_time(made, nodes[1]).waiting
