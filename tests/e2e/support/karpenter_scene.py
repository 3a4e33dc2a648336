"""One Karpenter experiment's scene: a NodePool nodegate renders, nodes born gated, the init
DaemonSet and a pending workload, on a control plane running Karpenter's kwok provider. Shared by
the e2e test (gate in startupTaints) and the bench's measurement (gate left out of them)."""

from __future__ import annotations

import json
import textwrap
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.bootstrap.karpenter import render_karpenter_nodepool
from nodegate.core.rules.loader import parse_rules
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.karpenter import KWOK_NODE_CLASS
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import HEADER, alone, configmap_putter, init_daemonset
from tests.e2e.support.reconciler_process import running_reconciler

GATE_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/gpu-init"
GATE = (GATE_KEY, "NoSchedule")
POOL_LABEL = "example.com/pool"
DONE = "example.com/init-done"
POD_IMAGE = "registry.k8s.io/pause:3.10"
REPLICAS = 3
HOLD_SECONDS = 20.0
"""How long the init 'works' before it marks its pod done: the gated window Karpenter sees."""


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


def born_gated(core: k8s_client.CoreV1Api, nodepool: str) -> bool:
    """Whether a Node of `nodepool` created now is born with the gate: a server-side dry run
    (admission runs, nothing is stored, so neither Karpenter nor the reconciler sees it)."""
    canary = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"canary-{nodepool}"[:63],
            "labels": {"karpenter.sh/nodepool": nodepool},
        },
    }
    admitted: Any = core.create_node(canary, dry_run="All", _preload_content=False)  # type: ignore[arg-type]
    taints = json.loads(admitted.data).get("spec", {}).get("taints") or []
    return any((t.get("key"), t.get("effect")) == GATE for t in taints)


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
    stack.enter_context(running_reconciler(plane.kubeconfig_path, tmp_path, *alone(ref)))
    policy, binding = born_gated_policy(scene.pool)
    scene.create_cluster_object(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies", policy
    )
    scene.create_cluster_object(
        "admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings", binding
    )
    wait_until(
        lambda: born_gated(scene.core, scene.pool),
        60,
        "the born-gated policy in force (the API server loads new policies asynchronously)",
    )
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
