"""The reconciler rides out an API-server crash (no restart, no lost or duplicated writes) and
a silent partition (noticed and healed within 45 s of the network's return).

The crash test has a control plane of its own (module-scoped), since its API server is killed
mid-run; the partition tests share the session's, since only their own proxy fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.core.objects.taint_history import (
    DATA_KEY,
    HISTORY_CONFIGMAP,
    MAX_ENTRIES,
    encode_history,
)
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from tests.e2e.conftest import run_control_plane
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    RULES,
    TIMEOUT,
    patch_labels,
    taints_stay,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import running_reconciler
from tests.e2e.support.reconciler_process import test_state_namespace as state_namespace_of
from tests.e2e.support.tcp_proxy import PartitionProxy, partition_proxy

CI = ("example.com/dedicated", "NoSchedule")
CONVERGE_SECONDS = 30


@pytest.fixture(scope="module")
def fragile_control_plane(request: pytest.FixtureRequest) -> Iterator[LocalControlPlane]:
    yield from run_control_plane(request, with_scheduling=False)


def test_reconciler_recovers_from_an_api_server_crash_without_a_restart(
    fragile_control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    plane = fragile_control_plane
    core = k8s_client.CoreV1Api(plane.client)
    core.create_namespaced_config_map(
        "default",
        k8s_client.V1ConfigMap(metadata={"name": "rules-outage"}, data={"rules.yaml": RULES}),
    )
    create_node(core, SimNode(name="before-crash", labels={"example.com/dedicated": "ci"}))
    args = ("--rules-configmap", "default/rules-outage", "--no-leader-elect")
    with running_reconciler(plane.kubeconfig_path, tmp_path, *args) as reconciler:
        wait_for_taints(core, "before-crash", lambda t: CI in t)
        pid = reconciler.process.pid

        plane.kill_component("kube-apiserver")
        time.sleep(3)  # watches broken, relists refused: every loop must keep retrying
        assert reconciler.process.poll() is None
        assert reconciler.get("/healthz")[0] == 200
        plane.start_component("kube-apiserver")

        restarted = time.monotonic()
        create_node(core, SimNode(name="after-crash", labels={"example.com/dedicated": "ci"}))
        patch_labels(core, "before-crash", {"example.com/dedicated": None})
        wait_until(
            lambda: CI in _taints(core, "after-crash") and CI not in _taints(core, "before-crash"),
            CONVERGE_SECONDS,
            "convergence after the API server came back",
        )
        print(f"converged {time.monotonic() - restarted:.1f}s after the API server restart")

        assert reconciler.process.poll() is None and reconciler.process.pid == pid
        assert reconciler.get("/healthz")[0] == 200
        # One write per real change: taint before-crash, taint after-crash, untaint before-crash.
        wait_until(  # each counted once its PATCH returned: maybe after the test saw it
            lambda: reconciler.metric("nodegate_node_writes_total", result="ok") == 3,
            TIMEOUT,
            "three writes counted",
        )
        assert reconciler.metric("nodegate_informer_errors_total") >= 1


def _taints(core: k8s_client.CoreV1Api, name: str) -> set[tuple[str, str]]:
    spec = core.read_node(name).spec
    return {(t.key, t.effect) for t in ((spec.taints if spec else None) or [])}


PARTITION_BAR_SECONDS = 45.0
"""The bar (client-go notices a dead HTTP/2 connection in about 45 s): a change made during a
silent partition is in force this soon after the network returns."""
OUTAGES = (8, 35)
LEASE_SURVIVING_A_SHORT_OUTAGE = (
    "--lease-duration-seconds",
    "20",
    "--renew-deadline-seconds",
    "15",
    "--retry-period-seconds",
    "2",
)
"""An 8 s partition is shorter than the renew deadline, so the leader keeps leading and its own
dead watches must be noticed; a 35 s one ends its leadership (exit 3) and the standby, cut off
too, takes over once the network is back."""


@contextmanager
def _behind_proxy(
    plane: LocalControlPlane, directory: Path
) -> Iterator[tuple[PartitionProxy, Path]]:
    """A proxy in front of the API server, and a kubeconfig that reaches it only through it."""
    api_port = int(plane.server_url.rsplit(":", 1)[1])
    with partition_proxy(api_port) as proxy:
        kubeconfig = directory / "kubeconfig-via-proxy"
        kubeconfig.write_text(
            plane.kubeconfig_path.read_text().replace(
                plane.server_url, f"https://127.0.0.1:{proxy.port}"
            )
        )
        yield proxy, kubeconfig


@pytest.mark.parametrize("leader_election", [False, True], ids=["alone", "two-replicas-on-a-lease"])
def test_changes_made_during_a_silent_partition_converge_within_45s_after_it_heals(
    leader_election: bool,
    control_plane: LocalControlPlane,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Every connection of the reconciler goes through a proxy that stops forwarding without
    closing anything and refuses new connections: a stuck load balancer. An 8 s and then a
    35 s partition; during each a node is created and another node's label flips."""
    value = unique_name[-6:]
    label = "example.com/partitioned"
    taint = (label, "NoSchedule")
    rules = HEADER + (
        "labelTaints:\n"
        f"  - {{name: partitioned, match: {{labels: {{{label}: '{value}'}}}}, "
        f"taint: {{key: {label}, value: '{value}', effect: NoSchedule}}, nodeMayLift: true}}\n"
    )
    ref = rules_configmap(rules)
    flags: tuple[str, ...] = ("--rules-configmap", ref, "--no-leader-elect")
    if leader_election:
        lease = ("--lease-namespace", "default", "--lease-name", f"lease-{unique_name}"[:63])
        flags = ("--rules-configmap", ref, *lease, *LEASE_SURVIVING_A_SHORT_OUTAGE)
    with _behind_proxy(control_plane, tmp_path) as (proxy, kubeconfig), ExitStack() as replicas:
        started = [
            replicas.enter_context(running_reconciler(kubeconfig, tmp_path, *flags))
            for _ in range(2 if leader_election else 1)
        ]
        existing = make_node("existing", labels={label: value})
        wait_for_taints(core_v1, existing, lambda t: taint in t)
        labelled = True
        for outage in OUTAGES:
            proxy.partition(refuse_new=True)
            new = make_node(f"new-{outage}", labels={label: value})
            labelled = not labelled
            patch_labels(core_v1, existing, {label: value if labelled else None})
            time.sleep(outage)
            proxy.heal()
            healed = time.monotonic()

            def converged(new: str = new, labelled: bool = labelled) -> bool:
                on_existing = taint in _taints(core_v1, existing)
                return taint in _taints(core_v1, new) and on_existing == labelled

            wait_until(
                converged,
                PARTITION_BAR_SECONDS + 30,
                f"convergence after a {outage}s partition",
                interval=0.2,
            )
            took = time.monotonic() - healed
            print(f"{outage}s silent partition: converged {took:.1f}s after the network returned")
            assert took < PARTITION_BAR_SECONDS
        logs = "".join(r.logs() for r in started)
        assert "presumed dead" in logs
        assert "Retrying" not in logs  # urllib3's line per connect retry
        for informer in ("nodes", "rules"):
            starts = [
                line
                for line in logs.splitlines()
                if f'"informer": "{informer}"' in line
                and ("list/watch failed" in line or "presumed dead" in line)
            ]
            assert len(starts) <= len(OUTAGES) * len(started), starts  # once per outage


CUT_AFTER_BYTES = 64 * 1024
"""Answers longer than this are broken off there: the head and part of the body arrive."""


def test_answers_broken_off_midway_are_retried_and_end_no_loop(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """A connection reset in the middle of an answer's body, its head already read (a flaky
    link, a middlebox that drops long transfers), is a temporary failure like a reset before
    it. The reconciler starts while every answer longer than 64 KiB is broken off there; the
    first is its taint history, as large as a long-lived cluster's (2,000 entries, about
    200 KiB). It must retry with backoff and, once answers arrive whole, lead as usual: a
    controller loop that ended on a urllib3 error would fail /healthz and taint nothing."""
    value = unique_name[-6:]
    label = "example.com/broken-off"
    taint = (label, "NoSchedule")
    rules = HEADER + (
        "labelTaints:\n"
        f"  - {{name: broken-off, match: {{labels: {{{label}: '{value}'}}}}, "
        f"taint: {{key: {label}, value: '{value}', effect: NoSchedule}}, nodeMayLift: true}}\n"
    )
    ref = rules_configmap(rules)
    state = state_namespace_of(control_plane.kubeconfig_path)
    owned = {
        (f"history.example.com/t{i:04d}", "NoSchedule"): "2026-01-01T00:00:00Z"
        for i in range(MAX_ENTRIES)
    }
    data = encode_history(owned)
    assert len(data[DATA_KEY]) > 2 * CUT_AFTER_BYTES
    history = k8s_client.V1ConfigMap(metadata={"name": HISTORY_CONFIGMAP}, data=data)
    core_v1.create_namespaced_config_map(state, history)
    before = make_node("before", labels={label: value})
    flags = ("--rules-configmap", ref, "--no-leader-elect")
    with _behind_proxy(control_plane, tmp_path) as (proxy, kubeconfig):
        proxy.cut_answers_over(CUT_AFTER_BYTES)
        with running_reconciler(kubeconfig, tmp_path, *flags, wait_ready=False) as reconciler:
            wait_until(lambda: proxy.cuts >= 1, 20, "an answer broken off")
            time.sleep(3)  # asked for again, and broken off again
            health = reconciler.get("/healthz")
            proxy.cut_answers_over(None)
            assert health[0] == 200, health[1]
            after = make_node("after", labels={label: value})
            for name in (before, after):
                wait_for_taints(core_v1, name, lambda t: taint in t, timeout=30)
            assert reconciler.process.poll() is None
            assert reconciler.get("/healthz")[0] == 200
            assert reconciler.metric("nodegate_loop_failed") == 0
            assert reconciler.metric("nodegate_errors_total", kind="internal") == 0
        print(f"{proxy.cuts} answers broken off")


def test_a_relist_a_rules_change_asked_for_is_not_lost_when_its_list_breaks_off(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    """A rules change that reads an annotation the node cache has been dropping asks for a
    relist; that LIST is broken off mid-answer. The relist must be tried again: resuming the
    watch from the old resourceVersion would leave every node that does not change (here, all
    of them) cached without the annotation, and its gate shut, until the next 410."""
    pool = unique_name[-6:]
    gate = (f"startup.example.com/{pool}", "NoSchedule")

    def rules(ready_when: str) -> str:
        return HEADER + (
            "startupGates:\n"
            f"  - name: warmup\n"
            f"    match: {{labels: {{example.com/pool: '{pool}'}}}}\n"
            f"    taint: {{key: {gate[0]}, value: wait, effect: NoSchedule}}\n"
            f"    readyWhen: {{{ready_when}}}\n"
        )

    never = "pods: {namespace: default, selector: {app: never-" + pool + "}}"
    ref = rules_configmap(rules(never))
    nodes = [
        make_node(
            f"n{i}",
            labels={"example.com/pool": pool},
            annotations={"example.com/ready": "true", "example.com/filler": "x" * 2000},
            taints=[{"key": gate[0], "value": "wait", "effect": "NoSchedule"}],
        )
        for i in range(6)
    ]
    flags = ("--rules-configmap", ref, "--no-leader-elect", "--max-untaint-share", "1")
    with (
        _behind_proxy(control_plane, tmp_path) as (proxy, kubeconfig),
        running_reconciler(kubeconfig, tmp_path, *flags),
    ):
        taints_stay(core_v1, nodes[0], lambda t: gate in t, 2)
        proxy.cut_answers_over(8 * 1024)  # a rules event passes, a node LIST does not
        rules_configmap(rules(f"{never}, annotation: example.com/ready=true"))
        wait_until(lambda: proxy.cuts >= 1, 20, "the relist broken off")
        time.sleep(2)
        proxy.cut_answers_over(None)
        for name in nodes:
            wait_for_taints(core_v1, name, lambda t: gate not in t, timeout=25)
