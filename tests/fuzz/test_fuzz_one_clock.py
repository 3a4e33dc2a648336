"""One clock (issue 43), as a property: shifting every time a node writes by any amount within
±24 h changes no decision nodegate makes.

Two worlds run the same generated history, once with the node's clock right and once skewed:
the startup-gate world (`gate_world.py`: gates lifted by an init pod or a condition, re-gates
after reboots, timeouts, restarts of the reconciler) and a small world of a condition rule
with `for` (conditions flapping, seen or unseen, the reconciler restarted). The taints on the
node after every step must be the same. The condition world also checks `for` itself: an
evicting taint comes only after the process that adds it has seen the condition hold, without a
break, for the whole `for`, so a restart can delay it, never hasten it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from hypothesis import example, given
from hypothesis import strategies as st

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.sightings import ConditionKey, Sighting, condition_episodes, track
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.conditions import condition_types_read
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import NodeCondition, NodeState
from tests.fuzz.gate_world import T0, GateConfig, World
from tests.fuzz.profiles import fuzz
from tests.fuzz.test_fuzz_gate_invariant import CONFIGS, HISTORIES, STUCK_DOWN, STUCK_THROTTLED
from tests.unit.core.builders import applied

SKEWS = st.integers(-86_400, 86_400).map(lambda s: timedelta(seconds=s))


def run_gate_world(config: GateConfig, history: list[tuple[str, int]], skew: timedelta) -> World:
    world = World(config, skew=skew)
    for what, seconds in history:
        world.step(what, seconds)
    world.settle()
    return world


@fuzz
@given(config=CONFIGS, history=HISTORIES, skew=SKEWS)
@example(config=GateConfig(), history=STUCK_THROTTLED, skew=timedelta(minutes=-3))
@example(config=GateConfig(), history=STUCK_DOWN, skew=timedelta(minutes=-3))
@example(config=GateConfig(signal="conditions"), history=STUCK_DOWN, skew=timedelta(hours=24))
def test_a_skewed_node_clock_changes_no_gate_decision(
    config: GateConfig, history: list[tuple[str, int]], skew: timedelta
) -> None:
    right = run_gate_world(config, history, timedelta(0))
    skewed = run_gate_world(config, history, skew)

    assert skewed.trace == right.trace
    assert skewed.violations == right.violations == []


HOLD = timedelta(seconds=30)
RULES = parse_rules(
    """\
apiVersion: nodegate.dev/v1
kind: NodeRules
conditionTaints:
  - name: nic-broken
    conditions: [{type: NetworkInterfaceCard, status: Kaput}]
    for: 30s
    taint: {key: example.com/nic, value: broken, effect: NoExecute}
"""
)
READ = condition_types_read(RULES)
CONDITION_STEPS = ("kaput", "fine", "unseen_flap", "reconcile", "down", "up")


@dataclass
class ConditionWorld:
    """One node whose agent reports NetworkInterfaceCard, and the reconciler watching it."""

    skew: timedelta
    t: int = 0
    node: NodeState = field(default_factory=lambda: NodeState("n", created=T0, uid="1"))
    up: bool = True
    seen: dict[ConditionKey, Sighting] | None = None
    """The reconciler's sightings (None: not looked at since it started)."""
    watched_since: int | None = None
    """Ground truth: since when this process has looked at the node and seen it Kaput, without
    a break and within one episode (None: it has not)."""
    trace: list[tuple[int, bool]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def step(self, what: str, seconds: int) -> None:
        self.t += seconds
        getattr(self, f"_{what}")()
        self._look()
        self.trace.append((self.t, self._tainted()))

    def _report(self, status: str) -> None:
        written = T0 + timedelta(seconds=self.t) + self.skew
        self.node = replace(
            self.node, conditions=(NodeCondition("NetworkInterfaceCard", status, "", written),)
        )

    def _kaput(self) -> None:
        if not self.node.conditions or self.node.conditions[0].status != "Kaput":
            self._report("Kaput")

    def _fine(self) -> None:
        self._report("Fine")

    def _unseen_flap(self) -> None:
        """Fine and Kaput again between two looks: a new episode nodegate did not see begin."""
        self.t += 1
        self._report("Kaput")
        self.watched_since = None

    def _down(self) -> None:
        self.up, self.seen, self.watched_since = False, None, None

    def _up(self) -> None:
        self.up = True

    def _look(self) -> None:
        if not self.up:
            return
        now = T0 + timedelta(seconds=self.t)
        self.seen = track(self.seen, condition_episodes(self.node.conditions, READ), now)
        kaput = any(c.status == "Kaput" for c in self.node.conditions)
        if not kaput:
            self.watched_since = None
        elif self.watched_since is None:
            self.watched_since = self.t

    def _reconcile(self) -> None:
        if not self.up:
            return
        now = T0 + timedelta(seconds=self.t)
        result = plan(self.node, RULES, PlanFacts(now=now, condition_sightings=self.seen or {}))
        if result.add_taints and (
            self.watched_since is None or self.t - self.watched_since < HOLD.total_seconds()
        ):
            self.violations.append(
                f"t={self.t}: NoExecute before `for` had passed in this process's sight "
                f"(watched since {self.watched_since})"
            )
        self.node = applied(result, self.node)

    def _tainted(self) -> bool:
        return any(t.key == "example.com/nic" for t in self.node.taints)


CONDITION_HISTORIES = st.lists(
    st.tuples(st.sampled_from(CONDITION_STEPS), st.integers(0, 40)), max_size=30
)
RESTART_MID_HOLD = [("kaput", 0), ("reconcile", 20), ("down", 0), ("up", 5), ("reconcile", 10)]
"""A restart 20 s into the hold: 15 s later (35 s after the condition) is too early."""


def run_condition_world(history: list[tuple[str, int]], skew: timedelta) -> ConditionWorld:
    world = ConditionWorld(skew)
    for what, seconds in history:
        world.step(what, seconds)
    world.step("reconcile", 31)
    world.step("reconcile", 0)  # a hold is re-checked once it has run out
    return world


@fuzz
@given(history=CONDITION_HISTORIES, skew=SKEWS)
@example(history=RESTART_MID_HOLD, skew=timedelta(minutes=-3))
@example(history=[("kaput", 0), ("reconcile", 8)], skew=timedelta(minutes=-3))
@example(history=[("kaput", 0), ("reconcile", 40)], skew=timedelta(minutes=3))
def test_a_skewed_node_clock_changes_no_for_decision_and_a_restart_never_hastens_it(
    history: list[tuple[str, int]], skew: timedelta
) -> None:
    right = run_condition_world(history, timedelta(0))
    skewed = run_condition_world(history, skew)

    assert skewed.trace == right.trace
    assert skewed.violations == right.violations == []
    kaput_at_end = right.node.conditions and right.node.conditions[0].status == "Kaput"
    if kaput_at_end and right.up:
        assert right.trace[-1][1], "a condition held past `for` in sight is tainted"
