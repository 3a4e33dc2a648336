"""The `nodegate` command: one typer app; each command lives in its own module.

The same app is installed as `kubectl-nodegate`, so kubectl runs it as a plugin
(`kubectl nodegate status`); `--install-completion` / `--show-completion` are typer's own.

The commands are imported when they run (`nodegate.cli.lazy_group`): `nodegate --help`, a TAB
or `nodegate validate` never load the Kubernetes client or the reconciler.
A new command is a line in `COMMANDS`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated

import typer

from nodegate.cli.help_format import typer_app
from nodegate.cli.lazy_group import LazyCommand, LazyGroup

COMMANDS = (
    LazyCommand(
        "validate",
        "nodegate.cli.validate_cmd:validate",
        "Check rules files; print every problem as FILE:LINE:COL: path: message.",
    ),
    LazyCommand(
        "schema",
        "nodegate.cli.schema_cmd:schema",
        "Print the JSON Schema (use with yaml-language-server's `$schema` modeline).",
    ),
    LazyCommand(
        "explain",
        "nodegate.cli.explain_cmd:explain",
        "Show each rule's verdict on a node, the exact change nodegate would make, and what it "
        "waits for.",
    ),
    LazyCommand(
        "status",
        "nodegate.cli.status_cmd:status",
        "The reconciler at a glance: leader, rules in force, held update, gated nodes, taints, "
        "eviction budget, label records, recent Warnings.",
    ),
    LazyCommand(
        "plan",
        "nodegate.cli.plan_cmd:plan_rules",
        "Preview the change new rules would make on the live cluster, node by node, and whether "
        "the reconciler would hold them.",
    ),
    LazyCommand(
        "render",
        "nodegate.cli.render_cmd:render",
        "Print what a pool's nodes will be born with (user_data, kubelet flags or AKS lists).",
    ),
    LazyCommand(
        "demo",
        "nodegate.cli.demo_cmd:demo",
        "Play nodegate's whole job on a local cluster: born tainted, gated, kept true.",
    ),
    LazyCommand(
        "reconcile",
        "nodegate.cli.reconcile_cmd:reconcile",
        "Keep every node's labels and taints what the rules want, for the life of the node.",
    ),
    LazyCommand(
        "manifests",
        "nodegate.cli.manifests_cmd:manifests",
        "Print the reconciler's Kubernetes objects as YAML: nodegate manifests | kubectl apply "
        "-f -",
    ),
    LazyCommand(
        "labels",
        "nodegate.cli.labels_cmd:app",
        "Inspect and drop persisted-label records.",
    ),
    LazyCommand(
        "migrate",
        "nodegate.cli.migrate_cmd:app",
        "Print the rules that replace another tool's settings (validated; notes on what behaves "
        "differently come first, as comments).",
    ),
    LazyCommand(
        "version",
        "nodegate.cli.version_cmd:version",
        "Print nodegate's version and the image tag it deploys.",
    ),
)
"""Every command: its name, where it lives, and its line in `nodegate --help` (the first
sentence of its help; tests/unit/cli/test_lazy_commands.py checks the two agree)."""


class Commands(LazyGroup):
    lazy_commands = COMMANDS


app = typer_app(
    cls=Commands,
    name="nodegate",
    help="Nodes born with the right taints and labels, kept true by a reconciler.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # `-h` as well as `--help`, for every command (click hands it down to subcommands).
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(asked: bool) -> None:
    if asked:
        from nodegate.manifests.version import package_version  # noqa: PLC0415  (only when asked)

        typer.echo(f"nodegate {package_version()}")
        raise typer.Exit


@app.callback()
def nodegate(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print nodegate's version and exit (`nodegate version`: the image tag too).",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Options before the command (`nodegate --version`)."""


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
