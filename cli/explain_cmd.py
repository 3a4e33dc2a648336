"""`nodegate explain`: which rule wants what on a node, and what the reconciler would change."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nodegate.core.errors import RulesError
from nodegate.core.eviction_budget import plan_in_turn, waiting_rules
from nodegate.core.loader import load_rules
from nodegate.core.model import NodeRules
from nodegate.core.node import NodeState, parse_time
from nodegate.core.node_file import parse_nodes
from nodegate.core.plan import NodePlan, PlanFacts
from nodegate.core.yaml_input import read_limited

_VERDICT_STYLE = {"want": "green", "keep": "yellow", "release": "dim"}


def explain(
    rules_file: Annotated[Path, typer.Option("--rules", help="Rules file.")],
    node_file: Annotated[Path, typer.Option("--node", help="Node as JSON or YAML (kubectl -o).")],
    ready_gate: Annotated[
        list[str] | None,
        typer.Option("--ready-gate", help="Treat this startup gate's init pod as Ready."),
    ] = None,
    now: Annotated[
        str | None, typer.Option(help="Evaluate at this RFC 3339 time instead of now.")
    ] = None,
) -> None:
    """Show each rule's verdict on the node and the exact change nodegate would make."""
    try:
        rules = load_rules(rules_file)
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(1) from err
    at = parse_time(now) or datetime.now(UTC)
    facts = PlanFacts(now=at, gate_pods_ready_since=dict.fromkeys(ready_gate or (), at))
    console = Console()
    # A NodeList is planned as the reconciler would, node after node: evicting taints over the
    # eviction budget (what the nodes' timeAdded says was spent counts) are shown waiting.
    for node, result in plan_in_turn(_read_nodes(node_file), rules, facts):
        print_explanation(console, node, rules, result)


def _read_nodes(path: Path) -> list[NodeState]:
    """One Node, or a List/NodeList as `kubectl get nodes -o yaml` prints it; exit 2 if not."""
    try:
        return parse_nodes(read_limited(path), str(path))
    # Not the file asked for: the usage error code, every problem with its place.
    except OSError as err:
        typer.echo(f"{path}: cannot read node file: {err.strerror}", err=True)
        raise typer.Exit(2) from err
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(2) from err


def print_explanation(
    console: Console, node: NodeState, rules: NodeRules, result: NodePlan
) -> None:
    """Rule verdicts as a table, then the change (shared with the demo)."""
    table = Table(title=f"rules on node {node.name}", show_lines=False)
    for column in ("rule", "taint", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for d in result.decisions:
        style = _VERDICT_STYLE[d.verdict]
        table.add_row(d.rule, d.taint.flag(), f"[{style}]{d.verdict}[/{style}]", d.why)
    console.print(table)
    waiting = [d for d in result.decisions if d.rule in waiting_rules(result)]
    for d in waiting:
        console.print(f"[yellow]  ~ taint {d.taint.flag()} would wait ({d.rule}: {d.why})[/yellow]")
    for would in result.dry_run:
        console.print(f"[cyan]  ? {would.message()}[/cyan]")
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
        console.print(f"  ~ annotation nodegate.dev/owned-taints={result.owned_annotation!r}")
    for warning in result.warnings:
        console.print(f"  [yellow]! {warning}[/yellow]")
    named = rules.owned_taints() | rules.former_gate_taints()
    foreign = [t for t in node.taints if t.identity not in named]
    if foreign:
        console.print("  untouched (not owned by any rule): " + ", ".join(str(t) for t in foreign))
