"""`nodegate plan --rules NEW.yaml`: what new rules would do to the live cluster, before merging;
offline with `--nodes FILE` (a CI job without cluster credentials).

Exit codes for CI (docs/infra.md, "Before `pulumi up` or a GitOps merge"): 0 no change, 2 changes,
3 the reconciler's blast-radius guard would hold the new rules, 1 an error (bad rules, no
cluster, an unreadable input file). Nothing is written to the cluster, whatever happens.

The plan reads what it plans with (`cli.plan_sources.PlanInputs`) from the live cluster, or from
files offline; `planned` decides from either with one sequence, and offline it says what it
assumed where files cannot say what the cluster would (the rules in force, the taint history,
the guard's limit, the clock).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from nodegate.cli.inputs import nodes_in, objects_in, rules_or_exit, time_or_exit
from nodegate.cli.live.options import (
    Context,
    Kubeconfig,
    Namespace,
    Output,
    OutputOption,
    RulesConfigMap,
    connect,
    listed_nodes,
    stderr_console,
)
from nodegate.defaults.names import DEFAULT_NAMESPACE

# What the command runs on is imported when it runs (cli/lazy_group.py,
# tests/unit/cli/test_lazy_commands.py).
if TYPE_CHECKING:
    from rich.console import Console

    from nodegate.cli.live.cluster import Cluster
    from nodegate.cli.plan_sources import PlanInputs
    from nodegate.core.decisions.verdicts import PlanFacts
    from nodegate.core.reports.rules_change import RulesChange
    from nodegate.core.rules.model import NodeRules
    from nodegate.core.rules.node import NodeState

ERROR = 1
FAILED = "nodegate plan: "


def plan_rules(
    rules_file: Annotated[Path, typer.Option("--rules", help="The new rules file to preview.")],
    output: OutputOption = Output.table,
    summary_only: Annotated[
        bool, typer.Option("--summary", help="Only the summary per rule and pool, not per node.")
    ] = False,
    max_untaint_share: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="The guard's limit; default: the running reconciler's (its status record), "
            "else 0.5.",
        ),
    ] = None,
    nodes_file: Annotated[
        Path | None,
        typer.Option(
            "--nodes",
            help="Offline: the Nodes as `kubectl get nodes -o yaml` prints them, not the cluster.",
            show_default=False,
        ),
    ] = None,
    in_force_file: Annotated[
        Path | None,
        typer.Option(
            "--in-force",
            help="Offline: the rules in force (e.g. the merge target's rules file); without it "
            "every change the new rules make counts.",
            show_default=False,
        ),
    ] = None,
    daemon_sets: Annotated[
        list[Path] | None,
        typer.Option(
            "--daemon-sets",
            help="Offline: the DaemonSets nodeAgents rules wait for (`kubectl get ds -A -o "
            "yaml`); needed when the new rules have such rules.",
            show_default=False,
        ),
    ] = None,
    pods: Annotated[
        list[Path] | None,
        typer.Option(
            "--pods",
            help="Offline: the DaemonSets' pods (`kubectl get pods -A -o yaml`); needed with "
            "--daemon-sets. One file may hold both (`kubectl get ds,pods -A -o yaml`).",
            show_default=False,
        ),
    ] = None,
    csi_nodes: Annotated[
        list[Path] | None,
        typer.Option(
            "--csi-nodes",
            help="Offline: the CSINodes (`kubectl get csinodes -o yaml`); needed when nodeAgents "
            "rules wait for CSI drivers.",
            show_default=False,
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(help="Offline: plan at this RFC 3339 time; default: this host's clock."),
    ] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
    rules_configmap: RulesConfigMap = None,
) -> None:
    """Preview the change new rules would make on the live cluster, node by node, and whether
    the reconciler would hold them. Exit 0: no change, 2: changes, 3: would be held, 1: error.

    With --nodes FILE it plans offline, from files (for CI without cluster credentials), and
    says what it assumed where files cannot say what the cluster would."""
    from rich.console import Console  # noqa: PLC0415  (see the imports)
    from rich.text import Text  # noqa: PLC0415

    from nodegate.core.text.yaml_output import dump_all  # noqa: PLC0415

    new = rules_or_exit(rules_file)
    progress = stderr_console()
    started = time.monotonic()
    if nodes_file is None:
        offline = {
            "--in-force": in_force_file,
            "--daemon-sets": daemon_sets,
            "--pods": pods,
            "--csi-nodes": csi_nodes,
            "--now": now,
        }
        if given := [flag for flag, value in offline.items() if value]:
            _fail(f"{', '.join(given)}: for a plan offline, with --nodes FILE")
        cluster = connect(kubeconfig, context, namespace, rules_configmap)
        new = _with_the_other_objects(cluster, rules_file, new)
        read = _read_live(cluster, new, progress)
    else:
        read = _read_files(
            new, nodes_file, in_force_file, now, daemon_sets, pods, csi_nodes, max_untaint_share
        )
    change = planned(read, new, max_untaint_share, progress)
    seconds = time.monotonic() - started
    if output is Output.table:
        print_plan(Console(), change, read.which, summary_only, read.assumed)
        if progress.is_terminal:
            progress.print(Text(f"{change.nodes} nodes planned in {seconds:.1f}s", style="dim"))
    else:  # the change, what it was compared with, and what was assumed
        data = {**change.to_data(), "comparedWith": read.which, "assumed": list(read.assumed)}
        if output is Output.json:
            typer.echo(json.dumps(data, indent=2))
        else:
            typer.echo(dump_all([data]), nl=False)
    raise typer.Exit(change.exit_code)


def planned(
    read: PlanInputs,
    new: NodeRules,
    max_untaint_share: float | None,
    progress: Console | None = None,
) -> RulesChange:
    """Plan every node under the rules in force and under `new`, with the facts the
    reconciler's blast-radius guard judges an update with (the clock, the taint history, and
    the node agents of the rules judged), wherever they were read."""
    from nodegate.core.decisions.node_agents import lifted_taints  # noqa: PLC0415
    from nodegate.core.decisions.node_decision import plan_facts  # noqa: PLC0415
    from nodegate.core.reports.rules_change import rules_change  # noqa: PLC0415
    from nodegate.core.views.csi_nodes import registered_drivers  # noqa: PLC0415
    from nodegate.reconciler.settings import ReconcilerSettings  # noqa: PLC0415

    objects = read.agents
    lifted = lifted_taints(new)

    def facts(node: NodeState) -> PlanFacts:
        if objects is None:
            return plan_facts(read.at, read.owned)
        drivers = registered_drivers(objects.csi_nodes.get(node.name), node.uid)
        departed = objects.departures.get(node.name)
        agents = objects.readiness(new, node, drivers, departed, lifted)
        return plan_facts(read.at, read.owned, agents=agents, departed=departed)

    limit = max_untaint_share if max_untaint_share is not None else read.published_limit
    if limit is None:  # the reconciler's own default, when its status record does not say
        limit = ReconcilerSettings.model_fields["max_untaint_share"].default
    pairs = [(n, facts(n)) for n in read.nodes]
    if progress is not None and progress.is_terminal:
        with progress.status(f"planning {len(read.nodes)} nodes"):
            return rules_change(pairs, new, read.in_force, limit)
    return rules_change(pairs, new, read.in_force, limit)


def _read_live(cluster: Cluster, new: NodeRules, progress: Console) -> PlanInputs:
    """What the live cluster says, or its error on stderr and exit 1: it cannot be reached, or
    its status record cannot say which rules are in force (never guessed). Compared with: the
    reconciler's rules in force (its status record; none at generation 0), else, with no record
    at all, the rules ConfigMap's, else none (every change is new)."""
    # The Kubernetes client is loaded for a live plan only: an offline one never needs it.
    from nodegate.cli.live.cluster import RulesInForceUnknownError  # noqa: PLC0415
    from nodegate.cli.plan_sources import AgentObjects, PlanInputs, agents_read  # noqa: PLC0415
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415

    try:
        published = cluster.rules_in_force()
        rules, which, limit = None, "no rules (none are in force)", None
        if published is not None:
            rules, which = published.rules, published.which
            limit = published.status.max_untaint_share
            if rules is not None:
                which = f"the rules in force (generation {published.status.generation})"
        elif (configmap := cluster.rules_source()).rules is not None:
            rules, which = configmap.rules, f"the rules ConfigMap {configmap.view.reference}"
        owned = cluster.previously_owned()
        at = cluster.now()
        nodes = listed_nodes(cluster, progress)
        objects = None
        if new.node_agents:
            reads = (agents_read(new, "node-agents"), agents_read(new, "csi-nodes"))
            listed = cluster.agent_objects(new, *reads)
            objects = AgentObjects.of(new, *listed, cluster.departures())
    except KubeError as err:
        _fail(str(err))
    except RulesInForceUnknownError as err:
        _fail(
            f"the rules in force are unknown, so nothing was compared: {err} (the reconciler "
            "rewrites its status record when rules next take effect)"
        )
    return PlanInputs(rules, which, at, owned, nodes, objects, limit)


def _read_files(
    new: NodeRules,
    nodes_file: Path,
    in_force_file: Path | None,
    now: str | None,
    daemon_sets: Sequence[Path] | None,
    pods: Sequence[Path] | None,
    csi_nodes: Sequence[Path] | None,
    max_untaint_share: float | None,
) -> PlanInputs:
    """The plan's inputs read from files (the shell reads them), or every problem with its place
    and exit 1. What files cannot say is assumed, and said."""
    from nodegate.cli.plan_sources import AgentObjects, PlanInputs, agents_read  # noqa: PLC0415
    from nodegate.core.decisions.dry_run import live_owned_taints  # noqa: PLC0415

    # The objects node-agent rules wait for must be given: without them every such rule would
    # keep its taint as it is, and the plan would say nothing of what it does.
    names = ", ".join(r.name for r in new.node_agents)
    if agents_read(new, "node-agents") and not (daemon_sets and pods):
        _fail(
            f"nodeAgents rules ({names}) wait for DaemonSets' pods: offline, give --daemon-sets "
            "FILE and --pods FILE (e.g. `kubectl get ds,pods -A -o yaml > objects.yaml`, "
            "given to both)"
        )
    if agents_read(new, "csi-nodes") and not csi_nodes:
        _fail(
            f"nodeAgents rules ({names}) wait for CSI drivers: offline, give --csi-nodes FILE "
            "(`kubectl get csinodes -o yaml`)"
        )
    nodes = nodes_in(nodes_file, ERROR, FAILED)
    if in_force_file is None:
        in_force, which = None, "no rules (offline, no --in-force FILE: every change counts)"
    else:
        in_force, which = rules_or_exit(in_force_file), f"the rules in {in_force_file} (--in-force)"
    at = datetime.now(UTC) if now is None else time_or_exit(now, FAILED)
    listed = (
        objects_in(daemon_sets or (), "DaemonSet", FAILED),
        objects_in(pods or (), "Pod", FAILED),
        objects_in(csi_nodes or (), "CSINode", FAILED),
    )
    history = "the taints of the rules in force only" if in_force else "none"
    assumed = [
        f"the taint history holds {history}: a taint that only an earlier rules generation "
        "owned stays in this plan, where the reconciler would remove it"
    ]
    if max_untaint_share is None:
        assumed.append(
            "the guard's limit is the reconciler's default (the running reconciler's is in "
            "its status record; --max-untaint-share sets it)"
        )
    if now is None:
        assumed.append("now is this host's clock, not the API server's (--now sets it)")
    if new.node_agents:
        assumed.append(
            "no Node object was seen go (the reconciler's sightings record): a pod Ready "
            "for a deleted Node of the same name does not count for its successor"
        )
    return PlanInputs(
        in_force,
        which,
        at,
        live_owned_taints(in_force) if in_force is not None else frozenset(),
        nodes,
        AgentObjects.of(new, *listed) if new.node_agents else None,
        assumed=tuple(assumed),
    )


def _with_the_other_objects(cluster: Cluster, rules_file: Path, new: NodeRules) -> NodeRules:
    """With the reconciler on NodeRules objects, a file that is one of them is planned merged
    with the others (it replaces its namesake), not as all the rules: the others' taints are not
    the plan's to remove. Exit 1 if the merge would not take it (refused or conflicting)."""
    from nodegate.core.rules.merge import object_of_document  # noqa: PLC0415
    from nodegate.core.text.yaml_input import read_limited, read_yaml  # noqa: PLC0415
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415

    tree, _positions = read_yaml(read_limited(rules_file), str(rules_file))
    if not isinstance(tree, dict) or not isinstance(tree.get("metadata"), dict):
        return new  # the shape before objects: all the rules
    proposed = object_of_document(tree)
    try:
        merged = cluster.merged_with(proposed)
    except KubeError as err:
        _fail(str(err))
    if merged is None:
        return new
    verdict = merged.verdicts[proposed.name]
    if not verdict.accepted or verdict.conflicting:
        why = " | ".join(verdict.problems) if not verdict.accepted else verdict.conflict
        _fail(f"{rules_file}: NodeRules {proposed.name} would not take effect: {why}")
    return merged.rules


def _fail(message: str) -> NoReturn:
    typer.echo(f"{FAILED}{message}", err=True)
    raise typer.Exit(ERROR)


def print_plan(
    console: Console,
    change: RulesChange,
    which: str,
    summary_only: bool,
    assumed: Sequence[str] = (),
) -> None:
    from rich.text import Text  # noqa: PLC0415  (see the imports)

    from nodegate.cli.live.render import Column, print_items, print_table  # noqa: PLC0415

    console.print(
        Text(
            f"compared with {which}: {len(change.changed)} of {change.nodes} nodes would change",
            style="bold",
        )
    )
    if assumed:
        console.print(Text("offline, so assumed:", style="yellow"))
        print_items(console, assumed, "~", "yellow")
    if change.hold is not None:
        console.print(
            Text(f"HELD: the reconciler would hold these rules: {change.hold}", style="red bold")
        )
        console.print(
            Text(
                "(it applies them only once the rules ConfigMap is annotated "
                "nodegate.dev/confirm-rules=<digest>; docs/reconciler.md)",
                style="red",
            )
        )
    else:
        console.print(
            Text(
                "the blast-radius guard would let them through "
                f"(limit {change.max_share:.0%} of nodes)",
                style="green",
            )
        )
    print_table(
        console,
        (Column("rule"), Column("pool"), Column("change"), Column("nodes", right=True)),
        [(r.rule, r.pool, r.change, str(r.nodes)) for r in change.summary],
        title="summary per rule and pool",
    )
    if summary_only or not change.changed:
        return
    rows = [
        (c.node if i == 0 else "", c.pool if i == 0 else "", str(x), x.rule)
        for c in change.changed
        for i, x in enumerate(c.changes)
    ]
    print_table(
        console,
        (Column("node"), Column("pool"), Column("change"), Column("rule", wrap=True)),
        rows,
        title="node by node",
    )
