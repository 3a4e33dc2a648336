"""When rules take effect, every node is queued for a look, and a worker may take one at once:
by then the cache must already know what the rules read (`NodeIntake.rules_applied`: an entry
slimmed under the old annotation filter is stale, re-read before planning). b84ecff queued every
node first (`AgentReports.daemon_sets_changed`), before the filter, the label keys and the
records' watch followed the rules: a worker could plan on an entry missing an annotation the
new rules read, trusted as fresh."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.reconciler.kit.workqueue import Lane
from tests.unit.reconciler.kit.fakes import FakeApi
from tests.unit.reconciler.nodes.test_controller import GATE_RULES, gated_node, synced, update


def test_no_node_is_queued_for_new_rules_before_the_cache_knows_what_they_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi()
    node: dict[str, Any] = gated_node("g1")
    node["metadata"]["annotations"] = {"example.com/ready": "true"}
    api.add_node(node)
    controller = synced(api)  # no rules yet: the cache drops example.com/ready
    queued: list[tuple[str, bool]] = []
    add = controller.queue.add

    def spy(key: str, lane: Lane = "event") -> None:
        cached = controller.informer.get(key)
        queued.append((key, cached is not None and controller.intake.stale(cached)))
        add(key, lane)

    monkeypatch.setattr(controller.queue, "add", spy)
    controller.offer_rules(update(GATE_RULES))  # its gate reads example.com/ready

    assert controller.rules is not None
    assert queued
    assert all(stale for _, stale in queued), queued  # taken now, it is re-read, not trusted
