"""`nodegate validate FILE...`: the same check every other part of nodegate runs first."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nodegate.cli.inputs import objects_in

if TYPE_CHECKING:
    from nodegate.core.rules.loader import Checked
    from nodegate.core.rules.model import NodeRules
    from nodegate.core.text.errors import DocPath, Problem
    from nodegate.core.views.daemon_sets import DaemonSetView

# What the check needs is imported when it runs (PLC0415 below): a TAB on validate's options
# loads this module to read them and stays out of the rules model, pydantic and the decisions
# (tests/unit/cli/test_lazy_commands.py). The node-agent decisions are imported only for rules
# that can wait for each other (`_may_wait`) or with --daemon-sets.


def validate(
    files: Annotated[list[Path], typer.Argument(help="Rules files to check.", show_default=False)],
    daemon_sets: Annotated[
        list[Path] | None,
        typer.Option(
            "--daemon-sets",
            help="YAML with the cluster's DaemonSets (manifests, a chart's output, "
            "`kubectl get ds -A -o yaml`): each a nodeAgents rule names must tolerate its "
            "rule's taint, and no rules may wait for each other through them. Repeatable.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check rules files; print every problem as FILE:LINE:COL: path: message. Exit 1 if any.

    Warnings (FILE:LINE:COL: warning: path: message) are printed too but do not fail the check.
    A valid file with startup gates gets one `info:` line: the gates the reconciler's
    Deployment tolerates (its manifests derive them from the rules); and one per pool with
    reconcilerLabels: the evidence of membership it needs on its cloud. With --daemon-sets,
    a DaemonSet a nodeAgents rule names that does not tolerate the rule's taint is an error
    (its pod would never run on a tainted node), and one not in the files is said.

    Rules that would wait for each other on a pool's nodes (a startup gate whose init pods do
    not tolerate an agent taint, beside an agent rule waiting for a DaemonSet the gate keeps
    away) are a warning without --daemon-sets (the rules say they may), an error with them when
    the DaemonSets show it; so is a listed DaemonSet a pool's label taints or labels keep away
    for good from a rule with cannotRun: wait (cannotRun: skip: said).
    """
    from nodegate.core.decisions.node_trust import pool_evidence_advice  # noqa: PLC0415
    from nodegate.core.rules.loader import check_rules_file  # noqa: PLC0415
    from nodegate.core.text.errors import RulesError  # noqa: PLC0415
    from nodegate.manifests.tolerations import describe_gate_tolerations  # noqa: PLC0415

    failed = False
    known = _daemon_sets(daemon_sets or [])
    for path in files:
        try:
            checked = check_rules_file(path)
        except RulesError as err:
            failed = True
            for problem in err.problems:
                typer.echo(str(problem), err=True)
            continue
        rules = checked.rules
        agent_problems, said = _agent_findings(checked, known if daemon_sets else None)
        warnings = sorted(
            {*checked.warnings, *(p for p in agent_problems if p.severity == "warning")}
        )
        for warning in warnings:
            typer.echo(str(warning), err=True)
        warned = f", {len(warnings)} warnings" if warnings else ""
        counts = [
            f"{len(getattr(rules, attribute))} {kind.kind.plural}"
            for attribute, kind in rules.rule_kinds()
        ]
        typer.echo(f"{path}: ok ({', '.join(counts)}, {len(rules.node_pools)} pools{warned})")
        tolerated = describe_gate_tolerations(rules)
        if tolerated is not None:
            typer.echo(f"{path}: info: {tolerated}")
        for advice in pool_evidence_advice(rules):
            typer.echo(f"{path}: info: {advice}")
        for hint in checked.hints:
            typer.echo(f"{path}: info: {hint}")
        if daemon_sets:
            from nodegate.core.decisions.node_agents import daemon_set_problems  # noqa: PLC0415

            for found in daemon_set_problems(rules.node_agents, known):
                if found.endswith("not found"):
                    typer.echo(f"{path}: info: {found} in the --daemon-sets files")
                else:
                    failed = True
                    typer.echo(f"{path}: {found}", err=True)
        for info in said:
            typer.echo(f"{path}: info: {info}")
        for error in (p for p in agent_problems if p.severity == "error"):
            failed = True
            typer.echo(str(error), err=True)
    if failed:
        raise typer.Exit(1)


def _agent_findings(
    checked: Checked, daemon_sets: list[DaemonSetView] | None
) -> tuple[list[Problem], list[str]]:
    """Rules waiting for each other (`agent_deadlocks`): seen in the DaemonSets, an error;
    possible (from the rules alone, or a DaemonSet not given) or ended by a gate's other signal
    or timeout, a warning. With the DaemonSets, a listed one a pool never runs: an error under
    cannotRun: wait, said under skip."""
    rules = checked.rules
    if daemon_sets is None and not _may_wait(rules):
        return [], []
    from nodegate.core.decisions.agent_deadlocks import birth_deadlocks, never_runs  # noqa: PLC0415

    found = [
        checked.problem(_rule_path(rules, d.rules[0]), d.message(), not d.certain or any(d.escapes))
        for d in birth_deadlocks(rules, daemon_sets)
    ]
    said: list[str] = []
    for never in never_runs(rules, daemon_sets or []):
        if never.waits:
            path = (*_rule_path(rules, never.rule), "daemonSets")
            found.append(checked.problem(path, never.message()))
        else:
            said.append(never.message())
    return found, said


def _may_wait(rules: NodeRules) -> bool:
    """Whether `_agent_findings` can find anything without DaemonSets: a cycle of waits needs
    two rules that wait for pods, startup gates or node-agent rules (and a DaemonSet that never
    runs needs the DaemonSets). An over-estimate (a gate may wait for no pods), never under."""
    return len(rules.startup_gates) + len(rules.node_agents) > 1


def _rule_path(rules: NodeRules, name: str) -> DocPath:
    """Where the rule called `name` is in the file (`startupGates[0]`)."""
    for attribute, kind in rules.rule_kinds():
        for index, rule in enumerate(getattr(rules, attribute)):
            if rule.name == name:
                return (kind.kind.field, index)
    return ()


def _daemon_sets(paths: list[Path]) -> list[DaemonSetView]:
    """The DaemonSets in these YAML streams (a `List`'s items too); unreadable: exit 1."""
    if not paths:
        return []
    from nodegate.core.views.daemon_sets import slim_daemon_set  # noqa: PLC0415

    found: list[DaemonSetView] = []
    for item in objects_in(paths, "DaemonSet"):
        item.setdefault("metadata", {}).setdefault("namespace", "default")
        found.append(slim_daemon_set(item))
    return found
