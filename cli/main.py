"""The `nodegate` command: one typer app; each command lives in its own module."""

from __future__ import annotations

import typer

from nodegate.cli.chart_cmd import chart
from nodegate.cli.demo_cmd import demo
from nodegate.cli.explain_cmd import explain
from nodegate.cli.labels_cmd import app as labels_app
from nodegate.cli.manifests_cmd import manifests
from nodegate.cli.migrate_cmd import app as migrate_app
from nodegate.cli.reconcile_cmd import reconcile
from nodegate.cli.render_cmd import render
from nodegate.cli.schema_cmd import schema
from nodegate.cli.validate_cmd import validate

app = typer.Typer(
    name="nodegate",
    help="Nodes born with the right taints and labels, kept true by a reconciler.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("validate")(validate)
app.command("schema")(schema)
app.command("explain")(explain)
app.command("render")(render)
app.command("demo")(demo)
app.command("reconcile")(reconcile)
app.command("manifests")(manifests)
app.command("chart")(chart)
app.add_typer(labels_app, name="labels")
app.add_typer(migrate_app, name="migrate")
