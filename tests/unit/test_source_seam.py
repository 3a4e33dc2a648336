"""The source seam (core/rules/cluster_reads.py): every consumer of what the rules read from the
cluster takes every source kind into account.

A dummy source, "node leases" (a gate put back on reboot reads the nodes' Leases in
kube-node-lease), is added the way a real one would be (its kind in SOURCES, its reconciler
source in the controller's list) and then checked against each consumer: one that names the
sources by hand instead of going through the record ignores it and fails here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from kubernetes.client import ApiClient

from nodegate.cli.live.cluster import Cluster, Where
from nodegate.cli.live.sources import node_sources
from nodegate.core.decisions.sources import UnknownSourceError
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.cluster_reads import SOURCES, Resource, SourceKind, cluster_reads
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.manifests.rbac import cluster_rules
from tests.unit.manifests.support import settings
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.nodes.test_controller import new_controller, sync, update

LEASES = Resource("coordination.k8s.io", "leases", "Lease")
NODE_LEASES = SourceKind(
    "node-leases",
    (LEASES,),
    lambda reads: frozenset({"kube-node-lease"}) if reads.boot_id else frozenset(),
)
RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
startupGates:
  - name: warmup
    match: {labels: {pool: gpu}}
    taint: {key: startup.example.com/initializing, value: wait, effect: NoSchedule}
    readyWhen: {annotation: example.com/ready=true}
    regateOnReboot: true
"""


@pytest.fixture
def registered() -> Iterator[None]:
    """The dummy kind, registered as a real one is (and unregistered after)."""
    SOURCES.append(NODE_LEASES)
    yield
    SOURCES.remove(NODE_LEASES)


class NodeLeases:
    """The dummy's reconciler source: it records what it is asked."""

    kind = "node-leases"

    def __init__(self) -> None:
        self.followed: list[NodeRules] = []
        self.stopped = False
        self.asked_synced = 0
        self.asked_facts: list[str] = []

    def follow(self, rules: NodeRules) -> None:
        self.followed.append(rules)

    def stop(self) -> None:
        self.stopped = True

    def synced(self) -> bool:
        self.asked_synced += 1
        return True

    def facts(self, node: NodeState, rules: NodeRules, facts: PlanFacts) -> PlanFacts:
        self.asked_facts.append(node.name)
        return replace(facts, workload_pods=0)


@pytest.mark.usefixtures("registered")
def test_the_record_says_what_a_new_source_reads_and_for_which_rules() -> None:
    read = cluster_reads(parse_rules(RULES)).of("node-leases")
    assert read is not None
    assert (read.namespaces, read.rules, read.scopes()) == (
        frozenset({"kube-node-lease"}),
        ("warmup",),
        ["kube-node-lease"],
    )


@pytest.mark.usefixtures("registered")
def test_the_rbac_grants_what_a_new_source_reads() -> None:
    assert {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["list", "watch"],
    } in cluster_rules(parse_rules(RULES), settings(rulesSource="configmap"))


@pytest.mark.usefixtures("registered")
def test_the_controller_refuses_a_source_kind_nothing_follows_by_name() -> None:
    with pytest.raises(UnknownSourceError, match="node-leases"):
        new_controller(FakeApi())


def test_the_controller_drives_a_new_source_without_naming_it() -> None:
    api = FakeApi()
    api.add_node(fake_node("n1", {"pool": "gpu"}))
    controller = sync(new_controller(api, resync_seconds=0.05, workers=1))
    leases = NodeLeases()
    controller.sources.append(leases)

    controller.offer_rules(update(RULES))
    assert [r.startup_gates[0].name for r in leases.followed] == ["warmup"]
    controller.process("n1")
    assert leases.asked_facts == ["n1"]
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not leases.asked_synced and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(10)
    assert leases.asked_synced and leases.stopped


@pytest.mark.usefixtures("registered")
def test_the_day2_commands_refuse_a_source_kind_they_do_not_list_by_name() -> None:
    """`nodegate explain` reads a node's facts through its own sources (cli/live/sources.py)."""
    cluster = Cluster(ApiClient(), Where())
    with pytest.raises(UnknownSourceError, match="node-leases"):
        node_sources(cluster, NodeState(name="n1"), datetime(2026, 12, 6, tzinfo=UTC))
