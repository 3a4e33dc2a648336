"""Parity with nodetaintshandler: its documented usage replayed on the real control plane
(scheduler, controller-manager, kwok), with the rules and webhook settings `nodegate migrate
nodetaintshandler` makes of its environment and the Node admission webhook registered with the
real kube-apiserver (tests/e2e/support/webhook_fixtures.py).

Nodes join and are born with `startup.k8s.io/initializing=wait:NoSchedule` (AKS system-pool
nodes are not); the init DaemonSet's pod (`startup.k8s.io/component=init`, tolerating the gate)
becomes Ready under kwok and the gate is lifted, with `startup.k8s.io/completedAt=<unix
seconds>`; an init pod's `startup.k8s.io/ready=true` lifts it before the pod is Ready; nodes
that joined while the webhook was down are backfilled when idle, skipped when busy; and a
switch to the autoscaler's prefixed key lifts nodes born under either key.

Two things differ from a cluster, both to share the control plane with other tests: the gate's
`match` also requires the test label the webhook configuration selects by (its
objectSelector), and the init DaemonSet runs only on nodes labelled for it, so that nodes
without kwok (whose pods never become Ready) can show the annotation path and the backfill.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, mark_pod_ready, wait_until
from nodegate.migrate.conversion import Conversion, to_yaml
from nodegate.migrate.defaults import HandlerSettings
from nodegate.migrate.nodetaintshandler import convert_nodetaintshandler
from tests.e2e.support.reconciler_fixtures import (
    TIMEOUT,
    configmap_putter,
    read_node,
    taints_of,
    wait_for_event,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess
from tests.e2e.support.webhook_fixtures import (
    SELECTED,
    Webhook,
    raw_create,
    registered_webhook,
    taints,
    wait_in_force,
)
from tests.unit.migrate.support import env_file

OLD_KEY = "startup.k8s.io/initializing"
NEW_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/initializing"
GATE = {"key": OLD_KEY, "value": "wait", "effect": "NoSchedule"}
INIT = {"startup.k8s.io/component": "init"}
COMPLETED_AT = "startup.k8s.io/completedAt"
USER_POOL = {"kubernetes.azure.com/mode": "user"}
WARM = "e2e.nodegate.dev/init-daemonset"
"""Nodes the init DaemonSet runs on (kwok nodes, whose pods become Ready)."""
POD_IMAGE = "registry.k8s.io/pause:3.10"


def scoped(conversion: Conversion) -> str:
    """The converted rules, their gate limited to this test's nodes (see the module doc)."""
    rules = copy.deepcopy(conversion.rules)
    rules["startupGates"][0]["match"]["labels"] = {SELECTED: "yes"}
    return to_yaml(replace(conversion, rules=rules))


def init_daemonset(namespace: str) -> dict[str, Any]:
    """Its deploy/startup-daemonset.yaml: the init label, tolerating the gate as it does."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-startup-init", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": INIT},
            "template": {
                "metadata": {"labels": INIT},
                "spec": {
                    "nodeSelector": {WARM: "yes"},
                    "tolerations": [{**GATE, "operator": "Equal"}],
                    "containers": [{"name": "init", "image": POD_IMAGE}],
                },
            },
        },
    }


@dataclass
class Handler:
    core: k8s_client.CoreV1Api
    webhook: Webhook
    namespace: str
    put_rules: Callable[[str], str]
    settings: HandlerSettings
    rules: str
    process: ReconcilerProcess

    def restart(self) -> None:
        """A fresh reconciler (and webhook server), in force before this returns."""
        self.process = self.webhook.start()
        wait_in_force(self.webhook, self.core, f"{self.namespace}-canary", OLD_KEY)

    def node(self, suffix: str) -> str:
        return f"{self.namespace}-{suffix}"[:63]

    def init_pod(self, node: str, annotations: dict[str, str] | None = None) -> str:
        """An init pod bound to `node`, as the DaemonSet controller binds its pods."""
        name = f"init-{node}"[:63]
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": INIT, "annotations": annotations or {}},
            "spec": {
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "init", "image": POD_IMAGE}],
            },
        }
        self.core.create_namespaced_pod(self.namespace, cast(Any, body))
        return name

    def put_in_force(self, rules: str, gate: str) -> None:
        """New rules into the ConfigMap; returns once they are applied and a canary node is
        born with their gate `gate`."""
        generation = self.process.metric("nodegate_rules_generation")
        self.put_rules(rules)
        wait_until(
            lambda: self.process.metric("nodegate_rules_generation") > generation,
            TIMEOUT,
            "the new rules in force",
        )
        wait_in_force(self.webhook, self.core, f"{self.namespace}-canary", gate)


@pytest.fixture(scope="module")
def handler(
    scheduling_control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Handler]:
    """The reconciler on the converted rules, its webhook in force, the init DaemonSet."""
    plane = scheduling_control_plane
    core = k8s_client.CoreV1Api(plane.client)
    namespace = f"nth-{uuid.uuid4().hex[:6]}"
    env = env_file("nodetaintshandler.env")
    settings = HandlerSettings(namespace=namespace, startup_backfill=env["STARTUP_BACKFILL"])
    conversion = convert_nodetaintshandler(settings)
    assert conversion.webhook is not None
    rules = scoped(conversion)
    put = configmap_putter(core, f"rules-{namespace}")
    ref = put(rules)
    log_dir = tmp_path_factory.mktemp("nodetaintshandler")
    try:
        with registered_webhook(plane, ref, namespace, log_dir, conversion.webhook) as webhook:
            apps = k8s_client.AppsV1Api(plane.client)
            apps.create_namespaced_daemon_set(namespace, cast(Any, init_daemonset(namespace)))
            process = webhook.start()
            wait_in_force(webhook, core, f"{namespace}-canary", OLD_KEY)
            state = Handler(core, webhook, namespace, put, settings, rules, process)
            yield state
            print(state.process.logs()[-3000:])
    finally:
        core.delete_namespaced_config_map(f"rules-{namespace}", "default")


def gate_keys(core: k8s_client.CoreV1Api, node: str) -> set[str]:
    return {key for key, _ in taints_of(core, node) if key in (OLD_KEY, NEW_KEY)}


def lifted(core: k8s_client.CoreV1Api, node: str) -> dict[str, str]:
    """Wait for the gate to go; the node's annotations then."""
    wait_until(lambda: not gate_keys(core, node), TIMEOUT, f"gate lifted on {node}", 0.02)
    annotations: dict[str, str] = read_node(core, node)["metadata"].get("annotations") or {}
    return annotations


def stays_gated(core: k8s_client.CoreV1Api, node: str, seconds: float = 1.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert gate_keys(core, node)
        time.sleep(0.1)


def test_a_joining_node_is_born_gated_and_ungated_once_its_init_pod_is_ready(
    handler: Handler,
) -> None:
    core, node = handler.core, handler.node("joins")
    labels = {**USER_POOL, WARM: "yes"}
    created = raw_create(core, SimNode(name=node, labels=labels, kwok=True))
    joined = time.monotonic()
    assert taints(created) == [GATE]  # the first version of the object

    annotations = lifted(core, node)
    print(f"born gated -> lifted by the init DaemonSet's pod: {time.monotonic() - joined:.2f}s")
    when = int(annotations[COMPLETED_AT])  # their format: unix seconds
    assert abs(when - datetime.now(UTC).timestamp()) < 60
    assert annotations["completed.gate.nodegate.dev/startup"].endswith("Z")
    events = wait_for_event(core, node, "NodegateUpdated")
    assert any("init pod is Ready" in (e.message or "") for e in events)


def test_an_aks_system_pool_node_is_not_gated(handler: Handler) -> None:
    system = {"kubernetes.azure.com/mode": "system"}
    created = raw_create(handler.core, SimNode(name=handler.node("system"), labels=system))
    assert taints(created) == []


def test_the_init_pods_ready_annotation_lifts_the_gate_before_the_pod_is_ready(
    handler: Handler,
) -> None:
    core, node = handler.core, handler.node("early")
    assert taints(raw_create(core, SimNode(name=node, labels=USER_POOL))) == [GATE]
    pod = handler.init_pod(node)
    stays_gated(core, node)  # bound, never Ready (no kubelet)
    core.patch_namespaced_pod(
        pod, handler.namespace, {"metadata": {"annotations": {"startup.k8s.io/ready": "true"}}}
    )
    assert COMPLETED_AT in lifted(core, node)


def test_nodes_that_missed_the_webhook_are_backfilled_when_idle_and_skipped_when_busy(
    handler: Handler,
) -> None:
    core = handler.core
    idle, busy = handler.node("idle"), handler.node("busy")
    assert handler.process.stop() == 0  # the webhook is down: Ignore lets nodes in ungated
    for name in (idle, busy):
        assert taints(raw_create(core, SimNode(name=name, labels=USER_POOL))) == []
    workload = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"app-{busy}"[:63]},
        "spec": {"nodeName": busy, "containers": [{"name": "app", "image": POD_IMAGE}]},
    }
    core.create_namespaced_pod(handler.namespace, cast(Any, workload))

    handler.restart()  # STARTUP_BACKFILL=1: the controller backfills missed nodes
    wait_until(lambda: gate_keys(core, idle) == {OLD_KEY}, TIMEOUT, "idle node backfilled")
    [skipped] = wait_for_event(core, busy, "NodegateBackfillSkipped")
    assert f"{handler.namespace}/app-{busy}" in (skipped.message or "")
    assert gate_keys(core, busy) == set()


def test_switching_to_the_prefixed_key_lifts_nodes_born_under_either_key(
    handler: Handler,
) -> None:
    """`--autoscaler cluster-autoscaler` rules put into force on a running cluster: a node
    born under the old key stays gated, new nodes are born with the prefixed key, and the init
    pods lift both."""
    core = handler.core
    before_switch = handler.node("old-key")
    assert taints(raw_create(core, SimNode(name=before_switch, labels=USER_POOL))) == [GATE]

    switched = convert_nodetaintshandler(handler.settings, "cluster-autoscaler")
    handler.put_in_force(scoped(switched), NEW_KEY)
    try:
        after_switch = handler.node("new-key")
        created = raw_create(core, SimNode(name=after_switch, labels=USER_POOL))
        assert taints(created) == [{**GATE, "key": NEW_KEY}]
        stays_gated(core, before_switch, 1.0)
        assert gate_keys(core, before_switch) == {OLD_KEY}

        for node in (before_switch, after_switch):
            mark_pod_ready(core, handler.init_pod(node), handler.namespace)
        for node in (before_switch, after_switch):
            assert COMPLETED_AT in lifted(core, node)
    finally:
        handler.put_in_force(handler.rules, OLD_KEY)
