"""A small world for the startup-gate invariant: one node name, its init pod, the rules (one
update the blast-radius guard holds), the webhook and the reconciler, driven step by step.

The world keeps the ground truth nodegate cannot see (when the node really rebooted, which boot
the pod's status is from; for a gate lifting on a node condition, the agent that reports it),
runs the real planner (`core.decisions.plan`), the real boot tracking
(`core.decisions.sightings.track_boot`) and the real choice of what the webhook serves
(`nodes.served_rules`), and checks the invariant on every write:

* no gate is lifted without readiness of this life of the gate, a timeout that says lift (from
  this life's beginning), or its rule leaving the rules in force;
* the webhook never births a node with a gate that no rules in force own;

and, at the end (`settle`), that every gate a rule in force names is lifted once its readiness
holds. Time is whole seconds, as on the API. Model assumptions (the reasons are in
docs/gates.md): a reboot, and a Node re-created under the same name, come at least a second
after anything nodegate saw before; a pod's status is written only by the kubelet of its node.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.decisions.init_pods import PodView, sighted, spec_signals
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.sightings import (
    BootSight,
    ConditionKey,
    Sighting,
    condition_episodes,
    track,
    track_boot,
)
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint
from nodegate.core.rules.registration import gates_for
from nodegate.core.rules.rule_kinds import TaintRule
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.nodes.rules.served_rules import ServedRules
from tests.unit.core.builders import applied

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
POOL = {"pool": "gpu"}
Step = tuple[str, int]
"""(what, how many seconds pass first): see `World.step`."""
STEPS = (
    "reconcile",
    "create",
    "pod_ready",
    "pod_not_ready",
    "reboot",
    "down",
    "up",
    "hold",
    "confirm",
    "revert",
    "webhook_down",
    "webhook_up",
)


READY_CONDITION = "InitReady"
"""The node condition a `conditions` gate lifts on (an agent on the node reports it)."""


@dataclass(frozen=True)
class GateConfig:
    timeout: int | None = None
    on_timeout: str = "keep"
    min_hold: int | None = None
    signal: str = "pods"
    """What lifts the gate: the init pod's readiness ("pods") or a node condition the node's
    agent reports ("conditions"; the world's pod then stands for that agent)."""

    def yaml(self) -> str:
        lines = ["regateOnReboot: true"]
        if self.timeout is not None:
            lines += [f"timeout: {self.timeout}s", f"onTimeout: {self.on_timeout}"]
        if self.min_hold is not None:
            lines.append(f"minHold: {self.min_hold}s")
        return "\n".join(lines)


def _gate(name: str, key: str, config: GateConfig) -> str:
    signal = (
        f'conditions: [{{type: {READY_CONDITION}, status: "True"}}]'
        if config.signal == "conditions"
        else "pods: {namespace: kube-system, selector: {app: init}}"
    )
    body = f"""\
    - name: {name}
      match: {{labels: {{pool: gpu}}}}
      taint: {{key: {key}, value: wait, effect: NoSchedule}}
      readyWhen:
        {signal}
    """
    return textwrap.dedent(body) + textwrap.indent(config.yaml(), "  ") + "\n"


def rules_texts(config: GateConfig) -> tuple[str, str]:
    """(A, B): A gates with `warmup`; B, the update the guard holds, adds `late`."""
    header = "apiVersion: nodegate.dev/v1\nkind: NodeRules\nstartupGates:\n"
    warmup = _gate("warmup", "startup.example.com/init", config)
    late = _gate("late", "startup.example.com/late", config)
    return header + warmup, header + warmup + late


@dataclass
class Pod:
    since: datetime | None = None
    """Ready since (ground truth; the kubelet writes it as its transition time); None: not
    Ready."""
    uid: str = ""
    """The Node object whose kubelet reported that readiness."""
    written: datetime | None = None
    """When its status was last written, as the API server stamps it."""


@dataclass
class World:
    config: GateConfig
    skew: timedelta = timedelta(0)
    """How far the node's clock is off: every time the node writes (its pod's Ready transition,
    its condition's) is shifted by it; nothing else is."""
    t: int = 0
    node: NodeState | None = None
    rebooted_at: datetime = T0
    """Ground truth: when the node's current boot began (its creation for the first one)."""
    life_began: datetime = T0
    """Ground truth: when the current life of the gate began (creation, or the reboot that
    put it back)."""
    pod: Pod = field(default_factory=Pod)
    up: bool = True
    webhook: bool = True
    offered: str = "A"
    confirmed: bool = False
    in_force: str | None = "A"
    note: str | None = None
    sight: BootSight | None = None
    pod_view: PodView | None = None
    """The reconciler's view of the pod (`init_pods.sighted`); None: not looked at since up."""
    conditions_seen: dict[ConditionKey, Sighting] | None = None
    """The reconciler's condition sightings (`core.decisions.sightings`); None: not looked at since
    up."""
    history: frozenset[tuple[str, str]] = frozenset()
    serials: int = 0
    violations: list[str] = field(default_factory=list)
    trace: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    """(time, taints on the node) after every step: what nodegate decided, as seen from outside."""

    def __post_init__(self) -> None:
        a, b = rules_texts(self.config)
        self.rules = {"A": parse_rules(a), "B": parse_rules(b)}
        self.updates = {
            "A": RulesUpdate(self.rules["A"], rules_digest(a), "A"),
            "B": RulesUpdate(self.rules["B"], rules_digest(b), "B"),
        }
        self.served = ServedRules(
            lambda: self.updates[self.in_force] if self.up and self.in_force else None,
            lambda: self.note,
        )
        self.served.offer(self.updates["A"])
        self._apply("A")

    @property
    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def _apply(self, which: str) -> None:
        self.in_force = which
        self.note = self.updates[which].digest
        self.history |= self.rules[which].owned_taints()

    def _serial(self) -> str:
        self.serials += 1
        return str(self.serials)

    def step(self, what: str, seconds: int = 0) -> None:
        self.t += seconds
        getattr(self, f"_{what}")()
        self._observe()
        taints = tuple(sorted(str(t) for t in self.node.taints)) if self.node else ()
        self.trace.append((self.t, taints))

    # --- the steps ------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        for _ in range(3):  # a re-gate and its lift are two writes
            if not self._write_once():
                return

    def _create(self) -> None:
        self.t += 1  # deleted and registered again: a later second than anything seen before
        rules = self.served()
        taints: tuple[NodeTaint, ...] = ()
        if self.webhook and rules is not None:
            gates = gates_for(rules, POOL)
            taints = tuple(NodeTaint(g.taint.key, g.taint.effect, g.taint.value) for g in gates)
            # What the reconciler owns: the last rules the leader applied (on the Lease).
            applied = next(k for k, u in self.updates.items() if u.digest == self.note)
            owned = self.rules[applied].owned_taints()
            for taint in taints:
                if taint.identity not in owned:
                    self.violations.append(f"t={self.t}: born with {taint} that no rules own")
        serial = self._serial()
        self.node = NodeState(
            name="n", labels=POOL, taints=taints, created=self.now, uid=serial, boot_id=serial
        )
        self.rebooted_at = self.life_began = self.now
        self.sight = None  # a new Node object: the informer forgets the old one
        self.conditions_seen = None

    def _pod_ready(self) -> None:
        if self.node is None:
            return
        if self.config.signal == "pods":
            self.pod = Pod(self.now, self.node.uid, self.now)
            return
        # The agent reports the condition True; one already True keeps its transition time,
        # as a status update that changes nothing does on the API.
        held = self._condition()
        if held is not None and held.status == "True" and held.last_transition_time:
            self.pod = Pod(held.last_transition_time - self.skew, self.node.uid)
            return
        self._set_condition("True")
        self.pod = Pod(self.now, self.node.uid)

    def _pod_not_ready(self) -> None:
        self.pod = Pod(written=self.now)
        if self.config.signal == "conditions" and self.node is not None:
            held = self._condition()
            if held is None or held.status != "False":
                self._set_condition("False")

    def _condition(self) -> NodeCondition | None:
        assert self.node is not None
        return next((c for c in self.node.conditions if c.type == READY_CONDITION), None)

    def _set_condition(self, status: str) -> None:
        assert self.node is not None
        others = tuple(c for c in self.node.conditions if c.type != READY_CONDITION)
        ready = NodeCondition(READY_CONDITION, status, "", self.now + self.skew)
        self.node = replace(self.node, conditions=(*others, ready))

    def _reboot(self) -> None:
        if self.node is None:
            return
        self.t += 1  # a reboot takes a second at least; the pod's status stays as it was
        self.node = replace(self.node, boot_id=self._serial())
        self.rebooted_at = self.now

    def _down(self) -> None:
        self.up = False
        self.sight = None
        self.pod_view = None
        self.conditions_seen = None

    def _up(self) -> None:
        if self.up:
            return
        self.up = True
        self.in_force = None  # a new process: nothing in force until the guard lets some rules
        if self.offered == "A" or self.confirmed:
            self._apply(self.offered)

    def _hold(self) -> None:
        self.offered, self.confirmed = "B", False
        self.served.offer(self.updates["B"])

    def _confirm(self) -> None:
        if self.offered == "B":
            self.confirmed = True
            if self.up:
                self._apply("B")

    def _revert(self) -> None:
        self.offered, self.confirmed = "A", False
        self.served.offer(self.updates["A"])
        if self.up:
            self._apply("A")

    def _webhook_down(self) -> None:
        self.webhook = False

    def _webhook_up(self) -> None:
        self.webhook = True

    # --- the reconciler -------------------------------------------------------------------------

    def _observe(self) -> None:
        """The informers see the node and the pod (every step, whether or not it is
        reconciled), and the reconciler sights what they show."""
        if not self.up:
            return
        pod = self.pod
        token = f"{pod.since + self.skew:%Y-%m-%dT%H:%M:%S}" if pod.since is not None else None
        view = PodView("n", T0, pod.written, pod.uid, token, {})
        self.pod_view = sighted(view, self.pod_view, self.now)
        if self.node is not None:
            self.sight = track_boot(self.sight, self.node.boot_id, self.now)
            episodes = condition_episodes(self.node.conditions, lambda _type: True)
            self.conditions_seen = track(self.conditions_seen, episodes, self.now)

    def _write_once(self) -> bool:
        node, which = self.node, self.in_force
        if not self.up or node is None or which is None:
            return False
        self._observe()
        rules = self.rules[which]
        sight = self.sight
        view = self.pod_view
        pods_ready = {
            g.name: pod_signals(g, [view])
            for g in rules.startup_gates
            if view is not None and self.config.signal == "pods"
        }
        facts = PlanFacts(
            now=self.now,
            previously_owned=self.history,
            condition_sightings=self.conditions_seen or {},
            gate_pod_signals=pods_ready,
            boot_first_seen=sight.first_seen if sight else None,
            previous_boot_seen=sight.previous_last_seen if sight else None,
        )
        result = plan(node, rules, facts)
        if result.is_empty:
            return False
        if result.gates_put_back:
            self.life_began = self.rebooted_at
        for change in result.remove_taints:
            self._check_lift(rules, change.taint)
        self.node = applied(result, node)
        return True

    def _check_lift(self, rules: NodeRules, taint: NodeTaint) -> None:
        gate = next((g for g in rules.startup_gates if g.taint.identity == taint.identity), None)
        if gate is None:
            return  # its rule left the rules in force
        config = self.config
        began = self.life_began
        ready = (
            self.pod.since is not None
            and self.node is not None
            and self.pod.uid == self.node.uid
            and self.pod.since >= began
            and (config.min_hold is None or self.now >= began + timedelta(seconds=config.min_hold))
        )
        timed_out = (
            config.timeout is not None
            and config.on_timeout == "lift"
            and self.now >= began + timedelta(seconds=config.timeout)
        )
        if not (ready or timed_out):
            self.violations.append(
                f"t={self.t}: {gate.name} lifted without readiness of this life (pod "
                f"{self.pod}, life began {began:%H:%M:%S}) or a timeout that says lift"
            )

    def settle(self) -> None:
        """The admin settles the rules, the reconciler runs, the pod is (or stays) Ready in
        this life: every gate the rules in force name must then go."""
        if self.offered == "B" and not self.confirmed:
            self.step("revert")
        self.step("up", 1)
        self.step("reconcile")
        if self.node is None:
            return
        if not (
            self.pod.uid == self.node.uid and self.pod.since and self.pod.since >= self.life_began
        ):
            if self.config.signal == "conditions":
                # An agent starting on a new boot reports not-ready first: a condition carried
                # over from the previous boot says nothing of this one (docs/gates.md).
                self.step("pod_not_ready", 1)
            self.step("pod_ready", 1)
        self.step("reconcile", (self.config.min_hold or 0) + 1)
        self.step("reconcile", 1)
        assert self.in_force is not None
        for gate in self.rules[self.in_force].startup_gates:
            if self.node.taint(gate.taint.identity) is not None:
                self.violations.append(f"{gate.name} still on the node with its pod Ready")


def pod_signals(rule: TaintRule, pods: list[PodView]) -> tuple[Sighting, ...]:
    """The ready signals of a rule's pods on the node (`pods`: those of its one pod source)."""
    return tuple(signal for spec in rule.reads().pods for signal in spec_signals(spec, pods))
