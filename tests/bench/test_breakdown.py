"""The split of a steady change's latency at the API server (breakdown.py), on made-up times."""

from __future__ import annotations

import pytest

from tests.bench.audit import AuditedWrite
from tests.bench.breakdown import SEGMENTS, SeenChange, split
from tests.bench.stats import Latency

BENCH = "nodegate-bench/1"
OPERATOR = "OpenAPI-Generator/"
pytestmark = pytest.mark.bench

WALL = 1_000_000.0  # wall clock minus monotonic clock


def write(node: str, agent: str, received: float, completed: float) -> AuditedWrite:
    """A write at monotonic times, as the audit log has it (wall clock)."""
    return AuditedWrite(node, agent, received + WALL, completed + WALL)


def ms(stretches: dict[str, Latency]) -> list[float]:
    return [round(stretches[s].samples[0] * 1000, 3) for s in SEGMENTS]


def test_a_change_splits_into_its_four_stretches() -> None:
    writes = [
        write("n1", BENCH, 10.002, 10.010),
        write("n1", OPERATOR + "37.0.2/python", 10.030, 10.045),
    ]
    stretches = split([SeenChange("n1", 10.000, 10.050)], writes, BENCH, OPERATOR, WALL)
    assert ms(stretches) == [10.0, 20.0, 15.0, 5.0]


def test_stretches_add_up_to_the_change_latency() -> None:
    writes = [write("n1", BENCH, 1.001, 1.004), write("n1", OPERATOR, 1.020, 1.033)]
    stretches = split([SeenChange("n1", 1.0, 1.070)], writes, BENCH, OPERATOR, WALL)
    assert sum(ms(stretches)) == pytest.approx(70.0)


def test_a_watch_ahead_of_the_writers_answer_counts_as_zero() -> None:
    # The operator heard of the change (and wrote) before the load generator's answer was done.
    writes = [write("n1", BENCH, 1.001, 1.030), write("n1", OPERATOR, 1.020, 1.040)]
    stretches = split([SeenChange("n1", 1.0, 1.035)], writes, BENCH, OPERATOR, WALL)
    assert ms(stretches)[1] == 0.0
    assert ms(stretches)[3] == 0.0


def test_earlier_writes_of_the_node_are_not_taken_for_the_change() -> None:
    writes = [
        write("n1", BENCH, 0.5, 0.6),  # an earlier change of the same node
        write("n1", OPERATOR, 0.7, 0.8),
        write("n1", BENCH, 1.001, 1.002),
        write("n1", OPERATOR, 1.010, 1.012),
    ]
    stretches = split([SeenChange("n1", 1.0, 1.020)], writes, BENCH, OPERATOR, WALL)
    assert ms(stretches) == [2.0, 8.0, 2.0, 8.0]


def test_writes_are_matched_by_node_and_by_agent() -> None:
    writes = [
        write("n2", OPERATOR, 1.003, 1.004),  # another node
        write("n1", "kube-controller-manager/v1.36", 1.004, 1.005),  # another writer
        write("n1", BENCH, 1.001, 1.002),
        write("n1", OPERATOR, 1.006, 1.008),
    ]
    stretches = split([SeenChange("n1", 1.0, 1.010)], writes, BENCH, OPERATOR, WALL)
    assert ms(stretches) == [2.0, 4.0, 2.0, 2.0]


def test_a_change_without_the_operators_write_is_missing_everywhere() -> None:
    writes = [write("n1", BENCH, 1.001, 1.002), write("n2", BENCH, 1.001, 1.002),
              write("n2", OPERATOR, 1.005, 1.006)]  # fmt: skip
    changes = [SeenChange("n1", 1.0, 1.010), SeenChange("n2", 1.0, 1.010)]
    stretches = split(changes, writes, BENCH, OPERATOR, WALL)
    assert all(s.missing == 1 and s.count == 1 for s in stretches.values())


def test_an_operator_write_after_the_watcher_saw_the_result_is_not_its_answer() -> None:
    # The taint was already right (someone else's write); a later write of the operator's is
    # for something else.
    writes = [write("n1", BENCH, 1.001, 1.002), write("n1", OPERATOR, 2.0, 2.1)]
    stretches = split([SeenChange("n1", 1.0, 1.010)], writes, BENCH, OPERATOR, WALL)
    assert stretches["operator's write"].missing == 1


def test_the_operators_write_is_the_one_the_watcher_saw_not_its_bookkeeping_before_it() -> None:
    writes = [
        write("n1", BENCH, 1.001, 1.002),
        write("n1", OPERATOR, 1.004, 1.006),  # an annotation of its own first
        write("n1", OPERATOR, 1.010, 1.012),  # then the taint
    ]
    stretches = split([SeenChange("n1", 1.0, 1.015)], writes, BENCH, OPERATOR, WALL)
    assert ms(stretches) == [2.0, 8.0, 2.0, 3.0]
