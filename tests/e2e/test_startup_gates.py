"""Startup gates on the real API server: born gated, lifted by the node's init pod, and only then
does work land. Most tests bind init pods themselves and mark them Ready as a kubelet would; the
first one runs the whole story with the scheduler, the DaemonSet controller and kwok."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import (
    SimNode,
    create_node,
    delete_node,
    mark_pod_ready,
    wait_until,
)
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    alone,
    configmap_putter,
    init_daemonset,
    node_events,
    read_node,
    taints_of,
    wait_for_event,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

GATE = ("startup.example.com/init", "NoSchedule")
GATE_TAINT = {"key": GATE[0], "value": "wait", "effect": GATE[1]}
POD_IMAGE = "registry.k8s.io/pause:3.10"
BOOT = "boot.gate.nodegate.dev/warmup"


def gate_rules(app: str, extra: str = "", pod_extra: str = "") -> str:
    return (
        HEADER
        + textwrap.dedent(
            f"""\
        startupGates:
          - name: warmup
            match: {{labels: {{example.com/pool: gpu}}}}
            taint: {{key: {GATE[0]}, value: wait, effect: {GATE[1]}}}
            readyWhen:
              pods: {{namespace: default, selector: {{app: {app}}}{pod_extra}}}
              annotation: example.com/ready=true
        """
        )
        + textwrap.indent(textwrap.dedent(extra), "    ")
    )


Start = Callable[..., ReconcilerProcess]


def start_reconciler(
    stack: ExitStack, plane: LocalControlPlane, tmp_path: Path, name: str
) -> Start:
    put = configmap_putter(k8s_client.CoreV1Api(plane.client), f"rules-{name}"[:63])

    def start(rules: str) -> ReconcilerProcess:
        ref = put(rules)
        args = alone(ref)
        return stack.enter_context(running_reconciler(plane.kubeconfig_path, tmp_path, *args))

    return start


@pytest.fixture
def gated(control_plane: LocalControlPlane, unique_name: str, tmp_path: Path) -> Iterator[Start]:
    with ExitStack() as stack:
        yield start_reconciler(stack, control_plane, tmp_path, unique_name)


@pytest.fixture
def cleanup(core_v1: k8s_client.CoreV1Api) -> Iterator[list[tuple[str, str]]]:
    """(kind, name) to delete afterwards: nodes, and pods in default."""
    created: list[tuple[str, str]] = []
    yield created
    for kind, name in created:
        try:
            if kind == "node":
                core_v1.delete_node(name)
            else:
                core_v1.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                raise


def gated_node(
    core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], name: str, **kwargs: Any
) -> str:
    create_node(
        core_v1,
        SimNode(name=name, labels={"example.com/pool": "gpu"}, taints=[GATE_TAINT], **kwargs),
    )
    cleanup.append(("node", name))
    return name


def init_pod(
    core_v1: k8s_client.CoreV1Api,
    cleanup: list[tuple[str, str]],
    name: str,
    node: str,
    app: str,
    annotations: dict[str, str] | None = None,
) -> str:
    """An init pod bound to `node` (as the DaemonSet controller binds its pods)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations or {}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": GATE[0], "operator": "Exists"}],
            "containers": [{"name": "init", "image": POD_IMAGE}],
        },
    }
    core_v1.create_namespaced_pod("default", body)  # type: ignore[arg-type]
    cleanup.append(("pod", name))
    return name


def gate_gone(core_v1: k8s_client.CoreV1Api, node: str) -> None:
    wait_until(lambda: GATE not in taints_of(core_v1, node), TIMEOUT, f"gate lifted on {node}")


def stays_gated(core_v1: k8s_client.CoreV1Api, node: str, seconds: float = 2.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert GATE in taints_of(core_v1, node)
        time.sleep(0.2)


def ungated_once(reconciler: ReconcilerProcess) -> None:
    """The lift's time to ungate is counted once: after the write (and its Event) returned, so
    not necessarily by the time the test sees the gate gone."""
    wait_until(
        lambda: reconciler.metric("nodegate_time_to_ungate_seconds_count", gate="warmup") == 1,
        TIMEOUT,
        "the time to ungate counted once",
    )


def test_the_init_pod_turning_ready_lifts_the_gate_and_records_when(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    app = f"init-{unique_name}"[:63]
    reconciler = gated(gate_rules(app))
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    pod = init_pod(core_v1, cleanup, f"{unique_name}-init", node, app)
    stays_gated(core_v1, node, 1.5)  # bound, not Ready yet
    mark_pod_ready(core_v1, pod, "default")
    gate_gone(core_v1, node)
    annotations = read_node(core_v1, node)["metadata"]["annotations"]
    assert annotations["completed.gate.nodegate.dev/warmup"].endswith("Z")
    ungated_once(reconciler)


def test_metrics_count_a_gated_node_per_pool_with_its_age_until_the_lift(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    pool = unique_name[:63]
    reconciler = gated(gate_rules(f"init-{unique_name}"[:63]))
    name = f"{unique_name}-n"
    labels = {"example.com/pool": "gpu", "nodegate.dev/pool": pool}
    create_node(core_v1, SimNode(name=name, labels=labels, taints=[GATE_TAINT]))
    cleanup.append(("node", name))

    wait_until(
        lambda: reconciler.metric("nodegate_gated_nodes", gate="warmup", pool=pool) == 1,
        TIMEOUT,
        "gated node counted",
    )
    first_age = reconciler.metric("nodegate_gate_oldest_seconds", gate="warmup", pool=pool)
    time.sleep(1.1)
    assert reconciler.metric("nodegate_gate_oldest_seconds", gate="warmup", pool=pool) > first_age
    assert reconciler.metric("nodegate_gated_share") > 0
    assert reconciler.metric("nodegate_nodes") >= 1
    # young: in the first age bucket, none past the alert's 10 minutes
    age = "nodegate_gated_node_age_seconds_bucket"
    assert reconciler.metric(age, le="60.0") == reconciler.metric(age, le="+Inf") >= 1

    core_v1.patch_node(name, {"metadata": {"annotations": {"example.com/ready": "true"}}})
    gate_gone(core_v1, node=name)
    wait_until(
        lambda: reconciler.metric("nodegate_gated_nodes", gate="warmup", pool=pool) == 0,
        TIMEOUT,
        "lifted node no longer counted",
    )


def test_annotation_only_mode_waits_for_the_pods_ready_annotation_not_its_readiness(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    app = f"init-{unique_name}"[:63]
    gated(
        gate_rules(
            app, pod_extra=", readyAnnotation: startup.k8s.io/ready=true, requireAnnotation: true"
        )
    )
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    pod = init_pod(core_v1, cleanup, f"{unique_name}-init", node, app)
    mark_pod_ready(core_v1, pod, "default")
    stays_gated(core_v1, node)
    core_v1.patch_namespaced_pod(
        pod, "default", {"metadata": {"annotations": {"startup.k8s.io/ready": "true"}}}
    )
    gate_gone(core_v1, node)


def test_the_nodes_ready_annotation_lifts_the_gate(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    gated(gate_rules(f"init-{unique_name}"[:63]))
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    stays_gated(core_v1, node, 1.0)
    core_v1.patch_node(node, {"metadata": {"annotations": {"example.com/ready": "true"}}})
    gate_gone(core_v1, node)


@pytest.mark.parametrize("action", ["lift", "keep"])
def test_a_gate_that_times_out_is_reported_and_kept_or_lifted(
    action: str,
    gated: Start,
    core_v1: k8s_client.CoreV1Api,
    cleanup: list[tuple[str, str]],
    unique_name: str,
) -> None:
    reconciler = gated(
        gate_rules(f"init-{unique_name}"[:63], extra=f"timeout: 3s\nonTimeout: {action}\n")
    )
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    [event] = wait_for_event(core_v1, node, "StartupGateTimedOut")
    assert event.type == "Warning"
    if action == "lift":
        gate_gone(core_v1, node)
    else:
        stays_gated(core_v1, node, 1.0)
    assert reconciler.metric("nodegate_gate_timeouts_total", gate="warmup", action=action) == 1


def test_min_hold_keeps_a_ready_node_gated_until_it_has_passed(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    gated(gate_rules(f"init-{unique_name}"[:63], extra="minHold: 4s\n"))
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    core_v1.patch_node(node, {"metadata": {"annotations": {"example.com/ready": "true"}}})
    gate_gone(core_v1, node)
    # Both as the server's clock says them (the node's creationTimestamp, the lift's record),
    # not as this process saw them: its answer to the node's creation may come late.
    metadata = read_node(core_v1, node)["metadata"]
    born = datetime.fromisoformat(metadata["creationTimestamp"])
    lifted = datetime.fromisoformat(metadata["annotations"]["completed.gate.nodegate.dev/warmup"])
    assert lifted - born >= timedelta(seconds=4), (born, lifted)


def set_boot_id(core_v1: k8s_client.CoreV1Api, node: str, boot_id: str) -> None:
    core_v1.patch_node_status(node, {"status": {"nodeInfo": {"bootID": boot_id}}})


def test_a_reboot_puts_the_gate_back_and_only_fresh_readiness_lifts_it_again(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    app = f"init-{unique_name}"[:63]
    gated(gate_rules(app, extra="regateOnReboot: true\n"))
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    set_boot_id(core_v1, node, "boot-1")
    pod = init_pod(core_v1, cleanup, f"{unique_name}-init", node, app)
    mark_pod_ready(core_v1, pod, "default")
    gate_gone(core_v1, node)

    time.sleep(1.1)  # the reboot happens in a later second than the pod's readiness
    set_boot_id(core_v1, node, "boot-2")
    wait_until(lambda: GATE in taints_of(core_v1, node), TIMEOUT, "gate put back")
    stays_gated(core_v1, node, 1.5)  # the pod's Ready is from before the reboot
    mark_pod_ready(core_v1, pod, "default")  # the kubelet restarted it: Ready again, now
    gate_gone(core_v1, node)


def test_backfill_gates_an_idle_node_and_leaves_a_busy_one_alone(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    gated(gate_rules(f"init-{unique_name}"[:63], extra="backfill: true\n"))
    idle, busy = f"{unique_name}-idle", f"{unique_name}-busy"
    workload: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{unique_name}-app"},
        "spec": {"nodeName": busy, "containers": [{"name": "app", "image": POD_IMAGE}]},
    }
    # Bound before the node exists: a node seen with no pods yet is idle, and rightly gated.
    core_v1.create_namespaced_pod("default", workload)  # type: ignore[arg-type]
    cleanup.append(("pod", f"{unique_name}-app"))
    for name in (idle, busy):
        create_node(core_v1, SimNode(name=name, labels={"example.com/pool": "gpu"}))
        cleanup.append(("node", name))
    patch = {"metadata": {"labels": {"example.com/touch": "1"}}}
    for name in (idle, busy):  # a change makes the reconciler look at both now
        core_v1.patch_node(name, patch)
    wait_until(lambda: GATE in taints_of(core_v1, idle), TIMEOUT, "idle node backfilled")
    [skipped] = wait_for_event(core_v1, busy, "NodegateBackfillSkipped")
    assert f"default/{unique_name}-app" in (skipped.message or "")
    assert GATE not in taints_of(core_v1, busy)


def workload_deployment(name: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """Two replicas that do not tolerate the gate: they wait for the lift."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": node_selector,
                    "containers": [{"name": "app", "image": POD_IMAGE}],
                },
            },
        },
    }


def watch_bindings(
    core: k8s_client.CoreV1Api,
    node: str,
    selector: str,
    observed: dict[str, float],
    violations: list[str],
    stop: threading.Event,
) -> None:
    """Each round reads the workload's pods first, then the node: a pod already bound while a
    later read of the node still shows the gate is a pod placed before the lift."""
    while not stop.is_set():
        try:
            pods = core.list_namespaced_pod("default", label_selector=selector).items
            bound = [
                str(p.metadata and p.metadata.name) for p in pods if p.spec and p.spec.node_name
            ]
            gated = GATE in taints_of(core, node)
        except ApiException:
            time.sleep(0.02)
            continue  # the node does not exist yet
        now = time.monotonic()
        if not gated:
            observed.setdefault("lifted", now)
        if bound:
            observed.setdefault("bound", now)
            if gated:
                violations.append(f"{bound} bound while {node} still carried the gate")
        time.sleep(0.02)


def test_workloads_land_only_after_the_init_daemonset_made_the_node_ready(
    scheduling_control_plane: LocalControlPlane,
    scheduling_core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Born gated, the init DaemonSet's pod (it tolerates the gate) becomes Ready under kwok, the
    gate lifts, and the pending workload is bound: never before the lift (checked on bindings)."""
    core = scheduling_core_v1
    apps = k8s_client.AppsV1Api(scheduling_control_plane.client)
    app, pool = f"init-{unique_name}"[:63], f"gpu-{unique_name}"[:63]
    rules = gate_rules(app).replace("example.com/pool: gpu", f"example.com/pool: {pool}")
    node = f"{unique_name}-n"
    with ExitStack() as stack:
        reconciler = start_reconciler(stack, scheduling_control_plane, tmp_path, unique_name)(rules)
        on_pool = {"example.com/pool": pool}
        daemonset = init_daemonset(app, on_pool, GATE[0])
        workload = workload_deployment(f"work-{unique_name}"[:63], on_pool)
        apps.create_namespaced_daemon_set("default", daemonset)  # type: ignore[arg-type]
        apps.create_namespaced_deployment("default", workload)  # type: ignore[arg-type]
        stack.callback(apps.delete_namespaced_daemon_set, app, "default")
        stack.callback(apps.delete_namespaced_deployment, workload["metadata"]["name"], "default")

        observed: dict[str, float] = {}
        violations: list[str] = []
        stop = threading.Event()

        create_node(core, SimNode(name=node, labels=on_pool, taints=[GATE_TAINT], kwok=True))
        stack.callback(core.delete_node, node)
        created = time.monotonic()
        watcher = threading.Thread(
            target=watch_bindings,
            args=(core, node, f"app=work-{unique_name}"[:67], observed, violations, stop),
            daemon=True,
        )
        watcher.start()
        wait_until(lambda: "bound" in observed, 90, "workload bound")
        stop.set()
        watcher.join(5)
        assert violations == []
        assert observed["lifted"] <= observed["bound"]
        wait_until(  # its Event may land after the Event of the node's first write
            lambda: any(
                "init pod is Ready" in (e.message or "")
                for e in node_events(core, node)
                if e.reason == "NodegateUpdated"
            ),
            TIMEOUT,
            "the Event of the lift by the init pod",
        )
        print(
            f"time to ungate (node created -> gate lifted): {observed['lifted'] - created:.2f}s; "
            f"first workload bound {observed['bound'] - observed['lifted']:.2f}s after"
        )
        ungated_once(reconciler)


# --- each life of a gate counts from its own beginning (issue 28) ------------------------------


def ready_since(core_v1: k8s_client.CoreV1Api, pod: str) -> str:
    """The pod's Ready transition time as its status says (the kubelet's write)."""
    raw: Any = core_v1.read_namespaced_pod_status(pod, "default", _preload_content=False)
    conditions = json.loads(raw.data)["status"]["conditions"]
    [ready] = [c for c in conditions if c["type"] == "Ready"]
    return str(ready["lastTransitionTime"])


def a_later_second_than(stamp: str) -> None:
    """Wait until the wall clock is in a later second than `stamp` (RFC 3339): the API's times
    are whole seconds, so what happens next is distinguishable from what happened then."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(seconds=1)
    wait_until(lambda: datetime.now(UTC) >= moment, TIMEOUT, f"a second later than {stamp}")


def lifted_once(
    gated: Start,
    core_v1: k8s_client.CoreV1Api,
    cleanup: list[tuple[str, str]],
    name: str,
    rules: str,
) -> tuple[ReconcilerProcess, str, str]:
    """A gated node lifted by its init pod on boot-1: (reconciler, node, pod)."""
    reconciler = gated(rules)
    node = gated_node(core_v1, cleanup, f"{name}-n")
    set_boot_id(core_v1, node, "boot-1")
    pod = init_pod(core_v1, cleanup, f"{name}-init", node, f"init-{name}"[:63])
    mark_pod_ready(core_v1, pod, "default")
    gate_gone(core_v1, node)
    return reconciler, node, pod


def test_a_re_gate_written_after_the_init_pod_was_ready_again_is_lifted(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    """nodegate down through the reboot: the pod is Ready again before the re-gate is written,
    and that readiness, from after the lift, lifts it."""
    rules = gate_rules(f"init-{unique_name}"[:63], extra="regateOnReboot: true\n")
    first, node, pod = lifted_once(gated, core_v1, cleanup, unique_name, rules)
    first.stop()
    # A later second than the pod's last Ready: its next Ready is a new episode (the lift is no
    # proxy: it is dated on nodegate's reading of the server's clock, up to a second early).
    a_later_second_than(ready_since(core_v1, pod))
    set_boot_id(core_v1, node, "boot-2")
    mark_pod_ready(core_v1, pod, "default")  # the kubelet restarted it: Ready since now
    started = time.monotonic()
    gated(rules)
    wait_until(
        lambda: read_node(core_v1, node)["metadata"]["annotations"].get(BOOT) == "boot-2",
        TIMEOUT,
        "gate put back and lifted again on boot-2",
    )
    assert GATE not in taints_of(core_v1, node)
    print(f"re-gated and lifted {time.monotonic() - started:.2f}s after nodegate started")


def test_a_re_gates_timeout_counts_from_the_reboot_not_from_the_nodes_creation(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    extra = "regateOnReboot: true\ntimeout: 3s\nonTimeout: lift\n"
    rules = gate_rules(f"init-{unique_name}"[:63], extra=extra)
    _, node, _ = lifted_once(gated, core_v1, cleanup, unique_name, rules)
    created = read_node(core_v1, node)["metadata"]["creationTimestamp"]
    born = datetime.fromisoformat(created.replace("Z", "+00:00"))
    wait_until(lambda: datetime.now(UTC) > born + timedelta(seconds=4), TIMEOUT, "node past 3s")
    set_boot_id(core_v1, node, "boot-2")  # its pod's readiness is from the previous boot
    wait_until(lambda: GATE in taints_of(core_v1, node), TIMEOUT, "gate put back")
    put_back = time.monotonic()
    stays_gated(core_v1, node, 1.5)
    gate_gone(core_v1, node)
    held = time.monotonic() - put_back
    assert held >= 1.5
    print(f"re-gate held {held:.2f}s, then lifted by its 3s timeout")
    wait_until(  # its Event may land after the write that lifted it
        lambda: any(
            "timed out" in (e.message or "")
            for e in node_events(core_v1, node)
            if e.reason == "NodegateUpdated"
        ),
        TIMEOUT,
        "the Event of the timed-out lift",
    )


def test_a_node_re_created_under_its_name_is_not_lifted_by_the_old_nodes_ready_pod(
    gated: Start, core_v1: k8s_client.CoreV1Api, cleanup: list[tuple[str, str]], unique_name: str
) -> None:
    app = f"init-{unique_name}"[:63]
    gated(gate_rules(app))
    node = gated_node(core_v1, cleanup, f"{unique_name}-n")
    pod = init_pod(core_v1, cleanup, f"{unique_name}-init", node, app)
    mark_pod_ready(core_v1, pod, "default")
    gate_gone(core_v1, node)
    a_later_second_than(ready_since(core_v1, pod))  # the new Node is created a later second
    delete_node(core_v1, node)
    gated_node(core_v1, cleanup, node)  # the same name, a new Node object; the old pod stays
    stays_gated(core_v1, node, 1.5)
    mark_pod_ready(core_v1, pod, "default")  # the kubelet now under that name reports it Ready
    gate_gone(core_v1, node)
