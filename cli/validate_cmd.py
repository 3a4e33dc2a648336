"""`nodegate validate FILE...`: the same check every other part of nodegate runs first."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nodegate.core.decisions.node_agents import (
    DaemonSetView,
    daemon_set_problems,
    slim_daemon_set,
)
from nodegate.core.decisions.node_trust import pool_evidence_advice
from nodegate.core.rules.loader import check_rules_file
from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_input import read_limited, read_yaml_documents
from nodegate.manifests.tolerations import describe_gate_tolerations


def validate(
    files: Annotated[list[Path], typer.Argument(help="Rules files to check.", show_default=False)],
    daemon_sets: Annotated[
        list[Path] | None,
        typer.Option(
            "--daemon-sets",
            help="YAML with the DaemonSets nodeAgents rules name (manifests, a chart's output, "
            "`kubectl get ds -A -o yaml`): each must tolerate its rule's taint. Repeatable.",
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
    """
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
        for warning in checked.warnings:
            typer.echo(str(warning), err=True)
        rules = checked.rules
        warned = f", {len(checked.warnings)} warnings" if checked.warnings else ""
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
        if daemon_sets:
            for found in daemon_set_problems(rules.node_agents, known):
                if found.endswith("not found"):
                    typer.echo(f"{path}: info: {found} in the --daemon-sets files")
                else:
                    failed = True
                    typer.echo(f"{path}: {found}", err=True)
    if failed:
        raise typer.Exit(1)


def _daemon_sets(paths: list[Path]) -> list[DaemonSetView]:
    """The DaemonSets in these YAML streams (a `List`'s items too); unreadable: exit 1."""
    found: list[DaemonSetView] = []
    for path in paths:
        try:
            documents = read_yaml_documents(read_limited(path), str(path))
        except OSError as err:
            typer.echo(f"{path}: cannot read file: {err.strerror}", err=True)
            raise typer.Exit(1) from err
        except RulesError as err:
            for problem in err.problems:
                typer.echo(str(problem), err=True)
            raise typer.Exit(1) from err
        for document, _ in documents:
            items = document.get("items") if isinstance(document, dict) else None
            for item in items if isinstance(items, list) else [document]:
                if isinstance(item, dict) and item.get("kind") == "DaemonSet":
                    meta = item.setdefault("metadata", {})
                    meta.setdefault("namespace", "default")
                    found.append(slim_daemon_set(item))
    return found
