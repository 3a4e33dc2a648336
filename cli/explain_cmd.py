"""`nodegate explain`: which rule wants what on a node, and what the reconciler would change."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nodegate.cli.inputs import nodes_in, rules_or_exit, time_or_exit
from nodegate.cli.live.options import Context, Kubeconfig, Namespace, RulesConfigMap, connect
from nodegate.defaults.names import DEFAULT_NAMESPACE

# What the command runs on is imported when it runs (cli/lazy_group.py,
# tests/unit/cli/test_lazy_commands.py).
if TYPE_CHECKING:
    from rich.console import Console

    from nodegate.cli.live.cluster import Cluster
    from nodegate.core.decisions.eviction_budget import Charge
    from nodegate.core.decisions.plan import NodePlan
    from nodegate.core.objects.status_record import HeldUpdate
    from nodegate.core.rules.model import NodeRules
    from nodegate.core.rules.node import NodeState

_VERDICT_STYLE = {"want": "green", "keep": "yellow", "release": "dim"}


def explain(
    node_name: Annotated[
        str | None,
        typer.Argument(
            metavar="NODE",
            help="A node in the cluster, explained with the rules in force (or --rules).",
            show_default=False,
        ),
    ] = None,
    rules_file: Annotated[
        Path | None,
        typer.Option(
            "--rules", help="Rules file: 'what if' these rules were in force (needed with --node)."
        ),
    ] = None,
    node_file: Annotated[
        Path | None,
        typer.Option("--node", help="Offline: a Node as JSON or YAML (kubectl -o), not NODE."),
    ] = None,
    ready_gate: Annotated[
        list[str] | None,
        typer.Option("--ready-gate", help="Offline: treat this startup gate's init pod as Ready."),
    ] = None,
    now: Annotated[
        str | None, typer.Option(help="Evaluate at this RFC 3339 time instead of now.")
    ] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
    rules_configmap: RulesConfigMap = None,
) -> None:
    """Show each rule's verdict on a node, the exact change nodegate would make, and what it
    waits for."""
    from rich.console import Console  # noqa: PLC0415  (see the imports)

    from nodegate.core.decisions.node_decision import decide, plan_facts  # noqa: PLC0415
    from nodegate.core.decisions.sightings import Sighting  # noqa: PLC0415
    from nodegate.core.reports.node_waits import recorded_budget  # noqa: PLC0415

    at = time_or_exit(now, "nodegate explain: ") if now else None
    if node_file is None:
        if node_name is None:
            raise _fail("give NODE (a node in the cluster) or --node FILE", 2)
        cluster = connect(kubeconfig, context, namespace, rules_configmap)
        explain_live(Console(), cluster, node_name, rules_file, at or cluster.now())
        return
    at = at or datetime.now(UTC)
    if rules_file is None or node_name is not None:
        raise _fail("--node FILE needs --rules FILE (and no NODE)", 2)
    rules = rules_or_exit(rules_file)
    ready = {gate: (Sighting(f"--ready-gate {gate}", at, True, at),) for gate in ready_gate or ()}
    facts = plan_facts(at, gate_pod_signals=ready)
    console = Console()
    # A NodeList is decided as the reconciler would, node after node: evicting taints over the
    # eviction budget (what the nodes' timeAdded says was spent counts) are shown waiting.
    # Not the file asked for: the usage error code, every problem with its place.
    nodes = nodes_in(node_file, 2)
    budget = recorded_budget(rules, nodes, at)
    for node in nodes:
        print_explanation(console, node, rules, decide(node, rules, facts, budget))


def explain_live(
    console: Console, cluster: Cluster, name: str, rules_file: Path | None, at: datetime
) -> None:
    """Explain one node of the live cluster: read what the reconciler reads, decide as it
    decides (`node_decision.decide`), and say what it waits for."""
    # The cluster's shell (the Kubernetes client) is imported only here, for a live node:
    # `explain --node FILE` never loads it.
    from rich.text import Text  # noqa: PLC0415

    from nodegate.cli.live.cluster import RecordUnreadableError  # noqa: PLC0415
    from nodegate.cli.live.render import print_items  # noqa: PLC0415
    from nodegate.cli.live.sources import node_sources  # noqa: PLC0415
    from nodegate.core.decisions.eviction_budget import WAITING  # noqa: PLC0415
    from nodegate.core.decisions.node_decision import decide, plan_facts  # noqa: PLC0415
    from nodegate.core.decisions.persisted_labels import decide as labels_decided  # noqa: PLC0415
    from nodegate.core.decisions.persisted_labels import record_key, record_name  # noqa: PLC0415
    from nodegate.core.reports.node_waits import NodeContext, recorded_budget, waits  # noqa: PLC0415
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415

    try:
        node = cluster.node(name)
        if node is None:
            raise _fail(f"node {name} not found")
        rules, which, held = _rules_to_explain_with(cluster, rules_file)
        sources, init_pods = node_sources(cluster, node, at)
        sources.follow(rules)
        quarantined: tuple[str, ...] = ()
        restore = None
        persistent = rules.persistent_labels
        if persistent is not None and (key := record_key(node, persistent)):
            stored, quarantined = cluster.label_record(record_name(key))
            record = stored.record if stored is not None else None
            restore = labels_decided(node, record, persistent, at).restore
        facts = plan_facts(
            at,
            cluster.previously_owned(),
            cluster.condition_sightings(node),
            restored_labels=restore,
            departed=cluster.departures().get(node.name),
        )
        facts = sources.facts(node, rules, facts)

        def budget(state: NodeState, wanted: tuple[Charge, ...]) -> Mapping[str, str]:
            try:
                recorded = cluster.ledger_grants()
            except RecordUnreadableError as err:  # the leader grants nothing: all wait
                return {c.rule: f"{WAITING}: {err}" for c in wanted if c.ledger is not None}
            return recorded_budget(rules, cluster.nodes(), at, recorded)(state, wanted)

        result = decide(node, rules, facts, budget)
    except KubeError as err:
        raise _fail(err) from err
    console.print(Text(f"explained with {which}", style="dim"))
    print_explanation(console, node, rules, result)
    lines = waits(node, rules, result, NodeContext(init_pods.shown, held, quarantined), at)
    if lines:
        console.print(Text("waiting for:", style="bold"))
        print_items(console, lines, "~", "yellow")


def _rules_to_explain_with(
    cluster: Cluster, rules_file: Path | None
) -> tuple[NodeRules, str, HeldUpdate | None]:
    """--rules FILE; else the rules in force as the reconciler published them; else (no
    reconciler has applied any rules yet) the rules ConfigMap's."""
    if rules_file is not None:
        return rules_or_exit(rules_file), f"{rules_file} (what if: not the rules in force)", None
    from nodegate.cli.live.cluster import RulesInForceUnknownError  # noqa: PLC0415

    try:
        published = cluster.rules_in_force()
    except RulesInForceUnknownError as err:
        raise _fail(f"the rules in force are unknown: {err}; give --rules FILE") from err
    if published is not None:
        if published.rules is None:
            raise _fail(f"{published.which}; give --rules FILE")
        return published.rules, published.which, published.status.held
    configmap = cluster.rules_source()
    if configmap.rules is None:
        for problem in configmap.view.problems:
            typer.echo(problem, err=True)
        raise _fail(
            f"no rules in force published and no valid rules in {configmap.view.reference}; "
            "give --rules FILE"
        )
    which = f"the rules ConfigMap {configmap.view.reference} (no reconciler status record yet)"
    return configmap.rules, which, None


def _fail(message: object, code: int = 1) -> typer.Exit:
    """`message` said on stderr; raise what this returns (exit `code`)."""
    typer.echo(f"nodegate explain: {message}", err=True)
    return typer.Exit(code)


def print_explanation(
    console: Console, node: NodeState, rules: NodeRules, result: NodePlan
) -> None:
    """Rule verdicts as a table, then the change."""
    from rich.text import Text  # noqa: PLC0415  (see the imports)

    from nodegate.cli.live.render import Column, print_table  # noqa: PLC0415
    from nodegate.core.decisions.eviction_budget import waiting_rules  # noqa: PLC0415

    rows = [
        (d.rule, d.taint.flag(), Text(d.verdict, style=_VERDICT_STYLE[d.verdict]), d.why)
        for d in result.decisions
    ]
    columns = (Column("rule"), Column("taint"), Column("verdict"), Column("why", wrap=True))
    print_table(console, columns, rows, title=f"rules on node {node.name}")
    named = rules.owned_taints() | rules.former_gate_taints()
    foreign = [t for t in node.taints if t.identity not in named]
    if foreign:
        console.print(
            "  untouched (not owned by any rule): " + ", ".join(str(t) for t in foreign),
            soft_wrap=True,
        )
        console.print("  [dim]these taints are not nodegate's: it never removes them[/dim]")
    waiting = [d for d in result.decisions if d.rule in waiting_rules(result)]
    for d in waiting:
        console.print(f"[yellow]  ~ taint {d.taint.flag()} would wait ({d.rule}: {d.why})[/yellow]")
    for would in result.dry_run:  # rules in dryRun: reported by the reconciler, never written
        console.print(Text(f"  ? {would.message()}", style="cyan"))
    if result.is_empty and waiting:
        console.print(f"[yellow]node {node.name}: no write until the budget allows[/yellow]")
        return
    if result.is_empty:
        console.print(f"[green]node {node.name} already matches the rules: no write needed[/green]")
        return
    console.print(f"[bold]changes for node {node.name}:[/bold]")
    for change in result.add_taints:
        console.print(f"  + taint {change.taint}  ({', '.join(change.rules)}: {change.why})")
    for change in result.remove_taints:
        owner = ", ".join(change.rules) or "ownership annotation"
        console.print(f"  - taint {change.taint}  ({owner}: {change.why})")
    for label in result.set_labels:
        console.print(f"  + label {label.key}={label.value}  ({label.why})")
    for adopted in result.adopted_taints:
        console.print(f"  = taint {adopted.taint} adopted  ({', '.join(adopted.rules)})")
    if result.owned_annotation is not None:
        owned = ", ".join(result.owned_annotation.split(",")) or "(removed)"
        console.print(Text(f"  ~ annotation nodegate.dev/owned-taints: {owned}"))
    for warning in result.warnings:
        console.print(f"  [yellow]! {warning}[/yellow]")
