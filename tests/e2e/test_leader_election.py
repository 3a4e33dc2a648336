"""Two reconciler replicas on one Lease: only the leader writes; a standby takes over.

The failover times printed here are the figures quoted in docs/reconciler.md.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import FAST_LEASE, RULES, wait_for_taints
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler
from tests.e2e.support.tcp_proxy import partition_proxy

LEASE = FAST_LEASE


@pytest.fixture
def start_replica(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[[str], str],
    unique_name: str,
    tmp_path: Path,
) -> Iterator[Callable[[], ReconcilerProcess]]:
    ref = rules_configmap(RULES)
    with ExitStack() as stack:

        def start() -> ReconcilerProcess:
            return stack.enter_context(
                running_reconciler(
                    control_plane.kubeconfig_path,
                    tmp_path,
                    "--rules-configmap",
                    ref,
                    "--lease-namespace",
                    "default",
                    "--lease-name",
                    f"lease-{unique_name}"[:63],
                    *LEASE,
                )
            )

        yield start


def leader_of(replicas: list[ReconcilerProcess]) -> list[ReconcilerProcess]:
    return [r for r in replicas if r.process.poll() is None and r.metric("nodegate_is_leader") == 1]


def leader_and_standby(
    start_replica: Callable[[], ReconcilerProcess],
) -> tuple[ReconcilerProcess, ReconcilerProcess]:
    """Start one replica, wait until it leads, then start a second one."""
    first = start_replica()
    wait_until(lambda: leader_of([first]), 20, "first replica leads")
    return first, start_replica()


def test_only_the_leader_writes(
    start_replica: Callable[[], ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    first, second = leader_and_standby(start_replica)
    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    time.sleep(2)
    assert leader_of([first, second]) == [first]
    assert second.metric("nodegate_node_writes_total") == 0


@pytest.mark.parametrize(
    ("how", "sig"),
    [("crash", signal.SIGKILL), ("clean-shutdown", signal.SIGTERM)],
    ids=["sigkill", "sigterm"],
)
def test_standby_takes_over_when_the_leader_goes(
    how: str,
    sig: int,
    start_replica: Callable[[], ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    first, second = leader_and_standby(start_replica)
    time.sleep(1.5)
    assert leader_of([first, second]) == [first]

    stopped_at = time.monotonic()
    first.stop(sig)
    wait_until(lambda: leader_of([second]), 30, "standby leads", interval=0.05)
    failover = time.monotonic() - stopped_at
    print(f"failover after {how} (lease 4s, renew 3s, retry 1s): {failover:.2f}s")

    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    if sig == signal.SIGTERM:
        assert first.process.returncode == 0


def logged_at(logs: str, message: str) -> datetime:
    """When the reconciler logged `message` (its JSON log lines carry the time)."""
    for line in logs.splitlines():
        if line.startswith("{") and json.loads(line).get("msg", "").startswith(message):
            return datetime.fromisoformat(json.loads(line)["time"])
    raise AssertionError(f"never logged: {message}")


def test_a_leader_cut_off_from_the_api_server_stops_before_the_standby_leads(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[[str], str],
    unique_name: str,
    tmp_path: Path,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    """A partition, not a crash: the old leader's requests hang (no error, no answer), the
    standby still reaches the API server. Two writers at once is what must never happen."""
    ref = rules_configmap(RULES)
    lease = ("--lease-namespace", "default", "--lease-name", f"lease-{unique_name}"[:63])
    args = ("--rules-configmap", ref, *lease, *LEASE)
    api_port = int(control_plane.server_url.rsplit(":", 1)[1])
    with partition_proxy(api_port) as proxy:
        via_proxy = tmp_path / "kubeconfig-via-proxy"
        via_proxy.write_text(
            control_plane.kubeconfig_path.read_text().replace(
                control_plane.server_url, f"https://127.0.0.1:{proxy.port}"
            )
        )
        with running_reconciler(via_proxy, tmp_path, *args) as leader:
            wait_until(lambda: leader_of([leader]), 20, "first replica leads")
            with running_reconciler(control_plane.kubeconfig_path, tmp_path, *args) as standby:
                time.sleep(1.5)
                assert leader_of([leader, standby]) == [leader]

                proxy.partition()
                wait_until(lambda: leader_of([standby]), 30, "standby leads", interval=0.05)
                wait_until(lambda: leader.process.poll() is not None, 15, "old leader exits")
                assert leader.process.returncode == 3
                gave_up = logged_at(leader.logs(), "lost leadership")
                took_over = logged_at(standby.logs(), "became leader")
                print(
                    f"old leader stopped {(took_over - gave_up).total_seconds():.2f}s before "
                    "the standby led"
                )
                assert gave_up < took_over

                proxy.heal()
                name = make_node(labels={"example.com/dedicated": "ci"})
                wait_for_taints(
                    core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t
                )


LEASE_FOR_SLOW_READS = (
    "--lease-duration-seconds",
    "16",
    "--renew-deadline-seconds",
    "12",
    "--retry-period-seconds",
    "1",
)
"""Lease reads slowed by 4 s: a renewal every ~5 s; the fence must span from one attempt's start
to the next one's end (4 + 1 + 4 s and the writes), inside the 12 s renew deadline."""


def fence_held(replica: ReconcilerProcess) -> bool:
    return "\nnodegate_leader_fence_held 1.0" in replica.get("/metrics")[1]


def test_a_stepped_wall_clock_and_slow_lease_reads_never_put_both_fences_up(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[[str], str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """The leader's Lease reads take 4 s (its renewals still in time); the standby's wall clock
    steps 60 s forward. Takeover is decided on each replica's monotonic clock, so the standby
    keeps waiting and the two write fences are never up at once (sampled every ~20 ms)."""
    ref = rules_configmap(RULES)
    lease = ("--lease-namespace", "default", "--lease-name", f"lease-{unique_name}"[:63])
    args = ("--rules-configmap", ref, *lease, *LEASE_FOR_SLOW_READS)
    step_file = tmp_path / "wall-step"
    step_file.write_text("0")
    skewed = "tests.e2e.support.skewed_reconciler"
    slow = {"NODEGATE_TEST_LEASE_READ_DELAY": "4"}
    stepped = {"NODEGATE_TEST_WALL_STEP_FILE": str(step_file)}
    kubeconfig = control_plane.kubeconfig_path
    with running_reconciler(kubeconfig, tmp_path, *args, module=skewed, env=slow) as leader:
        wait_until(lambda: leader_of([leader]), 30, "first replica leads")
        with running_reconciler(kubeconfig, tmp_path, *args, module=skewed, env=stepped) as standby:
            time.sleep(2)
            step_file.write_text("60")
            samples = both = 0
            until = time.monotonic() + 15
            while time.monotonic() < until:
                leader_fence, standby_fence = fence_held(leader), fence_held(standby)
                samples += 1
                both += leader_fence and standby_fence
                time.sleep(0.02)
            print(f"clock step: both fences up in {both} of {samples} samples")
            assert both == 0
            assert leader_of([leader, standby]) == [leader]
