"""A new cluster where every node carries a NoExecute gate: the shipped objects still get the
reconciler running, and it lifts the gates (issue 27: both pods stayed Pending before). On the
rules ConfigMap the manifests know the gate; on NodeRules objects they are built without any
rules and the gate arrives as an object after them (a team's), tolerated for a while as any
NoExecute taint is (`unknownGateSeconds`).

The objects come from the one builder (`nodegate manifests`, Pulumi and Ansible use the same
function), applied as they are to the scheduling control plane: the controller-manager makes the
Deployment's pods, the real kube-scheduler binds them (or not) and its taint-eviction controller
evicts whatever does not tolerate a NoExecute taint; kwok plays the nodes' kubelets. kwok runs
no containers, so once a reconciler pod is bound its container's command runs here as a local
process, under the shipped ServiceAccount's token and with that pod's name, standing in for the
kubelet of the node it was bound to.
"""

from __future__ import annotations

import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import utils
from kubernetes.client.exceptions import ApiException

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import PLURAL
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from tests.e2e.support.reconciler_fixtures import init_daemonset, taints_of
from tests.e2e.support.reconciler_process import running_reconciler
from tests.e2e.support.shipped_manifests import (
    GROUP,
    VERSION,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
    wait_crd_established,
)

GATE = ("node.cilium.io/agent-not-ready", "NoExecute")
POD_IMAGE = "registry.k8s.io/pause:3.10"
SCHEDULED_WITHIN = 30.0
LIFTED_WITHIN = 60.0
HELD = 3.0
"""How long the reconciler pods must stay bound: the taint-eviction controller evicts a pod
that does not tolerate a NoExecute taint at once."""


def _rules(pool: str, init_app: str) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: nodegate.dev/v1
        kind: NodeRules
        startupGates:
          - name: network
            match: {{labels: {{example.com/pool: {pool}}}}}
            taint: {{key: {GATE[0]}, value: "true", effect: {GATE[1]}}}
            readyWhen:
              pods: {{namespace: default, selector: {{app: {init_app}}}}}
        """
    )


def _untolerating_pod(name: str, on_pool: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": on_pool,
            "containers": [{"name": "app", "image": POD_IMAGE}],
        },
    }


def _ignore_missing(call: Any, *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, **kwargs)
    except ApiException as err:
        if err.status != 404:
            raise


@dataclass(frozen=True)
class GatedCluster:
    """The shipped objects applied to a pool whose every node was born with the gate."""

    settings: DeploySettings
    deployment: dict[str, Any]
    nodes: list[str]
    waiting: str
    """A pod of the pool without the gate's toleration."""


@pytest.fixture(params=["configmap", "objects"])
def gated_cluster(
    request: pytest.FixtureRequest,
    scheduling_control_plane: LocalControlPlane,
    scheduling_core_v1: k8s_client.CoreV1Api,
) -> Iterator[GatedCluster]:
    plane, core = scheduling_control_plane, scheduling_core_v1
    apps = k8s_client.AppsV1Api(plane.client)
    rbac = k8s_client.RbacAuthorizationV1Api(plane.client)
    suffix = uuid.uuid4().hex[:6]
    pool, init_app, namespace = f"net-{suffix}", f"agent-{suffix}", f"nodegate-{suffix}"
    name = f"nodegate-reconciler-{suffix}"  # ClusterRole names are cluster-wide
    on_pool = {"example.com/pool": pool}
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": namespace,
            "name": name,
            "nodeSelector": on_pool,  # this test's nodes only; the cluster is shared
            "rulesSource": request.param,
        }
    )
    document = RulesDocument.parse(_rules(pool, init_app), "rules.yaml")
    on_objects = request.param == "objects"
    objects = build_manifests(None if on_objects else document, settings)
    nodes = [f"gated-{suffix}-{n}" for n in range(2)]
    gate = {"key": GATE[0], "value": "true", "effect": GATE[1]}
    waiting = f"untolerating-{suffix}"
    with ExitStack() as stack:
        for node in nodes:  # every node of the pool born gated: a new cluster, a pool from zero
            create_node(core, SimNode(name=node, labels=on_pool, taints=[gate], kwok=True))
            stack.callback(_ignore_missing, core.delete_node, node)
        stack.callback(_ignore_missing, rbac.delete_cluster_role, name)
        stack.callback(_ignore_missing, rbac.delete_cluster_role_binding, name)
        stack.callback(_ignore_missing, core.delete_namespace, namespace)
        for obj in objects:
            try:
                utils.create_from_dict(plane.client, obj)  # type: ignore[no-untyped-call]
            except utils.FailToCreateError as err:
                # The CRD is cluster-wide: another test on this control plane may have made it.
                if obj["kind"] != "CustomResourceDefinition" or err.api_exceptions[0].status != 409:
                    raise
        if on_objects:  # a team's object, after the installation
            wait_crd_established(plane.client)
            custom = k8s_client.CustomObjectsApi(plane.client)
            rules = document.as_object(f"gate-{suffix}")
            custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, rules)
            stack.callback(
                _ignore_missing,
                custom.delete_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                rules["metadata"]["name"],
            )
        daemonset = init_daemonset(init_app, on_pool, GATE[0])
        apps.create_namespaced_daemon_set("default", daemonset)  # type: ignore[arg-type]
        stack.callback(_ignore_missing, apps.delete_namespaced_daemon_set, init_app, "default")
        core.create_namespaced_pod("default", _untolerating_pod(waiting, on_pool))  # type: ignore[arg-type]
        stack.callback(
            _ignore_missing, core.delete_namespaced_pod, waiting, "default", grace_period_seconds=0
        )
        yield GatedCluster(settings, the_deployment(objects), nodes, waiting)


def test_every_node_gated_noexecute_the_shipped_reconciler_is_scheduled_and_lifts_the_gates(
    gated_cluster: GatedCluster,
    scheduling_control_plane: LocalControlPlane,
    scheduling_core_v1: k8s_client.CoreV1Api,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plane, core, scene = scheduling_control_plane, scheduling_core_v1, gated_cluster
    namespace, name = scene.settings.namespace, scene.settings.name
    nodes, waiting, deployment = scene.nodes, scene.waiting, scene.deployment
    selector = ",".join(
        f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
    )

    def bound_reconciler_pods() -> list[k8s_client.V1Pod]:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        return [p for p in pods if p.spec and p.spec.node_name in nodes]

    wait_until(
        lambda: len(bound_reconciler_pods()) == scene.settings.replicas,
        SCHEDULED_WITHIN,
        "both reconciler pods bound onto NoExecute-gated nodes",
    )
    time.sleep(HELD)  # not evicted by the taint-eviction controller either
    pods = bound_reconciler_pods()
    assert len(pods) == scene.settings.replicas
    assert all(GATE in taints_of(core, node) for node in nodes), "nobody lifts the gates yet"
    pending = core.read_namespaced_pod(waiting, "default")
    assert pending.spec is not None
    assert pending.spec.node_name is None, "a pod without the toleration was scheduled"

    # The kubelet of the node the first pod was bound to runs its container: here, a process.
    pod = pods[0]
    assert pod.metadata is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--http-port")]
    token = service_account_token(core, namespace, name)
    kubeconfig = service_account_kubeconfig(plane, token, tmp_path / "sa")
    monkeypatch.setenv("POD_NAMESPACE", namespace)  # as the downward API sets them
    monkeypatch.setenv("POD_NAME", str(pod.metadata.name))
    ran = time.monotonic()
    with running_reconciler(kubeconfig, tmp_path, *args) as reconciler:
        wait_until(
            lambda: all(GATE not in taints_of(core, node) for node in nodes),
            LIFTED_WITHIN,
            "the reconciler lifted every gate",
        )
        lifted = time.monotonic() - ran
        wait_until(
            lambda: bool(
                (p := core.read_namespaced_pod(waiting, "default")).spec and p.spec.node_name
            ),
            SCHEDULED_WITHIN,
            "the untolerating pod bound once the gates were lifted",
        )
        assert reconciler.metric("nodegate_errors_total") == 0
        # The shipped RBAC is least privilege (no record ConfigMaps for rules that persist no
        # labels) and the reconciler asks for nothing more: nothing is refused.
        refused = [line for line in reconciler.logs().splitlines() if "Forbidden" in line]
        assert refused == []
    print(f"gates lifted {lifted:.1f}s after the reconciler process started")
