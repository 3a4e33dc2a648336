"""The benchmark's arithmetic and its document, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import report
from tests.bench.results import LATENCY_CASES, OperatorResult, RaceResult, SizeResult
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
    assert (tmp_path / "benchmarks-1000.png").exists()
    assert (tmp_path / "benchmarks-5000.png").exists()
