"""The node agents' informers (reconciler/nodes/sources/node_agents.py): which rules are looked
up, and what is held of the DaemonSet pods."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from nodegate.core.rules.node import NodeTaint
from nodegate.core.views.daemon_sets import (
    NOT_AN_AGENT,
)
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents
from tests.unit.core.builders import node, rules
from tests.unit.core.test_node_agents import pod

CSI_ONLY = rules(
    """\
    nodeAgents:
      - name: csi
        csiDrivers: [{name: ebs.csi.aws.com}]
        mode: bootstrapOnly
        taint: {key: example.com/csi-not-ready, effect: NoSchedule}
    """
)
LISTED = rules(
    """\
    nodeAgents:
      - name: cni
        daemonSets: [{namespace: kube-system, name: cilium}]
        taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    """
)


class Informer:
    def __init__(self) -> None:
        self.synced = threading.Event()

    def items(self) -> list[tuple[str, Any]]:
        return []


def agents_watching(enqueued: list[str] | None = None) -> NodeAgents:
    def start(*_args: Any) -> tuple[Informer, threading.Event]:
        return Informer(), threading.Event()

    on_node = (enqueued if enqueued is not None else []).append
    return NodeAgents(SimpleNamespace(start=start, on_node=on_node), lambda: None)  # type: ignore[arg-type]


def test_a_rule_reading_only_csi_drivers_is_looked_up_without_any_informer() -> None:
    agents = agents_watching()
    agents.follow(CSI_ONLY)
    on = node(taints=(NodeTaint("example.com/csi-not-ready", "NoSchedule"),))
    assert agents.readiness(CSI_ONLY, on, {"ebs.csi.aws.com": True})["csi"].ready


def test_a_rule_whose_informers_have_not_synced_is_not_looked_up() -> None:
    agents = agents_watching()
    agents.follow(LISTED)
    assert agents.readiness(LISTED, node(), {}) == {}


def test_a_pod_event_that_changes_nothing_agents_read_enqueues_nothing() -> None:
    enqueued: list[str] = []
    agents = agents_watching(enqueued)
    seen = pod()
    agents._on_pod("kube-system/p", None, seen)
    agents._on_pod("kube-system/p", seen, seen)
    assert enqueued == ["node-a"]


def test_a_node_without_agent_pods_left_holds_no_index_entry() -> None:
    agents = agents_watching()
    seen = pod()
    agents._on_pod("kube-system/p", None, seen)
    agents._on_pod("kube-system/p", seen, None)
    assert agents._by_node.nodes == {}


def test_a_namespace_no_longer_read_leaves_no_index_entry_behind() -> None:
    agents = agents_watching()
    agents.follow(LISTED)
    agents._on_pod("kube-system/p", None, pod())
    agents.follow(CSI_ONLY)
    assert agents._by_node.nodes == {}


def test_a_pod_no_daemon_set_controls_is_never_indexed() -> None:
    agents = agents_watching()
    agents._on_pod("kube-system/mirror", None, NOT_AN_AGENT)
    assert agents._by_node.nodes == {}
