"""A silent partition is visible as a metric, apart from the informers' other failures."""

from __future__ import annotations

from nodegate.reconciler.kit.errors import TemporaryError, WatchStalledError
from nodegate.reconciler.nodes.metrics import Metrics


def test_a_stalled_watch_counts_as_a_stall_and_as_an_informer_error() -> None:
    metrics = Metrics()
    metrics.on_informer_error("nodes", WatchStalledError("silent for 25s"))
    metrics.on_informer_error("nodes", TemporaryError("connection refused"))
    sample = metrics.registry.get_sample_value
    assert sample("nodegate_watch_stalls_total", {"informer": "nodes"}) == 1
    assert sample("nodegate_informer_errors_total", {"informer": "nodes"}) == 2
