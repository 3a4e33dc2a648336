"""`nodegate plan --rules NEW.yaml`: what new rules would do to the live cluster, before merging.

Exit codes for CI (docs/infra.md, "Before `pulumi up` or a GitOps merge"): 0 no change, 2 changes,
3 the reconciler's blast-radius guard would hold the new rules, 1 an error (bad rules, no
cluster). Nothing is written to the cluster, whatever happens.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from nodegate.cli.live.cluster import Cluster, RulesInForceUnknownError
from nodegate.cli.live.options import (
    Context,
    Kubeconfig,
    Namespace,
    Output,
    OutputOption,
    RulesConfigMap,
    connect,
    stderr_console,
)
from nodegate.cli.live.render import Column, print_table
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.installation import DEFAULT_NAMESPACE
from nodegate.core.reports.rules_change import RulesChange, rules_change
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_output import dump_all
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.settings import ReconcilerSettings

ERROR = 1
DEFAULT_SHARE = ReconcilerSettings.model_fields["max_untaint_share"].default
"""The reconciler's own default, when its status record does not say its setting."""


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
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
    rules_configmap: RulesConfigMap = None,
) -> None:
    """Preview the change new rules would make on the live cluster, node by node, and whether
    the reconciler would hold them. Exit 0: no change, 2: changes, 3: would be held, 1: error."""
    try:
        new = load_rules(rules_file)
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(ERROR) from err
    cluster = connect(kubeconfig, context, namespace, rules_configmap)
    progress = stderr_console()
    started = time.monotonic()
    try:
        in_force, which, share = _in_force(cluster)
        facts = PlanFacts(now=cluster.now(), previously_owned=cluster.previously_owned())
        if progress.is_terminal:
            with progress.status("listing nodes") as spinner:
                nodes = cluster.nodes(lambda n: spinner.update(f"listing nodes: {n}"))
        else:
            nodes = cluster.nodes()
    except KubeError as err:
        typer.echo(f"nodegate plan: {err}", err=True)
        raise typer.Exit(ERROR) from err
    except RulesInForceUnknownError as err:
        typer.echo(
            f"nodegate plan: the rules in force are unknown, so nothing was compared: {err} "
            "(the reconciler rewrites its status record when rules next take effect)",
            err=True,
        )
        raise typer.Exit(ERROR) from err
    limit = max_untaint_share if max_untaint_share is not None else share
    if progress.is_terminal:
        with progress.status(f"planning {len(nodes)} nodes"):
            change = rules_change([(n, facts) for n in nodes], new, in_force, limit)
    else:
        change = rules_change([(n, facts) for n in nodes], new, in_force, limit)
    seconds = time.monotonic() - started
    if output is Output.json:
        typer.echo(json.dumps(change.to_data(), indent=2))
    elif output is Output.yaml:
        typer.echo(dump_all([change.to_data()]), nl=False)
    else:
        print_plan(Console(), change, which, limit, summary_only)
        if progress.is_terminal:
            progress.print(Text(f"{len(nodes)} nodes planned in {seconds:.1f}s", style="dim"))
    raise typer.Exit(change.exit_code)


def _in_force(cluster: Cluster) -> tuple[NodeRules | None, str, float]:
    """The rules the new ones are compared with: the reconciler's rules in force (its status
    record; none at generation 0), else, with no record at all, the rules ConfigMap's, else
    none (every change is new). A record that cannot say raises RulesInForceUnknownError."""
    published = cluster.rules_in_force()
    if published is not None:
        share = published.status.max_untaint_share
        which = published.which
        if published.rules is not None:
            which = f"the rules in force (generation {published.status.generation})"
        return published.rules, which, DEFAULT_SHARE if share is None else share
    share = DEFAULT_SHARE
    configmap = cluster.rules_configmap()
    if configmap.rules is not None:
        return configmap.rules, f"the rules ConfigMap {configmap.view.reference}", share
    return None, "no rules (none are in force)", share


def print_plan(
    console: Console, change: RulesChange, which: str, limit: float, summary_only: bool
) -> None:
    console.print(
        Text(
            f"compared with {which}: {len(change.changed)} of {change.nodes} nodes would change",
            style="bold",
        )
    )
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
                f"the blast-radius guard would let them through (limit {limit:.0%} of nodes)",
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
