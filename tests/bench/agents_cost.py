"""What node-agent rules (`nodeAgents`, docs/agents.md) cost the reconciler at N nodes: the
memory of the DaemonSets and DaemonSet pods it holds for them, and the CPU of deciding.

`python -m tests.bench.agents_cost --nodes 5000` (`make bench-agents`): no control plane. An
AKS-shaped cluster of N nodes with 20 DaemonSets, each with a pod on every node (N x 20 pods,
`agents_scenario.py`), is served by a fake list-watch API as a LIST returns it: 200 pods a
page, each page one JSON document of pods as the API server writes them, parsed with
`json.loads` as the reconciler's client does. Printed as Markdown tables:

1. **Memory.** The real `NodeAgents` (reconciler/nodes/sources/node_agents.py) is made to follow the
   three node-agent rules (one is `daemonSets: auto`: every namespace), so its own informers
   (the real `Informer`, started by `Watching.start`) list the DaemonSets and the pods, turn
   each pod into an `AgentPod` (`slim_agent_pod`) and hand it to `NodeAgents._on_pod`, which
   indexes it by node. Beside it, the same pods through the same informer and the same
   per-node index, held as the generic `PodView` (`slim_pod`, core/decisions/init_pods.py).
   Each is measured in processes of its own, after a full collection: with tracemalloc, the
   bytes allocated while listing and still held; without it, VmRSS before and after (what the
   process grew by) and VmHWM (its peak while listing, the parsed pages included). The raw
   pods as parsed are measured on one LIST page of 1,000, for scale.

   Under tracemalloc every allocation is recorded, and parsing 100,000 pods of several
   hundred objects each would take minutes; so the traced processes are served the same pods
   built from their JSON differently (`Pods.shared_page`): each DaemonSet's pod parsed once,
   the parts that differ from pod to pod (name, uid, node, times, container IDs) parsed per
   pod from one JSON document, the rest shared. They are equal to the parsed pages (checked
   at start), and every string a view keeps comes from `json.loads` either way, so what is
   held is the same (`--raw json` traces the parsed pages instead, for a check).
2. **CPU.** In this process, once its own `NodeAgents` has listed the pods as above, each of
   N Nodes (kubelet size, as the API server returns them, held as the reconciler's
   `slim_node`) is decided once per measure, node after node (every measure on a node before
   the next node), each call timed alone (`perf_counter_ns`): `agent_readiness` for each
   rule with the inputs `NodeAgents.readiness` gives it (every DaemonSet, the node's pods,
   its CSI drivers, the lifted taints); `NodeAgents.readiness` for the three rules (and with
   the `agents` rule continuous: a bootstrapOnly rule is looked up only where its taint still
   is); `plan` with the facts a reconcile gathers (the agents' readiness, their not-Ready
   episodes sighted 10 minutes earlier and again now, `ConditionSightings.look`, the CSI
   drivers), under the three rules (both ways), under examples/rules.yaml, and under both.
   The process freezes its start-up objects as the reconciler does
   (`heap.freeze_startup_objects`) and the cycle collector runs while the calls are timed;
   its full collections then are counted, and what the rest of the machine used meanwhile.

The cycle collector is off while pods are listed (it would walk every pod held so far, again
and again: minutes at 100,000 pods); that changes how long the list takes, which is not
reported, not what is held, which is measured after a full collection. Waits first for a
quiet machine, as `make bench` does. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import gc
import json
import linecache
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from nodegate.core.decisions.init_pods import PodView, slim_pod
from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_episodes,
    agent_readiness,
    agent_types_unknown,
    lifted_taints,
)
from nodegate.core.decisions.node_decision import plan_facts
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.sightings_record import worth_keeping
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.views.daemon_sets import (
    DAEMON_SET_POD_LABEL,
    AgentPod,
    slim_daemon_set,
)
from nodegate.reconciler.kit import heap
from nodegate.reconciler.kit.health import Health
from nodegate.reconciler.kit.kube import Page, RawObject, Selection, WatchCancel
from nodegate.reconciler.nodes.node_view import annotation_filter, slim_node
from nodegate.reconciler.nodes.records.condition_sightings import ConditionSightings
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents, PodsByNode
from nodegate.reconciler.nodes.sources.watched import Watching
from tests.bench import agents_scenario as scenario
from tests.bench.stats import percentile

EXAMPLE_RULES = Path(__file__).resolve().parents[2] / "examples" / "rules.yaml"
HELD = ("agent", "podview")
"""The two ways the pods are held: `AgentPod` in `NodeAgents`, `PodView` in the same index."""
MiB = 1024 * 1024


class SilentWatches:
    """Watches that deliver nothing until cancelled or `close`d: a benchmark's fake API lists,
    and nothing changes after."""

    def __init__(self) -> None:
        self._closed = threading.Event()

    def watch(
        self,
        selection: Selection,
        resource_version: str,
        timeout_seconds: int,
        cancel: WatchCancel | None = None,
    ) -> Iterator[tuple[str, RawObject]]:
        while not self._closed.wait(1.0):
            if cancel is not None and cancel.cancelled:
                return
        yield from ()

    def close(self) -> None:
        self._closed.set()


class AgentsApi(SilentWatches):
    """A list-watch API (`kube.ListWatch`) serving the scenario's DaemonSets and pods: LIST
    pages made as they are asked for (so only one page of raw pods exists at a time), and
    watches that deliver nothing."""

    def __init__(self, nodes: int, raw: str = "json") -> None:
        """`raw`: "json", each page parsed from its JSON text; "shared", `Pods.shared_page`."""
        super().__init__()
        self.pods = scenario.Pods(nodes)
        self._page = self.pods.page if raw == "json" else self.pods.shared_page

    def list_page(self, selection: Selection, limit: int, continue_token: str | None) -> Page:
        if selection.kind == "DaemonSet":
            items = [
                scenario.daemon_set_body(a)
                for a in scenario.AGENTS
                if selection.namespace in (None, a.namespace)
            ]
            return Page(items, "1", None)
        if selection.kind != "Pod" or selection.namespace is not None:
            raise NotImplementedError(f"not served: {selection}")
        start = int(continue_token or 0)
        more = start + limit < len(self.pods)
        return Page(self._page(start, limit), "1", str(start + limit) if more else None)


def watching(api: AgentsApi, errors: list[BaseException]) -> Watching:
    def on_error(_name: str, err: BaseException) -> None:
        errors.append(err)

    return Watching(api, on_error, Health(), on_node=lambda _node: None)


def wait_for(check: Callable[[], bool], what: str, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def follow_agents(api: AgentsApi, rules: NodeRules, probe: NodeState) -> NodeAgents:
    """The real `NodeAgents`, following `rules`, once its informers have listed everything
    (every rule is looked up on `probe`, given every rule's taint: a bootstrapOnly rule is
    looked up only where its taint still is)."""
    errors: list[BaseException] = []
    agents = NodeAgents(watching(api, errors), on_every_node=lambda: None)
    agents.follow(rules)
    wanted = {r.name for r in rules.node_agents}
    taints = tuple(NodeTaint(r.taint.key, r.taint.effect) for r in rules.node_agents)
    tainted = replace(probe, taints=probe.taints + taints)
    wait_for(lambda: set(agents.readiness(rules, tainted, {})) == wanted or bool(errors), "sync")
    if errors:
        raise errors[0]
    return agents


class PodViewIndex:
    """The same pods held as the generic `PodView`: the same informer and the same per-node
    index as `NodeAgents._on_pod` keeps, only the view differs (no annotations kept)."""

    def __init__(self, api: AgentsApi) -> None:
        self._by_node: PodsByNode[PodView] = PodsByNode()
        self._lock = threading.Lock()
        errors: list[BaseException] = []
        selection = Selection("Pod", None, label_selector=DAEMON_SET_POD_LABEL)
        self.informer, self.stop = watching(api, errors).start(
            "daemonset pods as PodView",
            selection,
            lambda raw: slim_pod(raw, lambda _key: False),
            self._on_pod,
        )
        wait_for(lambda: self.informer.synced.is_set() or bool(errors), "sync")
        if errors:
            raise errors[0]

    def _on_pod(self, key: str, old: PodView | None, new: PodView | None) -> None:
        if old == new:
            return
        with self._lock:
            self._by_node.move(key, old, new)


def machine_busy() -> float:
    """CPU seconds every core has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    ticks: int = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / ticks


def status_bytes(field: str) -> int:
    """A size from /proc/self/status (VmRSS, VmHWM), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def hold(held: str, api: AgentsApi, rules: NodeRules, probe: NodeState) -> object:
    """List every pod and hold it as `held` says; the cycle collector off meanwhile."""
    gc.disable()
    try:
        holder: object = follow_agents(api, rules, probe) if held == "agent" else PodViewIndex(api)
    finally:
        gc.enable()
    return holder


def measure_rss(
    held: str, api: AgentsApi, rules: NodeRules, probe: NodeState
) -> tuple[object, dict[str, Any]]:
    """Hold every pod as `held`: the holder (kept alive) and what the process grew by."""
    heap.freeze_startup_objects()
    before = status_bytes("VmRSS")
    holder = hold(held, api, rules, probe)
    gc.collect()
    after = status_bytes("VmRSS")
    return holder, {
        "held": held,
        "pods": len(api.pods),
        "rss_before": before,
        "rss_delta": after - before,
        "hwm_delta": status_bytes("VmHWM") - before,
    }


def measure_traced(held: str, nodes: int, raw: str) -> dict[str, Any]:
    """Hold every pod as `held`, traced: what is held, and where it was allocated."""
    rules = scenario.agent_rules()
    probe = node_state(0, nodes, rules)
    api = AgentsApi(nodes, raw)
    if api.pods.page(0, 200) != api.pods.shared_page(0, 200):
        raise AssertionError("shared pages differ from parsed ones")
    heap.freeze_startup_objects()
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    holder = hold(held, api, rules, probe)
    gc.collect()
    result: dict[str, Any] = {
        "held": held,
        "pods": len(api.pods),
        "raw": raw,
        "traced": tracemalloc.get_traced_memory()[0] - before,
    }
    snapshot = tracemalloc.take_snapshot()
    result["lines"] = [
        (where(stat.traceback[0]), stat.size, stat.count)
        for stat in snapshot.statistics("lineno")
        if stat.size >= result["traced"] / 100
    ]
    del snapshot
    if held == "agent":
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        parsed = api.pods.page(0, 1000)
        result["raw_per_pod"] = (tracemalloc.get_traced_memory()[0] - base) / len(parsed)
        result["json_per_pod"] = sum(len(api.pods.text(i)) for i in range(1000)) / 1000
        del parsed
    api.close()
    del holder
    return result


def where(frame: tracemalloc.Frame) -> str:
    """`module.py:line` and the line's code."""
    path = Path(frame.filename)
    parts = path.parts
    shown = "/".join(parts[parts.index("nodegate") + 1 :]) if "nodegate" in parts else path.name
    code = linecache.getline(frame.filename, frame.lineno).strip()
    return f"{shown}:{frame.lineno} `{code}`"


def memory_process(held: str, nodes: int, traced: bool, raw: str) -> dict[str, Any]:
    """The whole of one measuring process."""
    if traced:
        return measure_traced(held, nodes, raw)
    rules = scenario.agent_rules()
    api = AgentsApi(nodes)
    holder, result = measure_rss(held, api, rules, node_state(0, nodes, rules))
    api.close()
    del holder
    return result


def node_state(index: int, nodes: int, rules: NodeRules) -> NodeState:
    """A Node as the reconciler caches it (`slim_node`)."""
    return slim_node(scenario.node_body(index, nodes), annotation_filter(rules)).state


# --- CPU ---------------------------------------------------------------------------------------


@dataclass
class Timings:
    """Nanoseconds per call, by measure, in the order the rows are printed; and the full
    collections of the cycle collector while they were timed (their pauses, seconds)."""

    rows: dict[str, list[int]] = field(default_factory=dict)
    full_collections: list[float] = field(default_factory=list)
    plans: dict[str, Counter[str]] = field(default_factory=dict)
    """What the plans of each `plan` measure came to, node by node (what was timed did that)."""
    seconds: float = 0.0
    """How long the timings took, wall clock."""
    others: float = 0.0
    """Cores the rest of the machine kept busy meanwhile (its CPU time over `seconds`): on 2
    shared cores, another process's work slows the timed calls."""

    def time(self, measure: str, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter_ns()
        result = call(*args)
        self.rows.setdefault(measure, []).append(time.perf_counter_ns() - started)
        return result


def rules_with_examples() -> NodeRules:
    """examples/rules.yaml with the three node-agent rules added (it has none)."""
    example = EXAMPLE_RULES.read_text()
    agents = scenario.AGENT_RULES.split("nodeAgents:", 1)[1]
    return parse_rules(example + "\nnodeAgents:" + agents)


class Facts:
    """A node's `PlanFacts` as a reconcile gathers them under one set of rules: its agents'
    readiness, their not-Ready episodes sighted 10 minutes ago and again now (so a `for` of
    up to 10 minutes has run out), its CSI drivers."""

    def __init__(self, agents: NodeAgents, rules: NodeRules) -> None:
        self._agents = agents
        self._rules = rules
        self._sightings = ConditionSightings()

    def of(self, node: NodeState) -> PlanFacts:
        rules = self._rules
        found: Mapping[str, AgentReadiness] = {}
        if rules.node_agents:
            found = self._agents.readiness(rules, node, scenario.CSI_DRIVERS)
        keep = worth_keeping(node, rules)
        episodes = agent_episodes(rules, found)
        unknown = agent_types_unknown(rules, found)
        for when in (scenario.NOW - timedelta(minutes=10), scenario.NOW):
            seen = self._sightings.look(node.name, node, rules, when, keep, episodes, unknown)
        return plan_facts(
            scenario.NOW, frozenset(), seen, None, found, csi_drivers=scenario.CSI_DRIVERS
        )


def measure_cpu(agents: NodeAgents, nodes: list[NodeState], rules: NodeRules) -> Timings:
    """Each node decided once per measure, each call timed alone, node after node, every
    measure on one node before the next node (so a moment when the machine is busy with
    something else falls on all the measures alike, not on one). `rules` the three rules as
    written (`agents` bootstrapOnly); their variant with `agents` continuous beside them."""
    timings = Timings()
    daemon_sets = [slim_daemon_set(scenario.daemon_set_body(a)) for a in scenario.AGENTS]
    lifted = lifted_taints(rules)
    by_node: Mapping[str, dict[str, AgentPod]] = agents._by_node.nodes  # what `readiness` reads
    continuous = scenario.agent_rules("continuous")
    looked_up = [
        ("`NodeAgents.readiness`, the 3 rules", rules),
        ("`NodeAgents.readiness`, the 3 rules, `agents` continuous", continuous),
    ]
    planned = [
        ("`plan`, the 3 rules", rules),
        ("`plan`, the 3 rules, `agents` continuous", continuous),
        ("`plan`, examples/rules.yaml (no node agents)", parse_rules(EXAMPLE_RULES.read_text())),
        ("`plan`, examples/rules.yaml + the 3 rules", rules_with_examples()),
    ]
    facts = [Facts(agents, found) for _, found in planned]
    stop_observing = heap.observe_pauses(
        lambda generation, seconds: timings.full_collections.extend(
            [seconds] if generation == 2 else []
        )
    )
    for node in nodes:
        pods = list(by_node.get(node.name, {}).values())
        for rule in rules.node_agents:
            kind = "daemonSets: auto" if rule.discovers else "listed"
            timings.time(
                f"`agent_readiness`, rule `{rule.name}` ({kind})",
                agent_readiness,
                rule,
                node,
                daemon_sets,
                pods,
                scenario.CSI_DRIVERS,
                lifted,
            )
        for measure, found in looked_up:
            timings.time(measure, agents.readiness, found, node, scenario.CSI_DRIVERS)
        for (measure, found), gathered in zip(planned, facts, strict=True):
            made = timings.time(measure, plan, node, found, gathered.of(node))
            outcomes = timings.plans.setdefault(measure, Counter())
            outcomes["a taint added"] += bool(made.add_taints)
            outcomes["a taint removed"] += bool(made.remove_taints)
            outcomes["a recheck after a while"] += made.recheck_after is not None
            outcomes["only annotations written"] += not (
                made.is_empty or made.add_taints or made.remove_taints or made.set_labels
            )
            outcomes["no write"] += made.is_empty
    stop_observing()
    return timings


# --- the run -----------------------------------------------------------------------------------


def run_memory_process(held: str, traced: bool, nodes: int) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "tests.bench.agents_cost", "--nodes", str(nodes)]
    argv += ["--memory", held, "--raw", "shared" if traced else "json"]
    argv += ["--traced"] if traced else []
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def result_of(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=900)
    if process.returncode != 0:
        raise RuntimeError(f"{process.args!r} exited {process.returncode}")
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--max-load", type=float, default=2.0)
    parser.add_argument("--load-wait-minutes", type=float, default=20.0)
    parser.add_argument("--memory", choices=HELD, help="measure this one only (one process)")
    parser.add_argument("--traced", action="store_true", help="with --memory: tracemalloc")
    parser.add_argument("--raw", choices=("json", "shared"), default="json", help="with --memory")
    args = parser.parse_args(argv)
    if args.memory:
        found = memory_process(args.memory, args.nodes, args.traced, args.raw)
        print(json.dumps(found), flush=True)
        return 0
    from tests.bench.run import LoadSampler, wait_for_quiet  # its imports are for `make bench`

    load, quiet = wait_for_quiet(args.max_load, args.load_wait_minutes * 60)
    loads = LoadSampler()
    loads.start()
    started = time.monotonic()
    # The other three measures in processes of their own, beside this one's list (2 cores);
    # the CPU timings wait until all are done, so they run alone.
    others = {
        spec: run_memory_process(*spec, args.nodes)
        for spec in (("agent", True), ("podview", True), ("podview", False))
    }
    rules = scenario.agent_rules()
    api = AgentsApi(args.nodes)
    agents, measured = measure_rss("agent", api, rules, node_state(0, args.nodes, rules))
    assert isinstance(agents, NodeAgents)
    memory = {("agent", False): measured} | {
        spec: result_of(process) for spec, process in others.items()
    }
    print(f"memory measured in {time.monotonic() - started:.0f} s", flush=True)
    nodes = [node_state(i, args.nodes, rules) for i in range(args.nodes)]
    gc.collect()
    busy, own, wall = machine_busy(), os.times(), time.monotonic()
    timings = measure_cpu(agents, nodes, rules)
    timings.seconds = time.monotonic() - wall
    mine = sum(os.times()[:2]) - sum(own[:2])
    timings.others = (machine_busy() - busy - mine) / timings.seconds
    api.close()
    agents.stop()
    loads.stop()
    mean, peak = loads.summary()
    during = (
        f"during the run {mean:.1f} mean, {peak:.1f} max (every 10 s)"
        if loads.samples
        else "not sampled during the run (shorter than 10 s)"
    )
    print()
    print(memory_table(memory, args.nodes))
    print()
    print(cpu_table(timings, args.nodes))
    print()
    print(
        f"* {args.nodes:,} nodes, {len(scenario.AGENTS)} DaemonSets, "
        f"{args.nodes * len(scenario.AGENTS):,} pods; 1-minute load average at start "
        f"{load[0]:.2f} ({'quiet' if quiet else 'CONTENDED'}), {during}; whole run "
        f"{time.monotonic() - started:.0f} s"
    )
    return 0


def mib(value: float) -> str:
    return f"{value / MiB:.1f} MiB"


def memory_table(memory: Mapping[tuple[str, bool], Mapping[str, Any]], nodes: int) -> str:
    names = {
        "agent": "`AgentPod` in `NodeAgents` (the reconciler's)",
        "podview": "generic `PodView` (`slim_pod`), same informer and index",
    }
    pods = memory["agent", True]["pods"]
    lines = [
        f"| {nodes:,} nodes x {len(scenario.AGENTS)} DaemonSets = {pods:,} pods, held as "
        "| tracemalloc: held (per pod) | VmRSS: the process grew by "
        "| VmHWM: its peak while listing, over VmRSS before |",
        "| --- | --- | --- | --- |",
    ]
    for held in HELD:
        traced, rss = memory[held, True], memory[held, False]
        lines.append(
            f"| {names[held]} | {mib(traced['traced'])} ({traced['traced'] / pods:.0f} B) "
            f"| {mib(rss['rss_delta'])} | {mib(rss['hwm_delta'])} |"
        )
    agent, podview = memory["agent", True], memory["podview", True]
    lines += [
        "",
        f"* `AgentPod` holds {1 - agent['traced'] / podview['traced']:.0%} less than `PodView`: "
        f"{mib(podview['traced'] - agent['traced'])} at {pods:,} pods.",
        "* one raw pod as parsed, for scale (tracemalloc, a LIST page of 1,000): "
        f"{agent['raw_per_pod'] / 1024:.1f} KiB ({agent['json_per_pod'] / 1024:.1f} KiB of "
        "JSON).",
        f"* VmRSS before listing: {mib(memory['agent', False]['rss_before'])} (`AgentPod`), "
        f"{mib(memory['podview', False]['rss_before'])} (`PodView`).",
    ]
    for held in HELD:
        lines.append(
            f"* where the `{held}` bytes were allocated (tracemalloc; lines of 1 % or more):"
        )
        for where, size, count in memory[held, True]["lines"]:
            lines.append(
                f"  * {where}: {mib(size)} in {count:,} blocks ({size / count:.0f} B each)"
            )
    return "\n".join(lines)


def cpu_table(timings: Timings, nodes: int) -> str:
    lines = [
        f"| per node, over all {nodes:,} nodes | p50 µs | p99 µs | max µs | all nodes, s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for measure, samples in timings.rows.items():
        us = [s / 1000 for s in samples]
        lines.append(
            f"| {measure} | {percentile(us, 50):.0f} | {percentile(us, 99):.0f} "
            f"| {max(us):.0f} | {sum(us) / 1e6:.2f} |"
        )
    full = timings.full_collections
    lines.append("")
    for measure, outcomes in timings.plans.items():
        said = ", ".join(f"{what} {count:,}" for what, count in outcomes.items())
        lines.append(f"* {measure}: nodes with {said}")
    lines.append(
        f"* full (generation 2) collections while the calls were timed: {len(full)}, "
        f"{sum(full) * 1000:.0f} ms in all"
    )
    lines.append(
        f"* the timings took {timings.seconds:.1f} s; meanwhile the rest of the machine kept "
        f"{timings.others:.2f} of its {os.cpu_count()} cores busy (/proc/stat)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
