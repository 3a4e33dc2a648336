"""What the benchmark does to the cluster, as data: the rules, the nodes, the changes.

Both operators (nodegate and the kopf baseline) implement exactly these rules, so every figure
compares the same work: a label taint every node needs (cold converge), a label flip, a
condition flip and a label every joining node of the race pool carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodegate.bootstrap.registration import registration_taints
from nodegate.core.rules.loader import parse_rules
from nodegate.localcluster.nodes import SimNode

PREFIX = "bench.nodegate.dev"
CLASS_KEY = f"{PREFIX}/class"  # every benchmark node carries it: the cold-converge taint
FLIP_KEY = f"{PREFIX}/flip"  # the label that is flipped
PROBLEM_TYPE = "BenchProblem"  # the node condition that is flipped
PROBLEM_KEY = f"{PREFIX}/problem"
RACE_KEY = f"{PREFIX}/race"  # joining nodes of the race pool carry it
FLOOR_KEY = f"{PREFIX}/floor"  # put and taken off by a plain client: the API server's own time
BENCH_TAINT_KEYS = frozenset({CLASS_KEY, FLIP_KEY, PROBLEM_KEY, RACE_KEY})
RACE_POOL = "race"
RACE_NAMESPACE = "bench-race"
IMAGES_PER_NODE = 40  # status.images entries: ~10.5 KiB per Node as the API server returns it

RULES_YAML = f"""apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: bench-class
    match: {{labels: {{{CLASS_KEY}: general}}}}
    taint: {{key: {CLASS_KEY}, value: general, effect: NoSchedule}}
    nodeMayLift: true
  - name: bench-flip
    match: {{labels: {{{FLIP_KEY}: "on"}}}}
    taint: {{key: {FLIP_KEY}, value: "on", effect: NoSchedule}}
    nodeMayLift: true
  - name: bench-race
    match: {{labels: {{{RACE_KEY}: "yes"}}}}
    taint: {{key: {RACE_KEY}, value: "yes", effect: NoSchedule}}
    nodeMayLift: true
conditionTaints:
  - name: bench-problem
    conditions:
      - {{type: {PROBLEM_TYPE}, status: "True"}}
    taint: {{key: {PROBLEM_KEY}, value: "true", effect: NoSchedule}}
nodePools:
  - name: {RACE_POOL}
    provider: oke
    size: 1000
    labels: {{{RACE_KEY}: "yes"}}
"""

# Node writes and their answers, nothing else: the audit log is where each client's writes
# (and 409s) are counted, whoever the client is (nodegate, kopf, kwok, the controller-manager).
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
    resources: [{group: "", resources: [nodes, nodes/status]}]
  - level: None
"""

# kwok's stock heartbeat stage rewrites each Node's status every 600-610 s; a kubelet with node
# leases reports status every 5 minutes (nodeStatusReportFrequency), so the benchmark's watch
# carries the churn of a real cluster: N/300 Node updates per second. Leases are renewed by kwok
# every 10 s as a kubelet's are (Lease objects, not Node events).
HEARTBEAT_STAGE_FILE = "node-heartbeat-with-lease-node-heartbeat-with-lease.yaml"
HEARTBEAT_PERIOD_SECONDS = 300


def heartbeat_stage(stock: str, period_seconds: int = HEARTBEAT_PERIOD_SECONDS) -> str:
    """kwok's stock heartbeat Stage with the kubelet's status-report period instead of kwok's."""
    stock_delay = "durationMilliseconds: 600000"
    stock_jitter = "jitterDurationMilliseconds: 610000"
    if stock_delay not in stock or stock_jitter not in stock:
        raise ValueError("kwok's heartbeat Stage changed: update tests/bench/scenario.py")
    period_ms = period_seconds * 1000
    return stock.replace(stock_delay, f"durationMilliseconds: {period_ms}").replace(
        stock_jitter, f"jitterDurationMilliseconds: {period_ms + 10_000}"
    )


def registration_taints_of_race_pool() -> list[dict[str, str]]:
    """The taints bootstrap renders for the race pool's kubelets (`--register-with-taints`)."""
    rules = parse_rules(RULES_YAML, "tests/bench/scenario.py")
    pool = next(p for p in rules.node_pools if p.name == RACE_POOL)
    return [
        {"key": t.key, "value": t.value, "effect": t.effect}
        if t.value
        else {"key": t.key, "effect": t.effect}
        for t in registration_taints(rules, pool)
    ]


def node_name(index: int) -> str:
    return f"bench-{index:05d}"


def race_node_name(variant: str, index: int) -> str:
    return f"race-{variant}-{index:04d}"


def bench_node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: tuple[Mapping[str, str], ...] = (),
    in_class: bool = True,
) -> dict[str, Any]:
    """A kwok-managed Node of kubelet size, in the class every benchmark node belongs to
    (`in_class=False`: a node no benchmark rule matches, the race's control)."""
    return SimNode(
        name=name,
        labels={**({CLASS_KEY: "general"} if in_class else {}), **(labels or {})},
        taints=taints,
        kwok=True,
        images=IMAGES_PER_NODE,
    ).body()


ChangeKind = Literal["label", "condition"]


@dataclass(frozen=True)
class Change:
    """One change to one node and the bench taint it must lead to (present or absent)."""

    node: str
    kind: ChangeKind
    on: bool

    @property
    def taint_key(self) -> str:
        return FLIP_KEY if self.kind == "label" else PROBLEM_KEY

    def satisfied_by(self, taint_keys: frozenset[str]) -> bool:
        return (self.taint_key in taint_keys) == self.on


def steady_changes(kind: ChangeKind, nodes: list[str]) -> list[Change]:
    """Turn the thing on for each node, then off for each in the same order: half adds, half
    removals, and every node's removal comes long after its add (nothing overlaps)."""
    return [Change(n, kind, True) for n in nodes] + [Change(n, kind, False) for n in nodes]


def burst_changes(kind: ChangeKind, nodes: list[str]) -> list[Change]:
    """All at once: the thing turned on for every node."""
    return [Change(n, kind, True) for n in nodes]


STORM_PHASES: tuple[tuple[str, bool], ...] = (("taint", True), ("untaint", False))
"""node-readiness-controller's scale workload (its test/scale): every node's condition turns
bad at once (the tainting phase), then good at once (the untainting phase)."""


def storm_changes(nodes: list[str], on: bool) -> list[Change]:
    """One storm phase: the condition flipped on every node, sent all at once."""
    return [Change(n, "condition", on) for n in nodes]
