"""The benchmark's arithmetic and its document, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import report
from tests.bench.breakdown import SEGMENTS
from tests.bench.results import LATENCY_CASES, OperatorResult, RaceResult, SizeResult, StormPhase
from tests.bench.stats import Latency, percentile, ratio

pytestmark = pytest.mark.bench


def test_percentile_is_the_nearest_rank_and_always_a_measured_sample() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile([0.1, 0.2, 0.9], 99) == 0.9
    assert percentile([0.3], 50) == 0.3


def test_percentile_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [(0.1, 0.35, "3.5x"), (2.0, 1.0, "0.5x"), (None, 1.0, "-"), (0.0, 1.0, "-")],
    ids=["better", "worse", "missing", "zero"],
)
def test_ratio_says_how_many_times_lower_nodegate_is(
    ours: float | None, theirs: float | None, expected: str
) -> None:
    assert ratio(ours, theirs) == expected


def _size(nodes: int, p99: float) -> SizeResult:
    def operator(name: str, scale: float) -> OperatorResult:
        latency = Latency(tuple(p99 * scale * k / 10 for k in range(1, 11)))
        return OperatorResult(
            operator=name,
            latencies=dict.fromkeys(LATENCY_CASES, latency),
            changes=10,
            change_writes=10,
            peak_rss_mib=100 * scale,
            race={"reconciler": RaceResult(10, 3, 2)},
        )

    return SizeResult(
        nodes=nodes,
        started="2026-11-23T00:00:00+00:00",
        load_at_start=(1.5, 1.7, 1.9),
        quiet=True,
        node_kib=10.5,
        command="python -m tests.bench.run",
        write_qps=50,
        write_burst=100,
        operators={"nodegate": operator("nodegate", 1), "kopf": operator("kopf", 4)},
    )


def test_a_run_replaces_only_its_own_section_and_keeps_the_hand_written_text(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "benchmarks.md"
    report.update_document(doc, _size(1000, 0.2), {"machine": "test"})
    report.update_document(doc, _size(5000, 0.4), {"machine": "test"})
    doc.write_text(doc.read_text() + "\n## Analysis\n\nwritten by hand\n")
    report.update_document(doc, _size(1000, 0.3), {"machine": "test"})
    text = doc.read_text()
    assert text.count("<!-- bench:1000:begin -->") == 1
    assert "| 100 / 200 / 200 |" not in text  # the old 1,000-node figures are gone...
    assert "| 150 / 300 / 300 |" in text
    assert "written by hand" in text  # ...the analysis is kept
    assert text.index("bench:1000:begin") < text.index("bench:5000:begin")
    assert "| 4.0x (p99) |" in text
    assert (tmp_path / "benchmarks" / "benchmarks-1000.png").exists()
    assert "](benchmarks/benchmarks-1000.png)" in text
    assert (tmp_path / "benchmarks" / "benchmarks-5000.png").exists()


def _stormy(nodegate: float, unlimited: float, kopf: float) -> SizeResult:
    size = _size(1000, 0.2)
    phase = {"taint": 0.0, "untaint": 0.0}
    for name, seconds in (("nodegate", nodegate), ("nodegate-unlimited", unlimited),
                          ("kopf", kopf)):  # fmt: skip
        result = size.operators.setdefault(name, OperatorResult(operator=name))
        result.storm = {p: StormPhase(seconds, 1.0, Latency((0.5, 1.0, seconds))) for p in phase}
    size.floor = {"taint": {16: 2.0, 64: 1.6}, "untaint": {16: 2.0, 64: 1.6}}
    size.flips_alone = {"taint": 0.9, "untaint": 0.8}
    return size


def test_a_storm_phase_is_given_as_a_ratio_to_the_floor_and_to_the_run_with_no_limit() -> None:
    table = report.storm_table(_stormy(nodegate=4.0, unlimited=3.2, kopf=40.0))
    assert "| 4.0 s (2.5x floor; 1.2x no limit) | 3.2 s (2.0x floor) | 40.0 s (25.0x floor) |" in (
        table
    )
    assert "| 2.00 s / 1.60 s |" in table  # the floor per thread count; its fastest is the ratio's
    assert "| 1.0 s | 1.0 s | 1.0 s | 0.90 s with no operator |" in table  # sending the flips
    assert "tainting: nodegate 10.0x faster than kopf" in table


def test_a_run_without_storm_phases_has_no_storm_table() -> None:
    assert report.storm_table(_size(1000, 0.2)) == ""


def test_a_burst_p99_is_given_as_a_ratio_to_the_api_servers_floor_for_the_burst() -> None:
    size = _size(5000, 0.4)  # nodegate's p99 is 0.4 s
    size.burst, size.burst_floor = 200, 0.5
    table = report.size_table(size)
    assert "| API server floor: 200 taint patches at once, 16 threads | 500 ms |" in table
    burst_rows = [row for row in table.splitlines() if "burst: p50" in row]
    assert len(burst_rows) == 2 and all("(0.8x floor)" in row for row in burst_rows)
    steady_rows = [row for row in table.splitlines() if "steady: p50" in row]
    assert steady_rows and not any("floor" in row for row in steady_rows)


def test_a_steady_p99_is_given_as_a_ratio_to_one_patchs_round_trip() -> None:
    size = _size(5000, 0.4)  # nodegate's p99 is 0.4 s, kopf's 1.6 s
    size.round_trip = Latency(tuple(0.02 * k for k in range(1, 11)))  # p99 0.2 s
    steady_rows = [row for row in report.size_table(size).splitlines() if "steady: p50" in row]
    assert len(steady_rows) == 2
    assert all("(2.0x round trip) | " in row and "(8.0x round trip) | " in row
               for row in steady_rows)  # fmt: skip


def test_the_round_trip_floor_is_the_steady_figures_yardstick() -> None:
    size = _size(5000, 0.4)
    size.round_trip = Latency(tuple(0.01 * k for k in range(1, 11)))
    table = report.size_table(size)
    row = "| API server floor: one taint patch's round trip at the steady rate, p50 / p95 / p99 ms "
    assert row + "| 50 / 100 / 100 |" in table


def test_the_steady_split_shows_each_stretch_per_operator_and_whose_time_it_is() -> None:
    size = _size(5000, 0.4)
    for name, scale in (("nodegate", 1.0), ("kopf", 3.0)):
        size.operators[name].steady_split = {
            segment: Latency(tuple(scale * 0.001 * k for k in range(1, 11))) for segment in SEGMENTS
        }
    table = report.split_table(size)
    assert "| nodegate | kopf | whose time |" in table
    row = "| to the operator's write | 5 / 10 / 10 | 15 / 30 / 30 | the watch to the operator"
    assert row in table
    assert len([line for line in table.splitlines() if line.startswith("| ")]) == 2 + len(SEGMENTS)
    assert "split at the API server" in report.section(size, {}, "plot.png")


def test_a_run_without_a_steady_split_has_no_split_table() -> None:
    assert report.split_table(_size(1000, 0.2)) == ""


def test_nodegates_full_collections_are_counted_with_their_pauses() -> None:
    size = _size(5000, 0.4)
    size.operators["nodegate"].full_gc_pauses = 12
    size.operators["nodegate"].full_gc_seconds = 1.107
    table = report.size_table(size)
    assert "| full garbage collections, whole run: count (pauses in all) | 12 (1107 ms) |" in table
