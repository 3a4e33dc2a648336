"""Two reconciler replicas on one Lease: only the leader writes; a standby takes over.

The failover times printed here are the figures quoted in docs/reconciler.md.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.reconciler_fixtures import RULES, wait_for_taints
from tests.e2e.reconciler_process import ReconcilerProcess, running_reconciler

LEASE = (
    "--lease-duration-seconds",
    "4",
    "--renew-deadline-seconds",
    "3",
    "--retry-period-seconds",
    "1",
)


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
