"""`nodegate validate FILE...`: the same check every other part of nodegate runs first."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nodegate.core.decisions.node_trust import pool_evidence_advice
from nodegate.core.rules.loader import check_rules_file
from nodegate.core.text.errors import RulesError
from nodegate.manifests.tolerations import describe_gate_tolerations


def validate(
    files: Annotated[list[Path], typer.Argument(help="Rules files to check.", show_default=False)],
) -> None:
    """Check rules files; print every problem as FILE:LINE:COL: path: message. Exit 1 if any.

    Warnings (FILE:LINE:COL: warning: path: message) are printed too but do not fail the check.
    A valid file with startup gates gets one `info:` line: the gates the reconciler's
    Deployment tolerates (its manifests derive them from the rules); and one per pool with
    reconcilerLabels: the evidence of membership it needs on its cloud.
    """
    failed = False
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
    if failed:
        raise typer.Exit(1)
