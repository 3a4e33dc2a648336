"""`nodegate chart`: write charts/nodegate, generated from the manifest builder
(`nodegate.manifests.chart`), for `helm package` / `helm install`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from nodegate.cli.manifests_cmd import EXAMPLE_RULES, load_rules, required_rules
from nodegate.manifests.chart.files import chart_files


def chart(
    out: Annotated[
        Path,
        typer.Option("--out", help="The chart's directory (replaced).", show_default=True),
    ] = Path("charts/nodegate"),
    rules: Annotated[
        Path | None,
        typer.Option(
            "--rules",
            help=f"The NodeRules file: the gates the chart's Deployment tolerates, and the "
            f"rules of ci/example-values.yaml. Required (nodegate's example: --rules "
            f"{EXAMPLE_RULES}).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write the Helm chart, generated from the same builder as `nodegate manifests`."""
    files = chart_files(load_rules(required_rules(rules, "chart")))
    for generated in ("templates", "crds"):
        shutil.rmtree(out / generated, ignore_errors=True)
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {len(files)} files to {out}")
