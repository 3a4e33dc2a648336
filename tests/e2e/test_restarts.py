"""A restart or a failover changes nothing a user can see: while a rules update is held, the
rules that were in force stay in force (put back from the status record) and the update stays
held; inside an eviction budget's window, what was spent stays spent (the eviction ledger).

Reproduces issue 42's first case: rules R1 (a startup gate, a label taint on 3 of 4 nodes) are
in force; R2 drops the label rule, would untaint 75 % of the nodes and is held by the
blast-radius guard. The leader is then stopped (SIGTERM) and a new process leads: a restart of
the only replica, or a failover to a standby that was running beside it. Before the fix the new
leader had nothing in force (generation 0): gates were no longer lifted and new nodes got nothing.
"""

from __future__ import annotations

import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.objects.status_record import STATUS_CONFIGMAP, ReconcilerStatus, decode_status
from nodegate.defaults.names import DEFAULT_LEASE
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import mark_pod_ready, set_node_condition, wait_until
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    gate_init_pod,
    put_rules_in,
    status_in,
    taints_of,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

TEAM = "restart.example.com/team"
GATE = ("restart.example.com/init", "NoSchedule")
READY = "restart.example.com/ready"


def rules(name: str, *, team_rule: bool) -> str:
    team = textwrap.dedent(
        f"""\
        labelTaints:
          - name: team
            match: {{labels: {{{TEAM}: {name}}}}}
            taint: {{key: {TEAM}, value: {name}, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    gate = textwrap.dedent(
        f"""\
        startupGates:
          - name: warmup
            match: {{labels: {{restart.example.com/gated: {name}}}}}
            taint: {{key: {GATE[0]}, value: wait, effect: {GATE[1]}}}
            readyWhen:
              pods: {{namespace: default, selector: {{app: init-{name}}}}}
            timeout: 30m
        """
    )
    return HEADER + (team if team_rule else "") + gate


HELD_AT_ANY_SIZE = "--max-untaint-share=0.01"
"""The control plane is shared, so its node count is whatever other tests left: untainting the
3 team nodes is over this share of it at any count a test session reaches, so R2 is held."""


class Scene:
    """The test's namespace (rules ConfigMap, Lease, status record) and its reconcilers."""

    def __init__(
        self,
        core_v1: k8s_client.CoreV1Api,
        plane: LocalControlPlane,
        namespace: str,
        tmp_path: Path,
        stack: ExitStack,
    ) -> None:
        self.core_v1 = core_v1
        self.plane = plane
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.stack = stack

    def put_rules(self, text: str) -> None:
        put_rules_in(self.core_v1, self.namespace, text)

    def replica(self, *flags: str, wait_ready: bool = True) -> ReconcilerProcess:
        return self._start(
            f"--rules-configmap={self.namespace}/rules", *flags, wait_ready=wait_ready
        )

    def preview(self, rules_text: str, identity: str) -> ReconcilerProcess:
        """`nodegate reconcile --dry-run` of `rules_text` (a file), pointed at the installation
        as docs/reconciler.md shows: its state namespace, its Lease, election on (the default),
        the share check off so that its rules take effect in it at once."""
        rules_file = self.tmp_path / f"{identity}.yaml"
        rules_file.write_text(rules_text)
        return self._start(
            f"--rules-file={rules_file}",
            "--dry-run",
            "--max-untaint-share=1",
            f"--lease-identity={identity}",
        )

    def _start(self, *flags: str, wait_ready: bool = True) -> ReconcilerProcess:
        args = (
            *flags,
            f"--lease-namespace={self.namespace}",
            f"--state-namespace={self.namespace}",
            "--lease-duration-seconds=4",
            "--renew-deadline-seconds=3",
            "--retry-period-seconds=1",
        )
        return self.stack.enter_context(
            running_reconciler(
                self.plane.kubeconfig_path, self.tmp_path, *args, wait_ready=wait_ready
            )
        )

    def status(self) -> tuple[int, str | None, str | None]:
        return status_in(self.core_v1, self.namespace)

    def init_pod(self, name: str, node: str) -> str:
        return gate_init_pod(self.core_v1, self.stack, node, f"init-{name}", GATE[0])


@pytest.fixture
def scene(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[Scene]:
    namespace = unique_name[:63].rstrip("-")
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": namespace}))
    with ExitStack() as stack:
        yield Scene(core_v1, control_plane, namespace, tmp_path, stack)
    core_v1.delete_namespace(namespace)


def leader_of(replicas: list[ReconcilerProcess]) -> ReconcilerProcess:
    return wait_until(
        lambda: next((r for r in replicas if r.metric("nodegate_is_leader") == 1), None),
        TIMEOUT,
        "a leader",
    )


@pytest.mark.parametrize("how", ["restart", "failover"])
def test_a_new_leader_keeps_the_rules_in_force_while_an_update_is_held(
    how: str, scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    name = scene.namespace
    r1, r2 = rules(name, team_rule=True), rules(name, team_rule=False)
    scene.put_rules(r1)
    replicas = [scene.replica(HELD_AT_ANY_SIZE)]
    if how == "failover":
        replicas.append(scene.replica(HELD_AT_ANY_SIZE))
    wait_until(lambda: scene.status()[0] == 1, TIMEOUT, "R1 in force")
    team = [make_node(f"team-{i}", labels={TEAM: name}) for i in range(3)]
    make_node("other")
    for node in team:
        wait_for_taints(core_v1, node, lambda t: (TEAM, "NoSchedule") in t)

    scene.put_rules(r2)
    wait_until(lambda: scene.status()[2] == rules_digest(r2), TIMEOUT, "R2 held")

    leader = leader_of(replicas)
    leader.stop()
    replicas.remove(leader)
    if how == "restart":
        replicas.append(scene.replica(HELD_AT_ANY_SIZE, wait_ready=False))
    new_leader = leader_of(replicas)
    wait_until(new_leader.is_ready, TIMEOUT, "the new leader ready")

    assert new_leader.get("/readyz") == (200, "ok (rules generation 1)\n")
    assert scene.status() == (1, rules_digest(r1), rules_digest(r2))
    fresh = make_node("team-new", labels={TEAM: name})
    wait_for_taints(core_v1, fresh, lambda t: (TEAM, "NoSchedule") in t)
    gated = make_node(
        "gated",
        labels={"restart.example.com/gated": name},
        taints=[{"key": GATE[0], "value": "wait", "effect": GATE[1]}],
    )
    mark_pod_ready(core_v1, scene.init_pod(name, gated), "default")
    wait_until(lambda: GATE not in taints_of(core_v1, gated), TIMEOUT, "the gate lifted")
    for node in team:  # the held update removed nothing
        assert (TEAM, "NoSchedule") in taints_of(core_v1, node)


NETWORK = ("example.com/network-problem", "NoExecute")
ONE_PER_TEN_MINUTES = HEADER + (
    "conditionTaints:\n"
    "  - name: network-problem\n"
    '    conditions: [{type: NetworkProblem, status: "True"}]\n'
    "    taint: {key: example.com/network-problem, effect: NoExecute}\n"
    "    evictionBudget: {window: 10m, cluster: {maxNodes: 1}}\n"
)


def _network(core_v1: k8s_client.CoreV1Api, names: list[str], status: str) -> None:
    for name in names:
        set_node_condition(
            core_v1, name, condition_type="NetworkProblem", status=status, reason="HealthCheck"
        )


def _stays_untainted(core_v1: k8s_client.CoreV1Api, names: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in names:
            assert NETWORK not in taints_of(core_v1, name), f"{name} tainted: budget overspent"
        time.sleep(0.2)


@pytest.mark.parametrize("how", ["restart", "failover"])
def test_a_new_leader_inside_the_window_spends_no_budget_again(
    how: str, scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    """Issue 42's second case: a rule's own budget of 1 node per 10 minutes taints a1; a1
    recovers and its taint is removed (its pods were evicted already); a2 and b2 wait. Before
    the ledger a restart inside the window tainted a2 3.1 s later: the spend was read back only
    from NoExecute taints still on nodes."""
    a1, a2, b2 = (make_node(suffix) for suffix in ("a1", "a2", "b2"))
    scene.put_rules(ONE_PER_TEN_MINUTES)
    replicas = [scene.replica()]
    if how == "failover":
        replicas.append(scene.replica())
    first = leader_of(replicas)
    _network(core_v1, [a1], "True")
    wait_for_taints(core_v1, a1, lambda t: NETWORK in t)
    _network(core_v1, [a1], "False")
    wait_for_taints(core_v1, a1, lambda t: NETWORK not in t)
    _network(core_v1, [a2, b2], "True")
    wait_until(
        lambda: first.metric("nodegate_evictions_waiting", rule="network-problem") == 2,
        TIMEOUT,
        "a2 and b2 waiting",
    )

    first.stop()
    replicas.remove(first)
    if how == "restart":
        replicas.append(scene.replica(wait_ready=False))
    second = leader_of(replicas)

    wait_until(
        lambda: second.metric("nodegate_evictions_waiting", rule="network-problem") == 2,
        TIMEOUT,
        "a2 and b2 waiting after the restart",
    )
    _stays_untainted(core_v1, [a2, b2], 6.0)


HOLD_SECONDS = 20
HELD = ("example.com/nic", "NoExecute")
NIC_FOR_20S = HEADER + (
    "conditionTaints:\n"
    "  - name: nic-broken\n"
    "    conditions: [{type: NetworkInterfaceCard, status: Kaput}]\n"
    f"    for: {HOLD_SECONDS}s\n"
    "    taint: {key: example.com/nic, value: broken, effect: NoExecute}\n"
)


@pytest.mark.parametrize("how", ["restart", "failover"])
def test_a_for_hold_under_way_is_not_restarted_by_a_new_leader(
    how: str, scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    """Issue 43's third build item: the first sight behind a `for` survives a restart and a
    failover (nodegate-sightings), so the taint comes `for` after the first leader saw the
    condition, not `for` after the new leader did."""
    node = make_node("nic")
    scene.put_rules(NIC_FOR_20S)
    replicas = [scene.replica()]
    if how == "failover":
        replicas.append(scene.replica())
    first = leader_of(replicas)
    written = time.monotonic()
    set_node_condition(
        core_v1, node, condition_type="NetworkInterfaceCard", status="Kaput", reason="E2E"
    )
    wait_until(lambda: time.monotonic() - written > HOLD_SECONDS / 2, TIMEOUT, "half the hold")
    assert HELD not in taints_of(core_v1, node)

    first.stop()
    replicas.remove(first)
    if how == "restart":
        replicas.append(scene.replica(wait_ready=False))
    leader_of(replicas)
    wait_for_taints(core_v1, node, lambda t: HELD in t, timeout=2 * HOLD_SECONDS)
    held = time.monotonic() - written

    print(f"tainted {held:.1f}s after the condition ({how} at {HOLD_SECONDS / 2:.0f}s)")
    assert HOLD_SECONDS <= held < HOLD_SECONDS + 6  # a new count would end past 1.5 * hold


def retiring_rules(name: str, *, with_retired: bool) -> str:
    kept = textwrap.dedent(
        f"""\
        labelTaints:
          - name: kept
            match: {{labels: {{restart.example.com/kept: {name}}}}}
            taint: {{key: restart.example.com/kept, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    retired = (
        "  - name: retired\n"
        f"    match: {{labels: {{restart.example.com/retired: {name}}}}}\n"
        f"    taint: {{key: {RETIRED[0]}, effect: {RETIRED[1]}}}\n"
        "    nodeMayLift: true\n"
    )
    return HEADER + kept + (retired if with_retired else "")


RETIRED = ("restart.example.com/retired", "NoSchedule")


def test_a_rule_deleted_before_a_restart_still_cleans_up_after_itself(
    scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    """The taint history outlives the process: a node that shows up after the restart carrying
    the deleted rule's taint, and claiming it as nodegate's (a node that was unreachable while
    the rule was deleted, an image of an old node), is cleaned up by the new process, which
    never had that rule in force."""
    name = scene.namespace
    bystanders = [make_node(f"by-{i}") for i in range(3)]  # the update removes 1 of 4: applied
    scene.put_rules(retiring_rules(name, with_retired=True))
    first = scene.replica()
    tainted = make_node("once", labels={RETIRED[0]: name})
    wait_for_taints(core_v1, tainted, lambda t: RETIRED in t)
    scene.put_rules(retiring_rules(name, with_retired=False))
    wait_for_taints(core_v1, tainted, lambda t: RETIRED not in t)
    first.stop()

    scene.replica(wait_ready=False)
    claimed = {"nodegate.dev/owned-taints": f"{RETIRED[0]}:{RETIRED[1]}"}
    late = make_node(
        "late", taints=[{"key": RETIRED[0], "effect": RETIRED[1]}], annotations=claimed
    )
    wait_for_taints(core_v1, late, lambda t: RETIRED not in t)
    assert all(RETIRED not in taints_of(core_v1, n) for n in bystanders)


AGENT = ("restart.example.com/agent-not-ready", "NoSchedule")


def agent_rules(namespace: str) -> str:
    return HEADER + (
        "nodeAgents:\n"
        "  - name: agent\n"
        f"    match: {{labels: {{restart.example.com/agents: {namespace}}}}}\n"
        f"    daemonSets: [{{namespace: {namespace}, name: agent}}]\n"
        f"    for: {HOLD_SECONDS}s\n"
        f"    taint: {{key: {AGENT[0]}, effect: {AGENT[1]}}}\n"
    )


def agent_pod_of(core_v1: k8s_client.CoreV1Api, namespace: str, node: str) -> str:
    """A DaemonSet (no controller runs here) and its pod on `node`, made as the DaemonSet
    controller makes them: owned by the DaemonSet's uid, labelled pod-template-generation."""
    apps = k8s_client.AppsV1Api(core_v1.api_client)
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}]},
    }
    daemon_set = apps.create_namespaced_daemon_set(
        namespace,
        {  # type: ignore[arg-type]
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "agent",
        "uid": daemon_set.metadata.uid,  # type: ignore[union-attr]
        "controller": True,
    }
    pod = {
        "metadata": {
            "name": f"agent-{node}"[:63],
            "labels": {"app": "agent", "pod-template-generation": "1"},
            "ownerReferences": [owner],
        },
        "spec": {**template["spec"], "nodeName": node},
    }
    core_v1.create_namespaced_pod(namespace, pod)  # type: ignore[arg-type]
    return str(pod["metadata"]["name"])


@pytest.mark.parametrize("how", ["restart", "failover"])
def test_a_node_agents_for_under_way_is_not_restarted_by_a_new_leader(
    how: str, scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    """A node agent's not-Ready episode, kept in nodegate-sightings like a condition's: the
    taint comes back `for` after the first leader saw the agent fail, not `for` after the new
    leader did."""
    node = make_node("agent", labels={"restart.example.com/agents": scene.namespace})
    pod = agent_pod_of(core_v1, scene.namespace, node)
    mark_pod_ready(core_v1, pod, scene.namespace)
    scene.put_rules(agent_rules(scene.namespace))
    replicas = [scene.replica()]
    if how == "failover":
        replicas.append(scene.replica())
    first = leader_of(replicas)
    failed = time.monotonic()
    core_v1.patch_namespaced_pod_status(
        pod, scene.namespace, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    wait_until(lambda: time.monotonic() - failed > HOLD_SECONDS / 2, TIMEOUT, "half of `for`")
    assert AGENT not in taints_of(core_v1, node)

    first.stop()
    replicas.remove(first)
    if how == "restart":
        replicas.append(scene.replica(wait_ready=False))
    leader_of(replicas)
    wait_for_taints(core_v1, node, lambda t: AGENT in t, timeout=2 * HOLD_SECONDS)
    held = time.monotonic() - failed

    print(f"agent taint back {held:.1f}s after the failure ({how} at {HOLD_SECONDS / 2:.0f}s)")
    assert HOLD_SECONDS <= held < HOLD_SECONDS + 6  # a new count would end past 1.5 * for


def lease_holders(core_v1: k8s_client.CoreV1Api, namespace: str, stop: threading.Event) -> set[str]:
    """Every holder of the installation's Lease seen until `stop` (read every 0.1 s)."""
    coordination = k8s_client.CoordinationV1Api(core_v1.api_client)
    seen: set[str] = set()
    while not stop.wait(0.1):
        try:
            lease = coordination.read_namespaced_lease(DEFAULT_LEASE, namespace)
        except ApiException as err:
            if err.status == 404:
                continue
            raise
        seen.add((lease.spec.holder_identity if lease.spec else None) or "")
    return seen


def record_of_rules(core_v1: k8s_client.CoreV1Api, namespace: str) -> tuple[ReconcilerStatus, str]:
    """What the status record says of the rules: all but who wrote it and when."""
    raw = core_v1.read_namespaced_config_map(STATUS_CONFIGMAP, namespace)
    status, text = decode_status(raw.data)
    return replace(status, writer="", writer_process="", updated_at=datetime.min), text


def test_a_preview_on_the_installation_never_leads_and_leaves_the_status_record_alone(
    scene: Scene, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    """Issue 56: a dry run of the held update, pointed at the installation (its namespace, its
    Lease, election on). Before, it took the Lease when the leader was replaced and led writing
    nothing, and it wrote its rules into the status record, which the next real leader put back
    in force: the held update was enforced."""
    name = scene.namespace
    r1, r2 = rules(name, team_rule=True), rules(name, team_rule=False)
    scene.put_rules(r1)
    leader = scene.replica(HELD_AT_ANY_SIZE)
    wait_until(lambda: scene.status()[0] == 1, TIMEOUT, "R1 in force")
    team = [make_node(f"team-{i}", labels={TEAM: name}) for i in range(3)]
    make_node("other")
    for node in team:
        wait_for_taints(core_v1, node, lambda t: (TEAM, "NoSchedule") in t)
    scene.put_rules(r2)
    wait_until(lambda: scene.status()[2] == rules_digest(r2), TIMEOUT, "R2 held")
    before = record_of_rules(core_v1, name)
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        holders = pool.submit(lease_holders, core_v1, name, stop)

        preview = scene.preview(r2, identity="preview")  # started: ready
        leader.stop()  # a rollout: the Lease is handed back, a new real process starts
        new_leader = scene.replica(HELD_AT_ANY_SIZE, wait_ready=False)
        wait_until(
            lambda: any(r.metric("nodegate_is_leader") == 1 for r in (new_leader, preview)),
            TIMEOUT,
            "a leader",
        )
        time.sleep(2)  # a Lease period more for the preview to (not) take over
        stop.set()
        seen = holders.result()

    assert "preview" not in seen and seen  # the Lease was read, and never the preview's
    assert preview.metric("nodegate_is_leader") == 0
    assert new_leader.metric("nodegate_is_leader") == 1
    wait_until(new_leader.is_ready, TIMEOUT, "the new leader ready")
    assert new_leader.get("/readyz") == (200, "ok (rules generation 1)\n")
    # R2 is in force in the preview: the record's write it would have made was withheld.
    wait_until(
        lambda: preview.get("/readyz") == (200, "ok (rules generation 2)\n"),
        TIMEOUT,
        "the preview planning with R2",
    )
    assert record_of_rules(core_v1, name) == before
    for node in team:  # the held update removed nothing
        assert (TEAM, "NoSchedule") in taints_of(core_v1, node)
    logs = preview.logs()
    assert '"dry run: reads the installation, writes none of it"' in logs
    assert f"ConfigMap {name}/{STATUS_CONFIGMAP}" in logs  # withheld, and said
