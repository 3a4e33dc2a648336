"""The access-cost benchmark's measure, at a few nodes: it lists every object into the view."""

from __future__ import annotations

from tests.bench.access_cost import held


def test_every_csinode_is_listed_and_held() -> None:
    found = held("CSINode", 450)  # three pages

    assert found["objects"] == 450
    assert found["held"] > 0


def test_every_daemon_set_of_the_scenario_is_listed() -> None:
    assert held("DaemonSet", 10)["objects"] == 20
