"""`nodegate status`: the reconciler at a glance, read from the live cluster."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import typer

from nodegate.cli.live.options import (
    Context,
    Kubeconfig,
    Lease,
    Namespace,
    Output,
    OutputOption,
    RulesConfigMap,
    connect,
    listed_nodes,
    stderr_console,
)
from nodegate.defaults.names import DEFAULT_LEASE, DEFAULT_NAMESPACE

# What the command runs on is imported when it runs (cli/lazy_group.py,
# tests/unit/cli/test_lazy_commands.py).
if TYPE_CHECKING:
    from rich.console import Console

    from nodegate.cli.live.cluster import Cluster
    from nodegate.core.reports.cluster_status import StatusReport
    from nodegate.core.rules.model import NodeRules


def status(
    output: OutputOption = Output.table,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
    rules_configmap: RulesConfigMap = None,
    lease: Lease = DEFAULT_LEASE,
) -> None:
    """The reconciler at a glance: leader, rules in force, held update, gated nodes, taints,
    eviction budget, label records, recent Warnings."""
    from rich.console import Console  # noqa: PLC0415  (see the imports)

    from nodegate.core.text.yaml_output import dump_all  # noqa: PLC0415
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415

    cluster = connect(kubeconfig, context, namespace, rules_configmap, lease)
    try:
        report = gather(cluster, cluster.now(), stderr_console())
    except KubeError as err:
        typer.echo(f"nodegate status: {err}", err=True)
        raise typer.Exit(1) from err
    if output is Output.json:
        typer.echo(json.dumps(report.to_data(), indent=2))
    elif output is Output.yaml:
        typer.echo(dump_all([report.to_data()]), nl=False)
    else:
        print_status(Console(), report)


def gather(cluster: Cluster, now: datetime, progress: Console) -> StatusReport:
    """Read everything status shows (the nodes in one paginated LIST) and build the report."""
    from nodegate.cli.live.cluster import RecordUnreadableError  # noqa: PLC0415  (see the imports)
    from nodegate.core.reports.cluster_status import status_report  # noqa: PLC0415
    from nodegate.core.rules.loader import parse_rules  # noqa: PLC0415
    from nodegate.core.text.errors import RulesError  # noqa: PLC0415

    notes: list[str] = []
    lease = cluster.lease()
    status, text, problem = cluster.status_record()
    if problem is not None:
        notes.append(f"status record unreadable: {problem}")
    configmap = cluster.rules_source()
    try:
        recorded = cluster.ledger_grants()
    except RecordUnreadableError as err:
        recorded = []
        notes.append(f"eviction ledger unreadable ({err}): the leader grants no evicting taint")
    rules: NodeRules | None = None
    if text:
        try:
            rules = parse_rules(text, "the status record's rules in force")
        except RulesError:
            notes.append("the status record's rules text is not valid rules")
    if rules is None and configmap.rules is not None:
        rules = configmap.rules
        notes.append("rules counted below: the ConfigMap's (the rules in force are not published)")
    return status_report(
        now,
        listed_nodes(cluster, progress),
        rules,
        lease,
        status,
        configmap.view,
        cluster.records(),
        cluster.warning_events(),
        cluster.previously_owned(),
        notes,
        recorded,
    )


def print_status(console: Console, report: StatusReport) -> None:
    from rich.text import Text  # noqa: PLC0415  (see the imports)

    from nodegate.cli.live.render import Column, print_facts, print_table  # noqa: PLC0415
    from nodegate.core.reports.cluster_status import age  # noqa: PLC0415
    from nodegate.core.rules.merge import OBJECTS_SOURCE, confirm_on_crd  # noqa: PLC0415

    facts: list[tuple[str, str]] = []
    leader = report.leader
    if leader is None:
        facts.append(("leader", "no Lease"))
    else:
        state = "EXPIRED" if leader.expired else f"renewed {age(leader.renewed_seconds_ago)} ago"
        version = f", version {leader.version}" if leader.version else ""
        facts.append(("leader", f"{leader.holder or '(none)'} ({state}{version})"))
    rules = report.rules
    if rules is not None:
        applied = (
            f", applied {age((report.at - rules.applied_at).total_seconds())} ago"
            if rules.applied_at is not None
            else ""
        )
        facts.append(
            ("rules", f"generation {rules.generation}, digest {rules.digest or '-'}{applied}")
        )
        if rules.source:
            facts.append(("source", rules.source))
        objects = rules.configmap == OBJECTS_SOURCE
        cm_state = "= in force" if rules.in_sync else "differs from the rules in force"
        if objects and rules.configmap_problems:
            cm_state += "; not in force: " + " | ".join(rules.configmap_problems)
        elif rules.configmap_problems:
            cm_state = "INVALID (refused; the rules in force stay): " + " | ".join(
                rules.configmap_problems
            )
        facts.append(
            (
                "objects" if objects else "configmap",
                f"{'merged' if objects else rules.configmap} digest "
                f"{rules.configmap_digest or '-'} {cm_state}",
            )
        )
    held = report.held
    if held is not None:
        since = age((report.at - held.since).total_seconds())
        facts.append(("HELD", f"update {held.digest} held for {since}: {held.reason}"))
        if rules is not None and rules.configmap == OBJECTS_SOURCE:
            facts.append(("to apply", f"(a cluster admin) {confirm_on_crd(held.digest)}"))
        else:
            namespace, _, name = (rules.configmap if rules is not None else "").partition("/")
            where = "configmap " + (f"-n {namespace} {name}" if name else "<the rules ConfigMap>")
            facts.append(
                ("to apply", f"kubectl annotate {where} nodegate.dev/confirm-rules={held.digest}")
            )
    else:
        facts.append(("held", "no update is held"))
    facts.append(("nodes", str(report.nodes)))
    records = report.records
    facts.append(
        (
            "records",
            f"{records.records} label records ({records.gone} of deleted nodes, "
            f"{len(records.unreadable)} unreadable), {len(records.quarantined)} quarantined",
        )
    )
    console.print(Text("nodegate status", style="bold"))
    print_facts(console, facts)
    console.print()
    print_table(
        console,
        (Column("gate"), Column("pool"), Column("nodes", right=True), Column("oldest", right=True)),
        [(g.gate, g.pool or "-", str(g.nodes), age(g.oldest_seconds)) for g in report.gates],
        title="gated nodes",
    )
    print_table(
        console,
        (Column("rule"), Column("taint"), Column("nodes", right=True)),
        [(t.rule, t.taint, str(t.nodes)) for t in report.taints],
        title="nodes carrying each rule's taint",
    )
    print_table(
        console,
        (
            Column("budget"),
            Column("window", right=True),
            Column("spent", right=True),
            Column("limit", right=True),
            Column("waiting", right=True),
        ),
        [
            (b.budget, age(b.window_seconds), str(b.spent), str(b.limit), str(b.waiting))
            for b in report.budgets
        ],
        title="eviction budget (cluster-wide)",
    )
    if records.quarantined:
        print_table(
            console,
            (Column("quarantined record"), Column("reason", wrap=True)),
            list(records.quarantined),
            title="quarantined label records",
        )
    print_table(
        console,
        (
            Column("age", right=True),
            Column("reason"),
            Column("object"),
            Column("message", wrap=True),
        ),
        [
            (
                age((report.at - e.last_seen).total_seconds()) if e.last_seen else "-",
                e.reason + (f" (x{e.count})" if e.count > 1 else ""),
                e.involved,
                e.message,
            )
            for e in report.events
        ],
        title="recent Warning Events",
    )
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
