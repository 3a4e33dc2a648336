"""What the node intake counts, every node event by what it led to, and the node cache's size the
controller reads when scraped (the handler looks no metric up per event: issue 62)."""

from __future__ import annotations

import copy

from nodegate.reconciler.kit.informer import object_key
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.nodes.test_controller import CI_RULES, ci_node, metric, synced, update


def test_each_node_event_is_counted_by_what_it_led_to_and_the_cache_is_sized_when_scraped() -> None:
    api = FakeApi()
    api.add_node(ci_node("ci-1"))
    api.add_node(fake_node("plain-1"))
    controller = synced(api)
    intake, informer = controller.intake, controller.informer
    assert metric(controller, "nodegate_cached_objects", informer="nodes") == 2
    assert metric(controller, "nodegate_node_watch_events_total", outcome="no_rules") == 2

    controller.offer_rules(update(CI_RULES))
    node = api.nodes["plain-1"]
    heartbeat = copy.deepcopy(node)
    heartbeat["metadata"]["resourceVersion"] = "999"
    intake.on_event("plain-1", informer.get("plain-1"), intake.slim(heartbeat))
    relabelled = copy.deepcopy(heartbeat)
    relabelled["metadata"]["labels"]["example.com/dedicated"] = "ci"
    intake.on_event("plain-1", intake.slim(heartbeat), intake.slim(relabelled))
    informer.discard(object_key(node))
    intake.on_event("plain-1", intake.slim(relabelled), None)

    assert metric(controller, "nodegate_node_watch_events_total", outcome="unchanged") == 1
    assert metric(controller, "nodegate_node_watch_events_total", outcome="queued") == 1
    assert metric(controller, "nodegate_node_watch_events_total", outcome="deleted") == 1
    assert metric(controller, "nodegate_cached_objects", informer="nodes") == 1
