"""The startup-gate invariant over generated histories (tests/fuzz/gate_world.py): no gate is
lifted without readiness of its life, a timeout that says lift, or its rule's removal; none is
born that no rules in force own; and every gate a rule in force names goes once its readiness
holds; for gates lifting on the init pod and on a node condition (issue 30). The examples are
the histories that broke it before issue 28, the last ones replayed on a condition gate."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.gate_world import STEPS, GateConfig, Step, World
from tests.fuzz.profiles import fuzz

CONFIGS = st.builds(
    GateConfig,
    timeout=st.one_of(st.none(), st.integers(2, 30)),
    on_timeout=st.sampled_from(["keep", "lift"]),
    min_hold=st.one_of(st.none(), st.integers(1, 10)),
    signal=st.sampled_from(["pods", "conditions"]),
).filter(lambda c: c.min_hold is None or c.timeout is None or c.min_hold < c.timeout)
HISTORIES = st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 40)), max_size=25)

# The histories that broke it on main (c8a625f), as hypothesis found and shrank them, plus the
# reproduction of the first case with nodegate down:
OLD_POD: list[Step] = [("create", 0), ("pod_ready", 0), ("create", 0)]
"""A node re-created under its name is lifted by the earlier node's Ready pod."""
EARLY_TIMEOUT: list[Step] = [("create", 0), ("reconcile", 2), ("reboot", 0)]
"""With timeout 2s, onTimeout lift: the re-gate's timeout counted from the node's creation."""
STUCK_THROTTLED: list[Step] = [
    ("create", 0),
    ("pod_ready", 0),
    ("reconcile", 0),
    ("reboot", 0),
    ("pod_ready", 0),
]
"""The pod is Ready again before the re-gate is written (a second later): stuck for ever."""
STUCK_DOWN: list[Step] = [
    ("create", 0),
    ("pod_ready", 0),
    ("reconcile", 0),
    ("down", 0),
    ("reboot", 0),
    ("pod_ready", 0),
    ("up", 1),
]
"""The same with nodegate down through the reboot."""
STALE_AFTER_REBOOT: list[Step] = [
    ("create", 0),
    ("pod_ready", 0),
    ("reconcile", 0),
    ("reboot", 0),
    ("reconcile", 0),
]
"""Kept from main's guard: the pod's status from before the reboot must not lift the re-gate."""
FLAP_AFTER_LIFT: list[Step] = [
    ("create", 0),
    ("pod_ready", 1),
    ("reconcile", 1),
    ("pod_not_ready", 5),
    ("pod_ready", 5),
    ("reconcile", 1),
    ("down", 5),
    ("up", 5),
    ("reconcile", 1),
    ("reboot", 60),
    ("reconcile", 1),
]
"""Found by the review of issue 43: the init pod (or agent) turned Ready again after the lift (a
rollout), nodegate restarted, then the node rebooted: the re-gate was lifted at once on the
previous boot's readiness, which the new process had not seen begin."""
READY_AFTER_TIMEOUT_LIFT: list[Step] = [
    ("create", 0),
    ("reconcile", 31),
    ("pod_ready", 5),
    ("reconcile", 1),
    ("down", 5),
    ("up", 5),
    ("reconcile", 1),
    ("reboot", 60),
    ("reconcile", 1),
]
"""The same with the gate lifted by its timeout (30 s, onTimeout lift): nothing was shown then."""
HELD_GATE: list[Step] = [("create", 0), ("hold", 0), ("create", 0)]
"""A node born, while an update is held, with the held update's gate."""


@fuzz
@given(config=CONFIGS, history=HISTORIES)
@example(config=GateConfig(), history=OLD_POD)
@example(config=GateConfig(timeout=2, on_timeout="lift"), history=EARLY_TIMEOUT)
@example(config=GateConfig(), history=STUCK_THROTTLED)
@example(config=GateConfig(), history=STUCK_DOWN)
@example(config=GateConfig(), history=STALE_AFTER_REBOOT)
@example(config=GateConfig(), history=HELD_GATE)
@example(config=GateConfig(signal="conditions"), history=STALE_AFTER_REBOOT)
@example(config=GateConfig(signal="conditions"), history=STUCK_THROTTLED)
@example(config=GateConfig(signal="conditions"), history=OLD_POD)
@example(config=GateConfig(), history=FLAP_AFTER_LIFT)
@example(config=GateConfig(signal="conditions"), history=FLAP_AFTER_LIFT)
@example(config=GateConfig(timeout=30, on_timeout="lift"), history=READY_AFTER_TIMEOUT_LIFT)
def test_no_gate_is_stuck_or_lifted_by_the_wrong_evidence(
    config: GateConfig, history: list[Step]
) -> None:
    world = World(config)
    for what, seconds in history:
        world.step(what, seconds)
    world.settle()
    assert world.violations == []
