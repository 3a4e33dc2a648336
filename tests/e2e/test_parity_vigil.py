"""Vigil's own scenarios (Nextdoor/vigil `internal/controller/integration_test.go`: its cluster
of worker, GPU, ARM and stable nodes and seven DaemonSets) replayed on the real control plane
with the equivalent rule, `daemonSets: auto` in `mode: bootstrapOnly`: the real DaemonSet
controller, scheduler and kwok kubelets. A kubelet's NotReady is played by patching the pod's
status."""

from __future__ import annotations

from typing import Any

from tests.e2e.support.agent_scene import AGENT, Scene, scene

__all__ = ["scene"]  # the shared fixture, used by name
from tests.e2e.support.reconciler_fixtures import taints_of

VIGIL_RULE = f"""\
nodeAgents:
  - name: vigil
    match: {{labels: {{example.com/agents: POOL}}}}
    daemonSets: auto
    namespaces: [NAMESPACE]
    excludeDaemonSets: {{labels: {{vigil.dev/ignore: "true"}}}}
    taint: {{key: {AGENT[0]}, effect: {AGENT[1]}}}
    mode: bootstrapOnly
"""
ARCH = "kubernetes.io/arch"
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def arm_only() -> dict[str, Any]:
    term = {"matchExpressions": [{"key": ARCH, "operator": "In", "values": ["arm64"]}]}
    required = {"nodeSelectorTerms": [term]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


def test_vigils_cluster_each_node_waits_for_the_daemon_sets_that_run_there_and_no_other(
    scene: Scene,
) -> None:
    """worker waits for kube-proxy, node-exporter, aws-cni (not gpu-driver, arm-monitor, the
    excluded ignored-ds); gpu for kube-proxy, node-exporter, gpu-driver (aws-cni does not
    tolerate its dedicated=gpu taint); arm for arm-monitor too; stable, born untainted, never
    gets the taint; a pod that regresses after the lift never brings it back."""
    pool = scene.pool
    scene.daemon_set("kube-proxy")
    scene.daemon_set("node-exporter", template={"tolerations": [{"operator": "Exists"}]})
    scene.daemon_set("aws-cni")
    gpu_toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu"}
    scene.daemon_set(
        "gpu-driver",
        node_selector={**pool, "accelerator": "nvidia"},
        template={"tolerations": [gpu_toleration]},
    )
    scene.daemon_set("arm-monitor", template={"affinity": arm_only()})
    scene.daemon_set("ignored-ds", labels={"vigil.dev/ignore": "true"})

    worker = scene.node("worker", {ARCH: "amd64"})
    gpu = scene.node("gpu", {ARCH: "amd64", "accelerator": "nvidia"}, taints=[DEDICATED])
    arm = scene.node("arm", {ARCH: "arm64"})
    stable = scene.node("stable", {ARCH: "amd64"}, tainted=False)

    # before the reconciler looks: one agent of each tainted node NotReady, and the ignored one
    proxy_on_worker = scene.ready_pod_of("kube-proxy", worker)
    driver_on_gpu = scene.ready_pod_of("gpu-driver", gpu)
    monitor_on_arm = scene.ready_pod_of("arm-monitor", arm)
    for pod in (proxy_on_worker, driver_on_gpu, monitor_on_arm):
        scene.fail(pod)
    scene.fail(scene.ready_pod_of("ignored-ds", worker))
    assert scene.pod_of("aws-cni", gpu) is None  # kept away by dedicated=gpu
    scene.fail(scene.ready_pod_of("kube-proxy", stable))

    scene.start(VIGIL_RULE)
    for node in (worker, gpu, arm):
        scene.stays(node, True, 1.0)
    assert not scene.tainted(stable)  # no taint: never added (Vigil skips the node)

    scene.recover(proxy_on_worker)  # ignored-ds still NotReady: excluded by label
    scene.wait_tainted(worker, False)
    scene.recover(driver_on_gpu)  # aws-cni has no pod there and is not waited for
    scene.wait_tainted(gpu, False)
    assert scene.tainted(arm)
    scene.recover(monitor_on_arm)
    scene.wait_tainted(arm, False)

    scene.fail(scene.ready_pod_of("aws-cni", worker))  # Vigil's TestLifecycle_PodRegresses
    scene.stays(worker, False, 1.5)
    assert not scene.tainted(stable)
    assert ("dedicated", "NoSchedule") in taints_of(scene.core, gpu)  # other taints kept
