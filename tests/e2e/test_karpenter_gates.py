"""Startup gates in front of a real node autoscaler: Karpenter with its kwok provider.

Nodes are born with the gate, as kubelet's `--register-with-taints` would give it (here a
MutatingAdmissionPolicy on Node creation, since kwok nodes have no kubelet). With the gate in the
`startupTaints` of the NodePool nodegate renders, Karpenter waits for the gated node: exactly
one node, lifted by its init pod. What Karpenter does when the gate is left out of
`startupTaints` is a measurement, not a test: `make bench-karpenter`
(tests/bench/karpenter_startup_taints.py).

Karpenter is built from its Go module only when these tests are collected (conftest), and runs
on a control plane of its own so it never provisions for other tests' pods.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.conftest import run_karpenter_plane
from tests.e2e.support.karpenter_scene import DONE, GATE, HOLD_SECONDS, REPLICAS, start_scene
from tests.e2e.support.reconciler_fixtures import taints_of, wait_for_event

pytestmark = [pytest.mark.karpenter, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def karpenter_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalControlPlane]:
    yield from run_karpenter_plane(request, tmp_path_factory)


def test_gates_in_startup_taints_get_exactly_one_node_lifted_by_its_init_pod(
    karpenter_plane: LocalControlPlane, unique_name: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        scene = start_scene(karpenter_plane, stack, unique_name, tmp_path, startup_taints=True)
        started = time.monotonic()
        [node] = wait_until(lambda: scene.nodes() or None, 120, "Karpenter launched a node")
        launched = time.monotonic()
        name = node.metadata.name
        assert GATE in taints_of(scene.core, name), "the node was born without the gate"
        init_pod = wait_until(
            lambda: next(
                (
                    p
                    for p in scene.pods(scene.app)
                    if p.spec.node_name == name and p.status.phase == "Running"
                ),
                None,
            ),
            120,
            "init pod running on the new node",
        )
        held_until = time.monotonic() + HOLD_SECONDS
        counts = []
        while time.monotonic() < held_until:  # init still working: the gate holds
            counts.append(len(scene.nodeclaims()))
            assert GATE in taints_of(scene.core, name)
            assert not any(p.spec.node_name for p in scene.pods(scene.work))
            time.sleep(1.0)
        assert set(counts) == {1}, f"NodeClaims while gated: {counts}"

        scene.core.patch_namespaced_pod(
            init_pod.metadata.name, "default", {"metadata": {"annotations": {DONE: "true"}}}
        )
        done = time.monotonic()
        wait_until(lambda: GATE not in taints_of(scene.core, name), 60, "gate lifted")
        lifted_at = time.monotonic()
        lifted = wait_for_event(scene.core, name, "NodegateUpdated")
        assert any(
            "init pod is Ready" in (e.message or "") or "gpu-init" in (e.message or "")
            for e in lifted
        )
        wait_until(
            lambda: (
                len([p for p in scene.pods(scene.work) if p.spec.node_name == name]) == REPLICAS
                or None
            ),
            60,
            "every workload pod bound to the one node",
        )
        bound_at = time.monotonic()
        settle_until = bound_at + 20.0
        while time.monotonic() < settle_until:  # and Karpenter adds nothing afterwards
            assert len(scene.nodeclaims()) == 1
            time.sleep(2.0)
        print(
            f"\nKarpenter, gate in startupTaints: node launched {launched - started:.1f}s after "
            f"the NodePool and workload; 1 NodeClaim during the {HOLD_SECONDS:.0f}s gated hold and "
            f"20s after; gate lifted {lifted_at - done:.1f}s after the init pod was marked done; "
            f"all {REPLICAS} pods bound {bound_at - lifted_at:.1f}s after the lift"
        )
