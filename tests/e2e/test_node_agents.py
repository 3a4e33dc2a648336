"""Node agents (`nodeAgents`) on the real control plane with the DaemonSet controller, the scheduler
and kwok (which runs the pods of its nodes and makes them Ready at once): a node is born with the
agent taint, which goes once the agent's pod is Ready there and, in continuous mode, comes back
after the agent has not been Ready for `for`; a rolling update under the default `for` taints
no node. A kubelet's NotReady is played by patching the pod's status, as the kubelet would."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from typer.testing import CliRunner
from urllib3.exceptions import HTTPError

from nodegate.cli.main import app
from nodegate.core.objects.sightings_record import DEPARTED_KEY, SIGHTINGS_CONFIGMAP
from nodegate.localcluster.build import ensure_kubectl_built
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.agent_scene import AGENT, Scene, scene

__all__ = ["scene"]  # the shared fixture, used by name
from tests.e2e.support.reconciler_fixtures import read_node, settled, wait_for_event
from tests.e2e.support.reconciler_process import ReconcilerProcess
from tests.e2e.support.reconciler_process import test_state_namespace as state_namespace


def agent_rule(daemon_sets: str, extra: str = "") -> str:
    return f"""\
nodeAgents:
  - name: agent
    match: {{labels: {{example.com/agents: POOL}}}}
    daemonSets: {daemon_sets}
    taint: {{key: {AGENT[0]}, effect: {AGENT[1]}}}
{extra}"""


NAMED = "[{namespace: NAMESPACE, name: agent}]"


def test_a_node_born_with_the_agent_taint_keeps_it_until_the_agents_pod_is_ready(
    scene: Scene,
) -> None:
    scene.start(agent_rule(NAMED))
    node = scene.node("n")
    scene.stays(node, True, 2.0)  # no DaemonSet yet: "DaemonSet not found"
    scene.daemon_set("agent")
    scene.ready_pod_of("agent", node)
    ready = time.monotonic()
    lifted = scene.wait_tainted(node, False)
    print(f"agent Ready -> taint lifted: {lifted - ready:.2f}s (from the test's sight of Ready)")


def test_a_listed_daemon_set_that_does_not_tolerate_the_taint_is_reported_with_the_fix(
    scene: Scene,
) -> None:
    scene.daemon_set("agent", tolerate=False)
    scene.start(agent_rule(NAMED))
    [event] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentCannotRun")
    assert "does not tolerate the rule's taint" in event.message
    assert f"{{key: {AGENT[0]}, operator: Exists, effect: {AGENT[1]}}}" in event.message
    node = scene.node("n")
    scene.stays(node, True, 2.0)  # no pod is ever made there: the node keeps waiting


def reconciled_again_and_said(scene: Scene, process: ReconcilerProcess, nodes: list[str]) -> None:
    """Each node reconciled twice more as it stands (`settled`), then every Event queued until
    then sent: a report said again at those reconciles has been created or counted by now,
    not left in the reconciler's queue. One sender sends the Events in the order they were
    queued, so they are all out once the Event of a later write is: that of a new node of the
    pool (born without other taints), whose agent taint goes once its agent's pod is Ready."""
    for node in nodes:
        settled(process, scene.core, node)
    later = scene.node("later", taints=[])
    scene.wait_tainted(later, False)
    wait_for_event(scene.core, later, "NodegateUpdated")


DEDICATED = {"key": "dedicated", "value": "ci", "effect": "NoSchedule"}
"""The README's label taint: the log agent of docs/agents.md's recipe does not tolerate it."""


def test_a_listed_daemon_set_another_taint_keeps_away_is_not_waited_for_and_said_once(
    scene: Scene,
) -> None:
    """The DaemonSet controller never makes the agent's pod on a node with a taint it does not
    tolerate: by default (`cannotRun: skip`) the node does not wait for it, and the rules'
    source hears of it once for every such node."""
    scene.daemon_set("agent")
    process = scene.start(agent_rule(NAMED))
    nodes = [scene.node(f"ci-{i}", taints=[DEDICATED]) for i in range(3)]
    for node in nodes:
        scene.wait_tainted(node, False)
    [event] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentCannotRun")
    assert "does not tolerate taint dedicated=ci:NoSchedule" in event.message
    assert "cannotRun: skip" in event.message
    reconciled_again_and_said(scene, process, nodes)  # say nothing new (nor count it again)
    [again] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentCannotRun")
    assert (again.count or 1) == 1
    assert scene.pod_of("agent", nodes[0]) is None  # it was indeed never made there


def test_cannot_run_wait_holds_the_node_and_says_so_once(scene: Scene) -> None:
    scene.daemon_set("agent")
    process = scene.start(agent_rule(NAMED, "    cannotRun: wait\n"))
    node = scene.node("ci", taints=[DEDICATED])
    [event] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentCannotRun")
    assert "keep example.com/agent-not-ready:NoSchedule" in event.message
    reconciled_again_and_said(scene, process, [node])  # say nothing new (nor count it again)
    [again] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentCannotRun")
    assert (again.count or 1) == 1
    scene.stays(node, True, 3.0)


# --- a gate and an agent rule waiting for each other ---------------------------------------------

GATE = {"key": "example.com/booting", "effect": "NoSchedule"}
GATE_AND_AGENTS = """\
startupGates:
  - name: boot
    match: {labels: {example.com/agents: POOL}}
    taint: {key: example.com/booting, effect: NoSchedule}
    readyWhen: {pods: {namespace: NAMESPACE, selector: {app: boot-init}}}
""" + agent_rule("auto", "    namespaces: [NAMESPACE]\n")


def deadlocked_daemon_sets(scene: Scene) -> None:
    """The gate's init DaemonSet tolerates the gate, not the agent taint; the log agent the
    agent taint, not the gate (docs/agents.md, "Rules that wait for each other")."""
    tolerates_gate = [{"key": GATE["key"], "operator": "Exists"}]
    scene.daemon_set("boot-init", tolerate=False, template={"tolerations": tolerates_gate})
    scene.daemon_set("logs")


def test_a_gate_and_an_agent_rule_waiting_for_each_other_are_refused_by_validate(
    scene: Scene, tmp_path: Path
) -> None:
    """`nodegate validate rules.yaml --daemon-sets <(kubectl get ds -A -o yaml)`, on the
    DaemonSets as the API server keeps them."""
    deadlocked_daemon_sets(scene)
    listed = subprocess.run(
        [str(ensure_kubectl_built()), "get", "ds", "-A", "-o", "yaml"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": str(scene.plane.kubeconfig_path)},
    )
    (tmp_path / "ds.yaml").write_text(listed.stdout)
    (tmp_path / "rules.yaml").write_text(scene.rules(GATE_AND_AGENTS))

    result = CliRunner().invoke(
        app, ["validate", str(tmp_path / "rules.yaml"), "--daemon-sets", str(tmp_path / "ds.yaml")]
    )

    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "startupGates[0]: startupGates 'boot' and nodeAgents 'agent' wait for each other" in said
    assert (
        f"add to {scene.namespace}/boot-init's spec.template.spec.tolerations "
        f"{{key: {AGENT[0]}, operator: Exists, effect: {AGENT[1]}}}" in said
    )


def test_a_gate_and_an_agent_rule_waiting_for_each_other_are_reported_once_at_run_time(
    scene: Scene,
) -> None:
    """Neither pod is ever made: the DaemonSet controller keeps the init pod off the agent
    taint and the log agent off the gate. The rules' source hears of it once, however many
    nodes show it, with the toleration that ends it."""
    deadlocked_daemon_sets(scene)
    process = scene.start(GATE_AND_AGENTS)
    nodes = [scene.node(f"n{i}", taints=[GATE]) for i in range(2)]

    [event] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentDeadlock")
    assert "startupGates 'boot' and nodeAgents 'agent' wait for each other on node" in event.message
    assert (
        f"add to {scene.namespace}/boot-init's spec.template.spec.tolerations "
        f"{{key: {AGENT[0]}, operator: Exists, effect: {AGENT[1]}}}" in event.message
    )
    reconciled_again_and_said(scene, process, nodes)  # say nothing new
    [again] = wait_for_event(scene.core, scene.rules_configmap, "NodeAgentDeadlock")
    assert (again.count or 1) == 1
    for node in nodes:
        assert scene.tainted(node) and scene.tainted(node, (GATE["key"], GATE["effect"]))
        assert scene.pod_of("boot-init", node) is None and scene.pod_of("logs", node) is None


def test_continuous_puts_the_taint_back_after_for_and_lifts_it_when_ready_again(
    scene: Scene,
) -> None:
    scene.start(agent_rule(NAMED, "    for: 3s\n"))
    scene.daemon_set("agent")
    node = scene.node("n")
    pod = scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    # Taken before the write: the reconciler sees the failure no earlier, whereas the answer to
    # the write may come back late on a loaded machine (after the reconciler saw it).
    failed = time.monotonic()
    scene.fail(pod)
    scene.stays(node, False, failed + 2.0 - time.monotonic())  # within `for`
    tainted = scene.wait_tainted(node, True)
    assert tainted - failed >= 2.5  # `for` counts whole seconds on the server's clock
    print(f"agent NotReady -> taint back: {tainted - failed:.2f}s with for: 3s")
    scene.recover(pod)
    recovered = time.monotonic()
    lifted = scene.wait_tainted(node, False)
    print(f"agent Ready again -> taint lifted: {lifted - recovered:.2f}s")


REPLACED_FOR = 10.0
"""The `for` of test_a_deleted_agent_pod_replaced_within_for_does_not_taint, in seconds."""


def test_a_deleted_agent_pod_replaced_within_for_does_not_taint(scene: Scene) -> None:
    """The agent's pod deleted and its replacement Ready well within `for`: the node never
    carries the taint, at any version of it from the delete until `for` (and a margin) has
    passed since, and the reconciler has planned it with the replacement Ready. Every version is
    read back from the API server's watch, so a taint put on and lifted again between two looks
    is seen too (with `for` not waited for, the taint goes on at the delete and off once the
    replacement is Ready)."""
    process = scene.start(agent_rule(NAMED, f"    for: {REPLACED_FOR:.0f}s\n"))
    scene.daemon_set("agent")
    node = scene.node("n")
    pod = scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    before = _version(scene, node)
    deleted = time.monotonic()  # before the delete: the outage is no older than this
    scene.core.delete_namespaced_pod(pod.metadata.name, scene.namespace, grace_period_seconds=0)
    wait_until(
        lambda: (
            (p := scene.pod_of("agent", node)) is not None and p.metadata.uid != pod.metadata.uid
        ),
        30,
        "the replacement pod",
    )
    scene.ready_pod_of("agent", node)
    replaced = time.monotonic() - deleted
    # `for` counts whole seconds on the server's clock: 2 s spare keeps this replacement one
    # the rule must wait out, not one it may already have tainted for.
    assert replaced < REPLACED_FOR - 2, f"replacement Ready {replaced:.1f}s after the delete"
    print(f"agent pod deleted -> replacement Ready: {replaced:.2f}s (for: {REPLACED_FOR:.0f}s)")
    # Past the end of `for` counted from the delete: a count the replacement did not end
    # would have put the taint on by now.
    time.sleep(max(0.0, deleted + REPLACED_FOR + 2 - time.monotonic()))
    settled(process, scene.core, node)
    tainted = [v for v, taints in _versions_since(scene, node, before) if AGENT in taints]
    assert tainted == [], f"the agent taint was on {node} at resourceVersions {tainted}"


def test_bootstrap_only_never_puts_the_taint_back(scene: Scene) -> None:
    scene.start(agent_rule(NAMED, "    mode: bootstrapOnly\n"))
    scene.daemon_set("agent")
    node = scene.node("n")
    pod = scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    scene.fail(pod)
    scene.stays(node, False, 4.0)


BOOT = "6f1c2e0a-boot-1"
"""The machine's bootID: a kubelet restart keeps it, a reboot or another machine does not."""
SECOND = 1.2
"""Waited before a Node is deleted: a kubelet restart takes seconds, and a status write in the
second the Node was created counts for it (the API server stamps whole seconds)."""


def test_a_node_the_same_machine_registers_again_lifts_once_its_running_agent_is_ready(
    scene: Scene,
) -> None:
    """`kubectl delete node`, then a kubelet restart inside the pod GC's grace: the same
    machine, in the same boot, registers a new Node object of the name, born with the taint.
    Its agent's pod kept running, Ready and bound to the name; the DaemonSet controller makes
    no other, and its kubelet writes nothing new of it (a real kubelet does not either:
    docs/agents.md, "Registered again"). nodegate recorded the machine the pod was Ready on
    when the old Node went, so the taint goes."""
    scene.start(agent_rule(NAMED))
    scene.daemon_set("agent")
    node = scene.node("n", boot_id=BOOT)
    pod = scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    time.sleep(SECOND)

    scene.delete_node(node)
    scene.node("n", boot_id=BOOT)  # the same providerID: the same systemUUID
    scene.wait_tainted(node, False)

    again = scene.ready_pod_of("agent", node)
    registered: Any = scene.core.read_node(node)
    assert again.metadata.uid == pod.metadata.uid  # the same pod, not written since:
    assert _status_written(again) < registered.metadata.creation_timestamp


def test_a_new_machine_under_the_name_keeps_the_taint_until_its_own_pod_is_ready(
    scene: Scene,
) -> None:
    """Another machine registers the name while the old machine's pod is still Ready and bound
    to it: that pod says nothing of the new machine (another bootID and systemUUID), so the
    taint stays until the new machine's kubelet, which takes the pod bound to its name, has
    written it Ready."""
    scene.start(agent_rule(NAMED))
    scene.daemon_set("agent")
    node = scene.node("n", boot_id=BOOT)
    pod = scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    time.sleep(SECOND)

    scene.delete_node(node)
    scene.node("n", boot_id="0a9d44b1-boot-1", system_uuid="another-machine")
    scene.stays(node, True, 3.0)
    scene.fail(pod)  # the new kubelet starts the pod's containers: not Ready yet
    scene.stays(node, True, 1.0)
    scene.recover(pod)
    scene.wait_tainted(node, False)


def test_the_machine_a_departed_node_ran_survives_a_restart_before_it_registers_again(
    scene: Scene,
) -> None:
    """Crash-only: the record of the machine the agent was Ready on is kept in
    nodegate-sightings, so a reconciler started after the Node went still lifts it when the
    same machine registers again."""
    first = scene.start(agent_rule(NAMED))
    scene.daemon_set("agent")
    node = scene.node("n", boot_id=BOOT)
    scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)
    time.sleep(SECOND)

    scene.delete_node(node)
    wait_until(lambda: node in _departed(scene), 30, "the departure recorded")  # saved every 5 s
    first.stop()
    scene.node("n", boot_id=BOOT)
    scene.start(agent_rule(NAMED))
    scene.wait_tainted(node, False)


def _versions_since(scene: Scene, node: str, since: str) -> list[tuple[str, set[tuple[str, str]]]]:
    """Every version of the Node written after resourceVersion `since`, up to the one read now,
    with its taints (key, effect): the API server's watch replays each one, none skipped."""
    last = _version(scene, node)
    versions: list[tuple[str, set[tuple[str, str]]]] = []
    stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(  # type: ignore[no-untyped-call]
        scene.core.list_node,
        field_selector=f"metadata.name={node}",
        resource_version=since,
        timeout_seconds=30,
    ):
        seen: Any = event["object"]
        taints = {(t.key, t.effect) for t in seen.spec.taints or ()}
        versions.append((seen.metadata.resource_version, taints))
        if seen.metadata.resource_version == last:
            stream.stop()  # type: ignore[no-untyped-call]
    assert versions and versions[-1][0] == last, f"the watch of {node} ended before {last}"
    return versions


def _version(scene: Scene, node: str) -> str:
    return str(read_node(scene.core, node)["metadata"]["resourceVersion"])


def _status_written(pod: Any) -> Any:
    """The API server's stamp on the pod's last status write."""
    return max(
        entry.time for entry in pod.metadata.managed_fields or () if entry.subresource == "status"
    )


def _departed(scene: Scene) -> str:
    """The record of departed Nodes, as stored (empty when there is none yet)."""
    try:
        record = scene.core.read_namespaced_config_map(
            SIGHTINGS_CONFIGMAP, state_namespace(scene.plane.kubeconfig_path)
        )
    except ApiException as err:
        if err.status == 404:
            return ""
        raise
    return str((record.data or {}).get(DEPARTED_KEY) or "")


def test_auto_follows_a_daemon_set_added_retargeted_and_deleted(scene: Scene) -> None:
    """`daemonSets: auto`: a new DaemonSet that runs on the node joins the set (its NotReady pod
    brings the taint back after `for`); retargeted away, it leaves (the taint goes); excluded by
    label, it never counts."""
    scene.start(
        agent_rule(
            "auto",
            "    for: 2s\n    excludeDaemonSets: {labels: {example.com/not-an-agent: 'true'}}\n",
        )
    )
    scene.daemon_set("agent")
    node = scene.node("n")
    scene.ready_pod_of("agent", node)
    scene.wait_tainted(node, False)

    scene.daemon_set("logs")
    logs = scene.ready_pod_of("logs", node)
    scene.fail(logs)
    scene.wait_tainted(node, True)  # the new DaemonSet counts

    scene.apps.patch_namespaced_daemon_set(
        "logs",
        scene.namespace,
        {"spec": {"template": {"spec": {"nodeSelector": {"example.com/elsewhere": "x"}}}}},
    )
    scene.wait_tainted(node, False, timeout=60)  # retargeted away: no longer waited for

    scene.daemon_set("debug")
    debug = scene.ready_pod_of("debug", node)
    scene.apps.patch_namespaced_daemon_set(
        "debug", scene.namespace, {"metadata": {"labels": {"example.com/not-an-agent": "true"}}}
    )
    scene.fail(debug)
    scene.stays(node, False, 4.0)  # excluded

    scene.apps.delete_namespaced_daemon_set("debug", scene.namespace)
    scene.apps.delete_namespaced_daemon_set("logs", scene.namespace)
    scene.stays(node, False, 2.0)


def test_a_rolling_update_over_ten_nodes_taints_none_under_the_default_for(scene: Scene) -> None:
    """maxUnavailable 1: each node's pod is deleted and replaced in turn; with the default `for`
    (2m) no node leaves scheduling, checked on every taint change throughout."""
    scene.start(agent_rule(NAMED))
    scene.daemon_set("agent", max_unavailable=1)
    nodes = [scene.node(f"n{i}") for i in range(10)]
    first = {node: scene.ready_pod_of("agent", node).metadata.uid for node in nodes}
    for node in nodes:
        scene.wait_tainted(node, False, timeout=60)

    seen: list[str] = []
    looks: list[float] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=_watch_taints, args=(scene, nodes, seen, looks, stop), daemon=True
    )
    watcher.start()
    wait_until(lambda: looks, 30, "the watcher's first look")  # before the update starts
    scene.apps.patch_namespaced_daemon_set(
        "agent",
        scene.namespace,
        {"spec": {"template": {"metadata": {"annotations": {"example.com/rev": "2"}}}}},
    )

    def replaced() -> bool:
        return all(
            (p := scene.pod_of("agent", node)) is not None
            and p.metadata.uid != first[node]
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
            for node in nodes
        )

    started = time.monotonic()
    wait_until(replaced, 120, "every node's pod replaced and Ready")
    done = time.monotonic()
    print(f"rollout over 10 nodes (maxUnavailable 1): {done - started:.1f}s")
    time.sleep(1.0)
    # The window ends with a whole look begun after the rollout was seen done (a loaded machine
    # may take longer than the second above between two looks).
    wait_until(lambda: looks[-1] > done + 1.0, 30, "a look at the taints after the rollout")
    stop.set()
    watcher.join(5)
    assert seen == [], f"the update began at monotonic {started:.1f}, was seen done at {done:.1f}"


def _watch_taints(
    scene: Scene, nodes: list[str], seen: list[str], looks: list[float], stop: threading.Event
) -> None:
    """Every look at the nodes that found the agent taint on one (`seen`: the node and when),
    and when each look began (`looks`); an answer the API server fails to give on a loaded
    machine is asked for again, not the end of the watch."""
    watched = set(nodes)
    while not stop.is_set():
        began = time.monotonic()
        try:
            listed: list[Any] = scene.core.list_node(label_selector=_selector(scene.pool)).items
        except (ApiException, HTTPError):
            time.sleep(0.1)
            continue
        for node in listed:
            if node.metadata.name in watched and any(
                (t.key, t.effect) == AGENT for t in node.spec.taints or ()
            ):
                seen.append(f"{node.metadata.name} (look begun at monotonic {began:.1f})")
        looks.append(began)
        time.sleep(0.1)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())
