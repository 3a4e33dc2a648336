"""nidhogg's own scenarios (uswitch/nidhogg and pelotech/nidhogg: `pkg/nidhogg/handler_test.go`,
their READMEs) replayed on the real control plane through `nodegate migrate nidhogg`: the
converted rules, deployed as they are printed, with the real DaemonSet controller, scheduler and
kwok kubelets. A kubelet's NotReady is played by patching the pod's status."""

from __future__ import annotations

from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.nidhogg import convert_nidhogg
from tests.e2e.support.agent_scene import Scene, scene

__all__ = ["scene"]  # the shared fixture, used by name

ROLE_NODE = "node-role.kubernetes.io/node"
ROLE_MASTER = "node-role.kubernetes.io/master"
POOL_KEY = "example.com/agents"


def nidhogg_config(scene: Scene) -> str:
    """uswitch's README example, on the test's own nodes: three selector strings (`key`,
    `!key`, `key in (...)`), ANDed, and two DaemonSets (pelotech's multiple-DaemonSet case)."""
    pool = scene.pool[POOL_KEY]
    return f"""\
nodeSelector:
  - "{ROLE_NODE}"
  - "!{ROLE_MASTER}"
  - "{POOL_KEY} in ({pool}, spare)"
daemonsets:
  - {{name: kiam, namespace: {scene.namespace}}}
  - {{name: fluentd, namespace: {scene.namespace}}}
"""


def taint_of(scene: Scene, daemon_set: str) -> tuple[str, str]:
    return (f"nidhogg.uswitch.com/{scene.namespace}.{daemon_set}", "NoSchedule")


def test_nidhogg_config_migrated_taints_each_daemon_set_apart_on_the_nodes_its_selector_matches(
    scene: Scene,
) -> None:
    """Each DaemonSet's taint while its pod on the node is missing or not Ready, put back at
    once (for: 0s, as nidhogg), lifted when Ready, one DaemonSet's never touching the other's;
    a master, a node of another pool and one without the node role never get one; a node that
    stops matching loses them (pelotech)."""
    kiam, fluentd = taint_of(scene, "kiam"), taint_of(scene, "fluentd")
    scene.start_file(to_yaml(convert_nidhogg(nidhogg_config(scene), "nidhogg.yaml")))
    worker = scene.node("worker", {ROLE_NODE: ""}, tainted=False)  # nidhogg: born untainted
    master = scene.node("master", {ROLE_NODE: "", ROLE_MASTER: ""}, tainted=False)
    no_role = scene.node("no-role", tainted=False)
    # outside the DaemonSets' pool too: no pod there ever, and still no taint
    other_pool = scene.node("other-pool", {ROLE_NODE: "", POOL_KEY: "other"}, tainted=False)
    # no pod yet: each DaemonSet's own taint, added after registration as nidhogg did
    scene.wait_tainted(worker, True, taint=kiam)
    scene.wait_tainted(worker, True, taint=fluentd)

    tolerations = [{"key": k, "operator": "Exists"} for k, _ in (kiam, fluentd)]
    for app in ("kiam", "fluentd"):
        scene.daemon_set(app, tolerate=False, template={"tolerations": tolerations})
    scene.ready_pod_of("kiam", worker)
    fluentd_pod = scene.ready_pod_of("fluentd", worker)
    scene.wait_tainted(worker, False, taint=kiam)
    scene.wait_tainted(worker, False, taint=fluentd)

    scene.fail(fluentd_pod)  # pelotech's TestCalculateTaintsWithMultipleDaemonsets
    scene.wait_tainted(worker, True, taint=fluentd)
    assert not scene.tainted(worker, kiam)
    scene.recover(fluentd_pod)
    scene.wait_tainted(worker, False, taint=fluentd)

    for node in (master, no_role):  # their pods run, the selector leaves them out
        scene.fail(scene.ready_pod_of("kiam", node))
    for node in (master, no_role, other_pool):
        scene.stays(node, False, 1.0, taint=kiam)
        assert not scene.tainted(node, fluentd)

    scene.fail(fluentd_pod)
    scene.wait_tainted(worker, True, taint=fluentd)
    scene.core.patch_node(worker, {"metadata": {"labels": {ROLE_MASTER: ""}}})
    scene.wait_tainted(worker, False, taint=fluentd)  # no longer matched: released
    scene.stays(worker, False, 1.0, taint=kiam)
