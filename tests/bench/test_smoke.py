"""The benchmark harness at 50 nodes, so `make test` keeps it working between `make bench` runs.

Figures are not asserted (the bench reports them); what is asserted is what must hold at any
size: every change reached its taint state, nodegate wrote once per node and per change, a
no-op resync wrote nothing, and nodes born with their registration taints let no pod in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import report
from tests.bench.breakdown import SEGMENTS
from tests.bench.results import LATENCY_CASES, SizeResult
from tests.bench.run import Plan, measure_size

SMOKE = Plan(
    nodes=50,
    steady_seconds=1.0,
    burst=10,
    race_nodes=10,
    resync_seconds=6.0,
    max_load=float("inf"),  # the smoke run never waits for a quiet machine
    settle_seconds=2.0,
)

pytestmark = [pytest.mark.bench, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def smoke() -> SizeResult:
    return measure_size(SMOKE, "pytest tests/bench/test_smoke.py")


def test_every_change_reaches_its_taint_state_under_both_operators(smoke: SizeResult) -> None:
    for operator in ("nodegate", "kopf"):
        latencies = smoke.operators[operator].latencies
        assert set(latencies) == set(LATENCY_CASES)
        assert all(latency.missing == 0 for latency in latencies.values()), operator
        assert all(latency.count > 0 for latency in latencies.values()), operator


def test_every_steady_change_of_nodegates_is_split_at_the_api_server(smoke: SizeResult) -> None:
    steady = 2 * 2 * SMOKE.steady_nodes  # label and condition, each turned on and off
    stretches = smoke.operators["nodegate"].steady_split
    assert set(stretches) == set(SEGMENTS)
    assert all(s.count == steady and s.missing == 0 for s in stretches.values())


def test_kopfs_steady_changes_are_split_too(smoke: SizeResult) -> None:
    # Not all: at 50 nodes a node's removal follows its add by half a second, and kopf may not
    # have written the add yet (the removal is then seen at once, with no write of kopf's).
    stretches = smoke.operators["kopf"].steady_split
    assert set(stretches) == set(SEGMENTS)
    assert all(s.count > 0 for s in stretches.values())


def test_nodegates_full_collections_are_read_from_its_metrics(smoke: SizeResult) -> None:
    nodegate = smoke.operators["nodegate"]
    assert nodegate.full_gc_pauses is not None and nodegate.full_gc_pauses >= 1  # the one at start
    assert nodegate.full_gc_seconds is not None and nodegate.full_gc_seconds > 0


def test_nodegate_writes_once_per_node_at_cold_converge_and_once_per_change(
    smoke: SizeResult,
) -> None:
    nodegate = smoke.operators["nodegate"]
    assert nodegate.converge_writes == SMOKE.nodes
    assert nodegate.change_writes == nodegate.changes
    assert nodegate.change_conflicts == 0


def test_a_no_op_resync_writes_nothing(smoke: SizeResult) -> None:
    assert smoke.operators["nodegate"].resync_writes == 0


def test_the_race_sees_pods_bind_to_joining_nodes_nobody_taints(smoke: SizeResult) -> None:
    # The control: without it, "0 bound" below could mean the harness never sees a binding.
    race = smoke.operators["nodegate"].race["untainted"]
    assert race.pods_bound == race.joined == SMOKE.race_nodes


def test_nodes_born_with_registration_taints_bind_no_pod_before_the_taint(
    smoke: SizeResult,
) -> None:
    race = smoke.operators["nodegate"].race["registration"]
    assert race.joined == SMOKE.race_nodes
    assert race.pods_bound == 0


def test_every_storm_phase_reaches_every_node_under_every_operator(smoke: SizeResult) -> None:
    for operator in ("nodegate", "nodegate-unlimited", "kopf"):
        storm = smoke.operators[operator].storm
        assert set(storm) == {"taint", "untaint"}, operator
        for phase in storm.values():
            assert phase.latency.missing == 0 and phase.latency.count == SMOKE.nodes, operator
            # Not ordered: the last taint may be seen before the last flip's answer returns.
            assert phase.seconds > 0 and phase.send_seconds > 0, operator


def test_the_api_server_floor_is_measured_for_both_phases_and_thread_counts(
    smoke: SizeResult,
) -> None:
    assert set(smoke.floor) == {"taint", "untaint"}
    assert all(set(times) == {16, 64} and min(times.values()) > 0 for times in smoke.floor.values())
    assert smoke.burst_floor is not None and smoke.burst_floor > 0
    assert set(smoke.flips_alone) == {"taint", "untaint"}
    assert smoke.round_trip is not None and smoke.round_trip.count == SMOKE.steady_nodes
    assert min(smoke.flips_alone.values()) > 0


def test_the_report_has_both_operators_memory_and_a_plot(smoke: SizeResult, tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    section = report.update_document(doc, smoke, report.environment())
    assert "| peak RSS |" in section
    assert "| tainting phase: all flipped bad → all tainted |" in section
    assert all(smoke.operators[o].peak_rss_mib > 0 for o in ("nodegate", "kopf"))
    assert (tmp_path / "benchmarks" / "benchmarks-50.png").stat().st_size > 0
