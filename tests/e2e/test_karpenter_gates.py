"""Startup gates in front of a real node autoscaler: Karpenter with its kwok provider.

Nodes are born with the gate in both tests, as kubelet's `--register-with-taints` would give it
(here a MutatingAdmissionPolicy on Node creation, since kwok nodes have no kubelet). The only
difference is the Karpenter NodePool, rendered by nodegate: with the gate in `startupTaints`
Karpenter waits for the gated node (exactly one node); without it, Karpenter reads the node as
unusable for the pending pods. The second test measures what it then does; it asserts nothing.

Karpenter is built from its Go module only when these tests are collected (conftest), and runs
on a control plane of its own so it never provisions for other tests' pods.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.bootstrap.karpenter import render_karpenter_nodepool
from nodegate.core.loader import parse_rules
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.karpenter import KWOK_NODE_CLASS, LocalKarpenter
from nodegate.localcluster.nodes import wait_until
from tests.e2e.conftest import run_control_plane
from tests.e2e.reconciler_fixtures import (
    HEADER,
    configmap_putter,
    init_daemonset,
    taints_of,
    wait_for_event,
)
from tests.e2e.reconciler_process import running_reconciler

pytestmark = [pytest.mark.karpenter, pytest.mark.timeout(600)]

GATE_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-init"
GATE = (GATE_KEY, "NoSchedule")
POOL_LABEL = "example.com/pool"
DONE = "example.com/init-done"
POD_IMAGE = "registry.k8s.io/pause:3.10"
REPLICAS = 3
HOLD_SECONDS = 20.0
"""How long the init 'works' before it marks its pod done: the gated window Karpenter sees."""
MEASURE_SECONDS = 120.0
SAMPLE_SECONDS = 5.0


def gate_rules(pool: str, app: str) -> str:
    return HEADER + textwrap.dedent(
        f"""\
        startupGates:
          - name: gpu-init
            match: {{labels: {{{POOL_LABEL}: {pool}}}}}
            taint: {{key: {GATE_KEY}, value: wait, effect: NoSchedule}}
            readyWhen:
              pods:
                namespace: default
                selector: {{app: {app}}}
                readyAnnotation: {DONE}=true
                requireAnnotation: true
            timeout: 10m
        nodePools:
          - name: {pool}
            provider: aks
            size: 0
            labels: {{{POOL_LABEL}: {pool}}}
            autoscaler:
              type: karpenter
              nodeClassRef: {{group: {KWOK_NODE_CLASS["group"]}, kind: {KWOK_NODE_CLASS["kind"]},
                             name: {KWOK_NODE_CLASS["name"]}}}
        """
    )


@pytest.fixture(scope="module")
def karpenter_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalControlPlane]:
    """A control plane of its own (scheduler, controller-manager, kwok) with Karpenter on it."""
    logs = tmp_path_factory.mktemp("karpenter")
    for plane in run_control_plane(request, with_scheduling=True):
        karpenter = LocalKarpenter(plane, logs)
        try:
            karpenter.start()
            yield plane
        finally:
            if request.session.testsfailed:
                print(f"karpenter log tail:\n{karpenter.tail()}")
            karpenter.stop()


def born_gated_policy(nodepool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A MutatingAdmissionPolicy (and binding) giving every new Node of `nodepool` the gate at
    creation: what `--register-with-taints` does for a real kubelet."""
    name = f"born-gated-{nodepool}"[:63]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nodes"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "in-nodepool",
                    "expression": "has(object.metadata.labels) && "
                    "'karpenter.sh/nodepool' in object.metadata.labels && "
                    f"object.metadata.labels['karpenter.sh/nodepool'] == '{nodepool}'",
                }
            ],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": (
                            "has(object.spec.taints) ? "
                            '[JSONPatch{op: "add", path: "/spec/taints/-", '
                            f'value: Object.spec.taints{{key: "{GATE_KEY}", value: "wait", '
                            'effect: "NoSchedule"}}] : [JSONPatch{op: "add", path: "/spec/taints", '
                            f'value: [Object.spec.taints{{key: "{GATE_KEY}", value: "wait", '
                            'effect: "NoSchedule"}]}]'
                        )
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name},
    }
    return policy, binding


def workload(name: str, pool: str) -> dict[str, Any]:
    """Pods that fit one node together and do not tolerate the gate."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {POOL_LABEL: pool},
                    "containers": [
                        {
                            "name": "app",
                            "image": POD_IMAGE,
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


class Scene:
    """One experiment's objects on the Karpenter control plane, removed afterwards."""

    def __init__(self, plane: LocalControlPlane, stack: ExitStack, name: str) -> None:
        self.core = k8s_client.CoreV1Api(plane.client)
        self.apps = k8s_client.AppsV1Api(plane.client)
        self.custom = k8s_client.CustomObjectsApi(plane.client)
        self.stack = stack
        self.pool = f"kp-{name}"[:40].rstrip("-")
        self.app = f"init-{self.pool}"
        self.work = f"work-{self.pool}"

    def create_cluster_object(
        self, group: str, version: str, plural: str, body: dict[str, Any]
    ) -> None:
        self.custom.create_cluster_custom_object(group, version, plural, body)
        name = body["metadata"]["name"]
        self.stack.callback(self._delete, group, version, plural, name)

    def _delete(self, group: str, version: str, plural: str, name: str) -> None:
        with suppress(ApiException):  # already gone with the control plane's other objects
            self.custom.delete_cluster_custom_object(group, version, plural, name)

    def nodes(self) -> list[Any]:
        return list(self.core.list_node(label_selector=f"karpenter.sh/nodepool={self.pool}").items)

    def nodeclaims(self) -> list[str]:
        listed: dict[str, Any] = self.custom.list_cluster_custom_object(  # type: ignore[assignment]
            "karpenter.sh", "v1", "nodeclaims", label_selector=f"karpenter.sh/nodepool={self.pool}"
        )
        return [item["metadata"]["name"] for item in listed["items"]]

    def pods(self, app: str) -> list[Any]:
        return list(self.core.list_namespaced_pod("default", label_selector=f"app={app}").items)


def start_scene(
    plane: LocalControlPlane, stack: ExitStack, name: str, tmp_path: Path, *, startup_taints: bool
) -> Scene:
    """Reconciler, born-gated policy, init DaemonSet, the NodePool nodegate renders (with or
    without its startupTaints), then the pending workload."""
    scene = Scene(plane, stack, name)
    rules_text = gate_rules(scene.pool, scene.app)
    rules = parse_rules(rules_text, "karpenter-rules.yaml")
    put = configmap_putter(scene.core, f"rules-{scene.pool}")
    ref = put(rules_text)
    stack.enter_context(
        running_reconciler(
            plane.kubeconfig_path,
            tmp_path,
            "--rules-configmap",
            ref,
            "--no-leader-elect",
            "--max-untaint-share",
            "1",
        )
    )
    policy, binding = born_gated_policy(scene.pool)
    scene.create_cluster_object(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", policy
    )
    scene.create_cluster_object(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", binding
    )
    time.sleep(2.0)  # the API server loads new admission policies asynchronously
    agent = init_daemonset(
        scene.app, {POOL_LABEL: scene.pool}, GATE_KEY, {"cpu": "50m", "memory": "32Mi"}
    )
    scene.apps.create_namespaced_daemon_set("default", agent)  # type: ignore[arg-type]
    stack.callback(scene.apps.delete_namespaced_daemon_set, scene.app, "default")
    pool = rules.pool(scene.pool)
    assert pool is not None
    nodepool = render_karpenter_nodepool(rules, pool)
    assert nodepool["spec"]["template"]["spec"]["startupTaints"] == [
        {"key": GATE_KEY, "value": "wait", "effect": "NoSchedule"}
    ]
    if not startup_taints:
        del nodepool["spec"]["template"]["spec"]["startupTaints"]
    scene.create_cluster_object("karpenter.sh", "v1", "nodepools", nodepool)
    scene.apps.create_namespaced_deployment("default", workload(scene.work, scene.pool))  # type: ignore[arg-type]
    stack.callback(scene.apps.delete_namespaced_deployment, scene.work, "default")
    return scene


def test_gates_in_startup_taints_get_exactly_one_node_lifted_by_its_init_pod(
    karpenter_plane: LocalControlPlane, unique_name: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        scene = start_scene(karpenter_plane, stack, unique_name, tmp_path, startup_taints=True)
        started = time.monotonic()
        [node] = wait_until(lambda: scene.nodes() or None, 120, "Karpenter launched a node")
        launched = time.monotonic()
        name = node.metadata.name
        assert GATE in taints_of(scene.core, name), "the node was born without the gate"
        init_pod = wait_until(
            lambda: next(
                (
                    p
                    for p in scene.pods(scene.app)
                    if p.spec.node_name == name and p.status.phase == "Running"
                ),
                None,
            ),
            120,
            "init pod running on the new node",
        )
        held_until = time.monotonic() + HOLD_SECONDS
        counts = []
        while time.monotonic() < held_until:  # init still working: the gate holds
            counts.append(len(scene.nodeclaims()))
            assert GATE in taints_of(scene.core, name)
            assert not any(p.spec.node_name for p in scene.pods(scene.work))
            time.sleep(1.0)
        assert set(counts) == {1}, f"NodeClaims while gated: {counts}"

        scene.core.patch_namespaced_pod(
            init_pod.metadata.name, "default", {"metadata": {"annotations": {DONE: "true"}}}
        )
        done = time.monotonic()
        wait_until(lambda: GATE not in taints_of(scene.core, name), 60, "gate lifted")
        lifted_at = time.monotonic()
        lifted = wait_for_event(scene.core, name, "NodegateUpdated")
        assert any(
            "init pod is Ready" in (e.message or "") or "gpu-init" in (e.message or "")
            for e in lifted
        )
        wait_until(
            lambda: (
                len([p for p in scene.pods(scene.work) if p.spec.node_name == name]) == REPLICAS
                or None
            ),
            60,
            "every workload pod bound to the one node",
        )
        bound_at = time.monotonic()
        settle_until = bound_at + 20.0
        while time.monotonic() < settle_until:  # and Karpenter adds nothing afterwards
            assert len(scene.nodeclaims()) == 1
            time.sleep(2.0)
        print(
            f"\nKarpenter, gate in startupTaints: node launched {launched - started:.1f}s after "
            f"the NodePool and workload; 1 NodeClaim during the {HOLD_SECONDS:.0f}s gated hold and "
            f"20s after; gate lifted {lifted_at - done:.1f}s after the init pod was marked done; "
            f"all {REPLICAS} pods bound {bound_at - lifted_at:.1f}s after the lift"
        )


def test_the_same_gate_left_out_of_startup_taints_measured(
    karpenter_plane: LocalControlPlane, unique_name: str, tmp_path: Path
) -> None:
    """A measurement, not an assertion: nodes and NodeClaims every 5 s for 2 minutes while the
    init is still working (the gate is never lifted during the window)."""
    with ExitStack() as stack:
        scene = start_scene(karpenter_plane, stack, unique_name, tmp_path, startup_taints=False)
        started = time.monotonic()
        seen_claims: set[str] = set()
        samples: list[tuple[float, int, int, int]] = []
        while (elapsed := time.monotonic() - started) < MEASURE_SECONDS:
            claims = scene.nodeclaims()
            seen_claims.update(claims)
            nodes = scene.nodes()
            gated = sum(1 for n in nodes if GATE in taints_of(scene.core, n.metadata.name))
            samples.append((elapsed, len(nodes), gated, len(claims)))
            time.sleep(SAMPLE_SECONDS)
        bound = sum(1 for p in scene.pods(scene.work) if p.spec.node_name)
        print("\nKarpenter, gate NOT in startupTaints (nodes born gated, init held):")
        print("  t(s)  nodes  gated  nodeclaims")
        for elapsed, nodes_now, gated_now, claims_now in samples:
            print(f"  {elapsed:5.0f}  {nodes_now:5d}  {gated_now:5d}  {claims_now:10d}")
        print(
            f"  NodeClaims created in {MEASURE_SECONDS:.0f}s: {len(seen_claims)}; max nodes at "
            f"once: {max(s[1] for s in samples)}; workload pods bound: {bound}/{REPLICAS}"
        )
        assert samples  # the measurement ran
