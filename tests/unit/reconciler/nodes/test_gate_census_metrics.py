"""The gate census on /metrics: the leader's figures, nothing from a replica without them."""

from __future__ import annotations

from prometheus_client import generate_latest

from nodegate.core.reports.gate_census import GateCensus, GatedGroup
from nodegate.reconciler.nodes.metrics import Metrics


def _exposition(metrics: Metrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_the_census_is_exported_per_gate_and_pool_with_the_share() -> None:
    metrics = Metrics()
    census = GateCensus((GatedGroup("warmup", "gpu", 3, 640.0),), gated_nodes=3, all_nodes=4)
    metrics.gate_census.source = lambda: census

    text = _exposition(metrics)

    assert 'nodegate_gated_nodes{gate="warmup",pool="gpu"} 3.0' in text
    assert 'nodegate_gate_oldest_seconds{gate="warmup",pool="gpu"} 640.0' in text
    assert "nodegate_gated_share 0.75" in text


def test_a_replica_without_a_census_exports_no_samples() -> None:
    text = _exposition(Metrics())
    samples = [line for line in text.splitlines() if not line.startswith("#")]

    assert "# TYPE nodegate_gated_share gauge" in text
    assert not [s for s in samples if s.startswith(("nodegate_gate", "nodegate_nodes "))]


def test_the_gated_ages_are_exported_as_a_gauge_histogram_with_all_nodes_beside() -> None:
    metrics = Metrics()
    census = GateCensus(
        (GatedGroup("warmup", "gpu", 2, 700.0),),
        gated_nodes=2,
        all_nodes=5,
        gated_by_age=(0, 1, 1, 2, 2, 2),
        gated_age_sum=760.0,
    )
    metrics.gate_census.source = lambda: census

    text = _exposition(metrics)

    assert 'nodegate_gated_node_age_seconds_bucket{le="600.0"} 1.0' in text
    assert 'nodegate_gated_node_age_seconds_bucket{le="900.0"} 2.0' in text
    assert 'nodegate_gated_node_age_seconds_bucket{le="+Inf"} 2.0' in text
    assert "nodegate_gated_node_age_seconds_gsum 760.0" in text
    assert "nodegate_nodes 5.0" in text
