"""The `nodegate` command: one typer app; each command lives in its own module.

The same app is installed as `kubectl-nodegate`, so kubectl runs it as a plugin
(`kubectl nodegate status`); `--install-completion` / `--show-completion` are typer's own.
"""

from __future__ import annotations

import contextlib
import os
import sys

from nodegate.cli.chart_cmd import chart
from nodegate.cli.demo_cmd import demo
from nodegate.cli.explain_cmd import explain
from nodegate.cli.help_format import Command, typer_app
from nodegate.cli.labels_cmd import app as labels_app
from nodegate.cli.manifests_cmd import manifests
from nodegate.cli.migrate_cmd import app as migrate_app
from nodegate.cli.plan_cmd import plan_rules
from nodegate.cli.reconcile_cmd import reconcile
from nodegate.cli.render_cmd import render
from nodegate.cli.schema_cmd import schema
from nodegate.cli.status_cmd import status
from nodegate.cli.validate_cmd import validate

app = typer_app(
    name="nodegate",
    help="Nodes born with the right taints and labels, kept true by a reconciler.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
app.command("validate", cls=Command)(validate)
app.command("schema", cls=Command)(schema)
app.command("explain", cls=Command)(explain)
app.command("status", cls=Command)(status)
app.command("plan", cls=Command)(plan_rules)
app.command("render", cls=Command)(render)
app.command("demo", cls=Command)(demo)
app.command("reconcile", cls=Command)(reconcile)
app.command("manifests", cls=Command)(manifests)
app.command("chart", cls=Command)(chart)
app.add_typer(labels_app, name="labels")
app.add_typer(migrate_app, name="migrate")


def kubectl_complete() -> None:
    """`kubectl_complete-nodegate ARGS... INCOMPLETE`: what kubectl (1.26+) runs to complete
    `kubectl nodegate ...`; the candidates come from typer's own bash completion, one a line,
    then `:4` (kubectl's ShellCompDirectiveNoFileComp)."""
    words = ["nodegate", *sys.argv[1:]] if len(sys.argv) > 1 else ["nodegate", ""]
    os.environ.update(
        {
            "_NODEGATE_COMPLETE": "complete_bash",
            "COMP_WORDS": " ".join(words),
            "COMP_CWORD": str(len(words) - 1),
        }
    )
    with contextlib.suppress(SystemExit):
        app(prog_name="nodegate")
    print(":4")
