"""The slim node the reconciler caches keeps every annotation the rules read, and no other."""

from __future__ import annotations

from nodegate.core.rules.loader import parse_rules
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.defaults import HandlerSettings
from nodegate.migrate.nodetaintshandler import convert_nodetaintshandler
from nodegate.reconciler.nodes.node_view import annotation_filter, slim_node
from tests.unit.reconciler.kit.fakes import fake_node

RULES = parse_rules(to_yaml(convert_nodetaintshandler(HandlerSettings(startup_backfill="1"))))


def test_a_gates_completion_annotation_is_kept_so_backfill_sees_it() -> None:
    """A node nodetaintshandler completed carries only its completedAt: dropping it from the
    cache would make the node look never gated, and an idle one would be backfilled."""
    raw = fake_node("n")
    raw["metadata"]["annotations"] = {
        "startup.k8s.io/completedAt": "1795262400",
        "example.com/unrelated": "x",
        "completed.gate.nodegate.dev/startup": "2026-11-21T12:00:00Z",
    }
    kept = slim_node(raw, annotation_filter(RULES)).state.annotations
    assert set(kept) == {"startup.k8s.io/completedAt", "completed.gate.nodegate.dev/startup"}
