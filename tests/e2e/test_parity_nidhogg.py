"""nidhogg's own scenarios (uswitch/nidhogg and pelotech/nidhogg: `pkg/nidhogg/handler_test.go`,
their READMEs) replayed on the real control plane through `nodegate migrate nidhogg`: the
converted rules, deployed as they are printed, with the real DaemonSet controller, scheduler and
kwok kubelets. A kubelet's NotReady is played by patching the pod's status."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from nodegate.cli.main import app as nodegate
from nodegate.core.rules.loader import parse_rules
from nodegate.localcluster.nodes import wait_until
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.nidhogg import convert_nidhogg
from tests.e2e.support.agent_scene import Scene, agent_daemon_set, scene
from tests.e2e.support.reconciler_fixtures import TIMEOUT, node_events, read_node

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


# --- pelotech's Helm chart default: no nodeSelector, each DaemonSet's own --------------------

GPU_LABEL = {"example.com/gpu": "true"}
READY_SINCE = "nidhogg.uswitch.com/ready-since"


def chart_default_config(scene: Scene) -> str:
    """pelotech's chart (charts/nidhogg): values.yaml's `configuration` has no nodeSelector and
    `taintRemovalDelayInSeconds: 5`, written as config.json by templates/configmap.yaml
    (`toJson`); the user lists a log agent on every node and a GPU agent on GPU nodes."""
    names = ("fluentd", "gpu-agent")
    daemon_sets = [{"name": name, "namespace": scene.namespace} for name in names]
    return json.dumps({"daemonsets": daemon_sets, "taintRemovalDelayInSeconds": 5})


def migrated(scene: Scene, daemon_sets: list[dict[str, Any]], *flags: str) -> str:
    """`nodegate migrate nidhogg --daemon-sets FILE config.json`, the DaemonSets in FILE as
    `kubectl get ds -A -o yaml` prints them (a List; its items with kind and apiVersion)."""
    listed = [{"apiVersion": "apps/v1", "kind": "DaemonSet", **d} for d in daemon_sets]
    files = Path(scene.tmp_path)
    (files / "ds.yaml").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": listed})
    )
    (files / "config.json").write_text(chart_default_config(scene))
    command = ["migrate", "nidhogg", "--daemon-sets", str(files / "ds.yaml"), *flags]
    result = CliRunner().invoke(nodegate, [*command, str(files / "config.json")])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def cluster_daemon_sets(scene: Scene) -> list[dict[str, Any]]:
    """The test's DaemonSets as the API server lists them (raw JSON, as kubectl reads them)."""
    response: Any = scene.apps.list_namespaced_daemon_set(scene.namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def agents_both_tolerate(scene: Scene) -> dict[str, Any]:
    """Each agent tolerates both nidhogg taints (nidhogg's README: every pod that should run
    on a tainted node), so neither keeps the other's pod away on a node born with both."""
    keys = (taint_of(scene, "fluentd")[0], taint_of(scene, "gpu-agent")[0])
    return {"tolerations": [{"key": key, "operator": "Exists"} for key in keys]}


def born_node(
    scene: Scene, rules_text: str, suffix: str, labels: dict[str, str]
) -> tuple[str, set[tuple[str, str]]]:
    """A node born with the taints the printed rules give it at registration (the webhook
    settings printed with them: each rule whose match selects the node), and those taints."""
    full = {**scene.pool, **labels}
    born = [r.taint for r in parse_rules(rules_text).node_agents if r.born_with(full)]
    taints = [{"key": taint.key, "effect": taint.effect} for taint in born]
    return scene.node(suffix, labels, tainted=False, taints=taints), {t.identity for t in born}


def said_of(scene: Scene, node: str, taint: tuple[str, str]) -> list[str]:
    """What the reconciler's Events on the node say of the taint (each add and removal)."""
    events = node_events(scene.core, node)
    return [e.message for e in events if f"{taint[0]}:{taint[1]}" in (e.message or "")]


def test_the_chart_default_config_migrated_taints_each_daemon_set_only_on_the_nodes_it_selects(
    scene: Scene,
) -> None:
    """No nodeSelector (the chart's default): nidhogg taints, for each DaemonSet, the nodes its
    own nodeSelector selects. Migrated with the DaemonSets as the cluster has them, a GPU
    agent's taint goes on GPU nodes only, and the log agent's on every node: a CPU node never
    carries the GPU agent's taint, born or later, not even when nidhogg's other taint is put
    back there; the GPU node's taint comes back at once when its agent fails."""
    fluentd, gpu = taint_of(scene, "fluentd"), taint_of(scene, "gpu-agent")
    tolerations = agents_both_tolerate(scene)
    scene.daemon_set("fluentd", tolerate=False, template=tolerations)
    gpu_selector = {**scene.pool, **GPU_LABEL}
    scene.daemon_set("gpu-agent", tolerate=False, node_selector=gpu_selector, template=tolerations)
    listed = cluster_daemon_sets(scene)
    rules_text = migrated(scene, listed)
    scene.start_file(rules_text)

    cpu, cpu_born = born_node(scene, rules_text, "cpu", {})
    gpu_node, gpu_born = born_node(scene, rules_text, "gpu", GPU_LABEL)
    assert (cpu_born, gpu_born) == ({fluentd}, {fluentd, gpu})

    scene.ready_pod_of("fluentd", cpu)
    scene.ready_pod_of("fluentd", gpu_node)
    gpu_pod = scene.ready_pod_of("gpu-agent", gpu_node)
    for node in (cpu, gpu_node):
        scene.wait_tainted(node, False, taint=fluentd)
    scene.wait_tainted(gpu_node, False, taint=gpu)
    assert scene.pod_of("gpu-agent", cpu) is None  # its nodeSelector keeps it off the CPU node

    scene.fail(gpu_pod)  # the GPU agent fails: its taint is back at once (for: 0s), there only
    scene.wait_tainted(gpu_node, True, taint=gpu)
    assert not scene.tainted(gpu_node, fluentd)
    scene.fail(scene.ready_pod_of("fluentd", cpu))  # nidhogg's other taint comes back ...
    scene.wait_tainted(cpu, True, taint=fluentd)
    scene.stays(cpu, False, 1.0, taint=gpu)  # ... the GPU agent's never comes with it
    scene.recover(gpu_pod)
    scene.wait_tainted(gpu_node, False, taint=gpu)
    # (the Events do say what was done on the node: sent after the writes they tell of)
    wait_until(lambda: said_of(scene, cpu, fluentd), TIMEOUT, "the fluentd taint's Events")
    assert said_of(scene, cpu, gpu) == []  # never added nor removed there in its whole life


def test_the_ready_annotation_is_written_as_nidhogg_did_when_a_node_first_has_none_of_its_taints(
    scene: Scene,
) -> None:
    """`--ready-annotation pelotech`: `<taintNamePrefix>/ready-since`, in nidhogg's format,
    once the node carries none of the rules' taints (a GPU node: both agents Ready), never
    before, and never changed afterwards (its agent failing and recovering)."""
    fluentd, gpu = taint_of(scene, "fluentd"), taint_of(scene, "gpu-agent")
    tolerations = agents_both_tolerate(scene)
    scene.daemon_set("fluentd", tolerate=False, template=tolerations)
    gpu_selector = {**scene.pool, **GPU_LABEL}
    later = agent_daemon_set("gpu-agent", gpu_selector, tolerate=False, max_unavailable=1)
    later["metadata"]["namespace"] = scene.namespace
    later["spec"]["template"]["spec"].update(tolerations)
    listed = cluster_daemon_sets(scene)
    rules_text = migrated(scene, [*listed, later], "--ready-annotation", "pelotech")
    scene.start_file(rules_text)

    gpu_node, _ = born_node(scene, rules_text, "gpu", GPU_LABEL)
    scene.ready_pod_of("fluentd", gpu_node)
    scene.wait_tainted(gpu_node, False, taint=fluentd)
    assert scene.tainted(gpu_node, gpu)  # the GPU agent is not deployed yet
    assert READY_SINCE not in annotations_of(scene, gpu_node)

    scene.apps.create_namespaced_daemon_set(scene.namespace, later)  # type: ignore[arg-type]
    gpu_pod = scene.ready_pod_of("gpu-agent", gpu_node)
    scene.wait_tainted(gpu_node, False, taint=gpu)
    written = annotations_of(scene, gpu_node)[READY_SINCE]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written)  # 2006-01-02T15:04:05Z

    scene.fail(gpu_pod)
    scene.wait_tainted(gpu_node, True, taint=gpu)
    scene.recover(gpu_pod)
    scene.wait_tainted(gpu_node, False, taint=gpu)
    assert annotations_of(scene, gpu_node)[READY_SINCE] == written


def annotations_of(scene: Scene, node: str) -> dict[str, str]:
    annotations: dict[str, str] = read_node(scene.core, node)["metadata"].get("annotations") or {}
    return annotations
