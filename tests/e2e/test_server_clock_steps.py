"""No single reading decides (issue 56): an API server whose `Date` steps 15 minutes ahead moves
no `for` hold, no gate timeout and no eviction budget; a step that lasts is followed at the
bounded slew rate, never stepped to, and shown on the metrics the alert reads.

The reconciler is the real `nodegate reconcile` whose readings of the API server's `Date` are
shifted by the test (`tests.e2e.support.skewed_reconciler`), read every second, with a resync
every 2 s so that every node is planned again on the stepped clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import set_node_condition, wait_until
from nodegate.reconciler.kit.server_clock import CONFIRM_SECONDS, SLEW_RATE
from tests.e2e.support.reconciler_fixtures import HEADER, alone, taints_of
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

STEP_SECONDS = 15 * 60
HELD = ("example.com/held", "NoExecute")
BUDGETED = ("example.com/budgeted", "NoExecute")
GATE = ("startup.example.com/clock-step", "NoSchedule")
RULES = HEADER + (
    "evictionBudget: {window: 10m, cluster: {maxNodes: 1}}\n"
    "conditionTaints:\n"
    "  - name: held\n"
    '    conditions: [{type: ClockStepHeld, status: "True"}]\n'
    "    for: 10m\n"
    f"    taint: {{key: {HELD[0]}, effect: NoExecute}}\n"
    "    evictionBudget: unlimited\n"
    "  - name: budgeted\n"
    '    conditions: [{type: ClockStepBudget, status: "True"}]\n'
    f"    taint: {{key: {BUDGETED[0]}, effect: NoExecute}}\n"
    "startupGates:\n"
    "  - name: clock-step\n"
    '    match: {labels: {e2e.nodegate.dev/clock-step: "yes"}}\n'
    f"    taint: {{key: {GATE[0]}, value: wait, effect: NoSchedule}}\n"
    "    readyWhen: {annotation: example.com/never=true}\n"
    "    timeout: 10m\n"
    "    onTimeout: lift\n"
)
CLOCK = ("--clock-read-seconds", "1", "--resync-seconds", "2")
BELIEVED = "lastingly: followed slowly"
"""The reconciler's log line when it believes a disagreement."""


@dataclass
class Stepped:
    """A reconciler whose readings of the API server's `Date` the test steps."""

    process: ReconcilerProcess
    step_file: Path

    def step(self, seconds: float) -> None:
        self.step_file.write_text(str(seconds))

    def metric(self, name: str) -> float:
        return self.process.metric(name)

    def correction(self) -> float:
        """How far the reconciler's clock has been moved off its monotonic projection."""
        return self.metric("nodegate_server_clock_correction_seconds")


@pytest.fixture
def stepped(
    control_plane: LocalControlPlane, rules_configmap: Callable[..., str], tmp_path: Path
) -> Iterator[Stepped]:
    step_file = tmp_path / "date-step"
    step_file.write_text("0")
    ref = rules_configmap(RULES)
    with running_reconciler(
        control_plane.kubeconfig_path,
        tmp_path,
        *alone(ref),
        *CLOCK,
        module="tests.e2e.support.skewed_reconciler",
        env={"NODEGATE_TEST_DATE_STEP_FILE": str(step_file)},
    ) as process:
        wait_until(process.is_ready, 60, "the reconciler is ready")
        yield Stepped(process, step_file)
    print(process.logs()[-4000:])


@dataclass(frozen=True)
class Scene:
    held: str
    """A node whose condition a `for: 10m` hold is counting."""
    gated: str
    """A node whose startup gate lifts only on a 10m timeout."""
    spent: str
    """The node that spent the 1-node eviction budget."""
    waiting: str
    """A node whose NoExecute taint waits for the spent budget."""


def _condition(core_v1: k8s_client.CoreV1Api, node: str, kind: str) -> None:
    set_node_condition(core_v1, node, condition_type=kind, status="True", reason="E2E")


@contextmanager
def _scene(core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]) -> Iterator[Scene]:
    scene = Scene(
        make_node("held"),
        make_node(
            "gated",
            labels={"e2e.nodegate.dev/clock-step": "yes"},
            taints=[{"key": GATE[0], "value": "wait", "effect": GATE[1]}],  # born gated
        ),
        make_node("spent"),
        make_node("waiting"),
    )
    _condition(core_v1, scene.held, "ClockStepHeld")
    _condition(core_v1, scene.spent, "ClockStepBudget")
    wait_until(lambda: BUDGETED in taints_of(core_v1, scene.spent), 30, "the budget spent")
    _condition(core_v1, scene.waiting, "ClockStepBudget")
    yield scene


def _nothing_moved(core_v1: k8s_client.CoreV1Api, scene: Scene) -> None:
    moved = [
        what
        for what, did in (
            ("a for: 10m hold fired", HELD in taints_of(core_v1, scene.held)),
            ("a 10m gate timeout lifted the gate", GATE not in taints_of(core_v1, scene.gated)),
            ("a spent budget let a taint by", BUDGETED in taints_of(core_v1, scene.waiting)),
        )
        if did
    ]
    assert moved == []


def test_a_date_stepped_15_minutes_ahead_for_10s_moves_no_hold_no_timeout_no_budget(
    stepped: Stepped, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    with _scene(core_v1, make_node) as scene:
        time.sleep(3)  # the waiting node planned against the spent budget
        _nothing_moved(core_v1, scene)

        stepped.step(STEP_SECONDS)
        time.sleep(10)
        stepped.step(0)
        time.sleep(6)  # three resyncs on whatever the clock says now

        _nothing_moved(core_v1, scene)
        assert stepped.metric("nodegate_server_clock_disagreements_total") >= 3
        assert abs(stepped.correction()) < 0.5  # drift within a reading's own uncertainty
        assert abs(stepped.metric("nodegate_server_clock_disagreement_seconds")) < 3


def test_a_lasting_step_is_believed_after_a_minute_and_followed_at_the_slew_rate(
    stepped: Stepped, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    with _scene(core_v1, make_node) as scene:
        stepped.step(STEP_SECONDS)
        stepped_at = time.monotonic()
        wait_until(
            lambda: BELIEVED in stepped.process.logs(),
            CONFIRM_SECONDS + 30,
            "the lasting step believed",
            interval=0.5,
        )
        assert time.monotonic() - stepped_at >= CONFIRM_SECONDS - 1
        assert abs(stepped.correction()) < 1.5  # believed, not stepped to

        first, at_first = (
            stepped.metric("nodegate_server_clock_correction_seconds"),
            time.monotonic(),
        )
        time.sleep(10)
        later, at_later = (
            stepped.metric("nodegate_server_clock_correction_seconds"),
            time.monotonic(),
        )

        assert later - first == pytest.approx(SLEW_RATE * (at_later - at_first), abs=0.02)
        assert stepped.metric("nodegate_server_clock_disagreement_seconds") > STEP_SECONDS - 5
        _nothing_moved(core_v1, scene)
