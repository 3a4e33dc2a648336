"""One clock (issue 43): nodes whose clocks are 3 minutes behind or ahead of the API server's
are lifted, re-gated and tainted exactly as nodes that keep good time.

Every time a node writes here (its init pod's Ready transition, its conditions') is written
through its own kubelet credentials (`as_node`) and shifted by its skew, as a node whose clock
is off writes it; the reconciler must decide "since when" from its own first sight, on the API
server's clock, never from those times.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.nodes import mark_pod_ready, set_node_condition
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    Start,
    gate_init_pod,
    taints_of,
    taints_stay,
    wait_for_taints,
)

SKEWS = [pytest.param(-180.0, id="3-minutes-behind"), pytest.param(180.0, id="3-minutes-ahead")]
POOL = {"e2e.nodegate.dev/skewed": "yes"}
Taints = dict[tuple[str, str], dict[str, Any]]
GATE_TAINT = {"key": "startup.example.com/skewed", "value": "wait", "effect": "NoSchedule"}
GATE = ("startup.example.com/skewed", "NoSchedule")
NIC = ("example.com/nic", "NoExecute")


def gate_rules(ready_when: str, extra: str = "") -> str:
    gate = textwrap.dedent(
        f"""\
        startupGates:
          - name: skewed
            match: {{labels: {{e2e.nodegate.dev/skewed: "yes"}}}}
            taint: {{key: {GATE[0]}, value: wait, effect: {GATE[1]}}}
            readyWhen:
              {ready_when}
        """
    )
    return HEADER + gate + (f"    {extra}\n" if extra else "")


@dataclass(frozen=True)
class Scene:
    """The fixtures every test here uses."""

    core_v1: k8s_client.CoreV1Api
    make_node: Callable[..., str]
    start: Start
    as_node: AsNode
    unique_name: str


@pytest.fixture
def scene(
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    start_reconciler_with: Start,
    as_node: AsNode,
    unique_name: str,
) -> Scene:
    return Scene(core_v1, make_node, start_reconciler_with, as_node, unique_name)


def gated(taints: Taints) -> bool:
    return GATE in taints


def lifted(taints: Taints) -> bool:
    return GATE not in taints


@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_node_is_lifted_when_its_init_pod_turns_ready(skew: float, scene: Scene) -> None:
    app = f"init-{scene.unique_name}"[:63]
    scene.start(gate_rules(f"pods: {{namespace: default, selector: {{app: {app}}}}}"))
    node = scene.make_node(
        labels=POOL, taints=[{"key": GATE[0], "value": "wait", "effect": GATE[1]}]
    )
    with ExitStack() as stack:
        pod = gate_init_pod(scene.core_v1, stack, node, app, GATE[0])
        taints_stay(scene.core_v1, node, gated, 1.0)
        mark_pod_ready(scene.as_node(node), pod, "default", skew=skew)  # its kubelet, its clock
        wait_for_taints(scene.core_v1, node, lifted)


@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_node_re_gated_after_a_reboot_is_lifted_when_it_reports_the_condition(
    skew: float, scene: Scene
) -> None:
    rules = gate_rules('conditions: [{type: NetworkReady, status: "True"}]', "regateOnReboot: true")
    scene.start(rules)
    node = scene.make_node(
        labels=POOL, taints=[{"key": GATE[0], "value": "wait", "effect": GATE[1]}]
    )
    kubelet = scene.as_node(node)
    kubelet.patch_node_status(node, {"status": {"nodeInfo": {"bootID": "boot-1"}}})
    report = "NetworkReady"
    set_node_condition(kubelet, node, condition_type=report, status="True", reason="Up", skew=skew)
    wait_for_taints(scene.core_v1, node, lifted)
    time.sleep(1.1)  # the reboot comes a later second than anything nodegate saw of boot-1
    kubelet.patch_node_status(node, {"status": {"nodeInfo": {"bootID": "boot-2"}}})
    wait_for_taints(scene.core_v1, node, gated)
    taints_stay(
        scene.core_v1, node, gated, 1.5
    )  # the True of boot-1, carried over, says nothing of boot-2
    set_node_condition(
        kubelet, node, condition_type=report, status="False", reason="Boot", skew=skew
    )
    set_node_condition(kubelet, node, condition_type=report, status="True", reason="Up", skew=skew)
    wait_for_taints(scene.core_v1, node, lifted)


HOLD_SECONDS = 30


@pytest.mark.parametrize("skew", SKEWS)
def test_a_for_hold_on_a_skewed_node_counts_from_nodegates_first_sight(
    skew: float, scene: Scene
) -> None:
    """`for: 30s` NoExecute: not a second before 30 s after the condition was written (nodegate
    cannot have seen it earlier), and not minutes late on a node ahead."""
    match = f"e2e.nodegate.dev/skewed-for: {scene.unique_name}"[:63]
    scene.start(
        HEADER
        + textwrap.dedent(
            f"""\
            conditionTaints:
              - name: nic-broken
                match: {{labels: {{{match}}}}}
                conditions: [{{type: NetworkInterfaceCard, status: Kaput}}]
                for: {HOLD_SECONDS}s
                taint: {{key: {NIC[0]}, value: broken, effect: {NIC[1]}}}
            """
        )
    )
    key, value = match.split(": ")
    node = scene.make_node(labels={key: value})
    taints_stay(
        scene.core_v1, node, lambda taints: NIC not in taints, 1.0
    )  # the rules are in force
    kubelet = scene.as_node(node)
    written = time.monotonic()
    set_node_condition(
        kubelet,
        node,
        condition_type="NetworkInterfaceCard",
        status="Kaput",
        reason="E2E",
        skew=skew,
    )
    wait_for_taints(scene.core_v1, node, lambda taints: NIC in taints, timeout=HOLD_SECONDS + 20)
    held = time.monotonic() - written
    print(f"NoExecute {held:.1f}s after the condition was written ({skew:+.0f}s skew)")
    assert held >= HOLD_SECONDS
    assert NIC in taints_of(scene.core_v1, node)
