"""The options the day-2 commands share: which cluster (as kubectl finds it) and where the
reconciler keeps its things (the shipped manifests' names by default).

The cluster's shell (`cluster`, `label_records`: the Kubernetes client) is imported when a
command connects, not with these options: `nodegate explain --node FILE` declares them and
never talks to a cluster. Nor is rich: a TAB on a command's options or its `--help` reads them
from here, and loads neither core nor a console (tests/unit/cli/test_lazy_commands.py).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nodegate.defaults.names import DEFAULT_LEASE

if TYPE_CHECKING:
    from rich.console import Console

    from nodegate.cli.live.cluster import ApiClient, Cluster
    from nodegate.core.rules.node import NodeState

Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Kubeconfig file; default: $KUBECONFIG, else ~/.kube/config, else the Pod's service "
        "account (as kubectl).",
    ),
]
Context = Annotated[str | None, typer.Option("--context", help="Kubeconfig context to use.")]
Namespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        help="The reconciler's namespace: its Lease, status record and label records.",
    ),
]
RulesConfigMap = Annotated[
    str | None,
    typer.Option(
        "--rules-configmap",
        help="The rules ConfigMap as namespace/name; default: NAMESPACE/nodegate-rules.",
    ),
]
Lease = Annotated[str, typer.Option("--lease", help="Name of the reconciler's leader Lease.")]


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="table (for people), json or yaml (for tools).")
]


def connect(
    kubeconfig: Path | None,
    context: str | None,
    namespace: str,
    rules_configmap: str | None,
    lease: str = DEFAULT_LEASE,
) -> Cluster:
    from nodegate.cli.live.cluster import Cluster, Where  # noqa: PLC0415  (see the docstring)

    where = Where(namespace=namespace, rules_configmap=rules_configmap, lease=lease)
    return Cluster(kube_client(kubeconfig, context), where)


def kube_client(kubeconfig: Path | None, context: str | None) -> ApiClient:
    """The cluster kubectl would talk to (`api_client`), or a one-line error and exit 1."""
    from nodegate.cli.live.cluster import api_client  # noqa: PLC0415

    try:
        return api_client(kubeconfig, context)
    # A missing or broken kubeconfig is the user's to fix: say so in one line, as kubectl does.
    except Exception as err:
        typer.echo(f"nodegate: cannot load a kubeconfig: {err}", err=True)
        raise typer.Exit(1) from err


def stderr_console() -> Console:
    """Progress and errors: on stderr, so stdout stays the report a script reads."""
    from rich.console import Console  # noqa: PLC0415  (see the docstring)

    return Console(stderr=True)


def listed_nodes(cluster: Cluster, progress: Console) -> list[NodeState]:
    """Every Node (`Cluster.nodes`), with a progress line when `progress` is a terminal."""
    if not progress.is_terminal:
        return cluster.nodes()
    with progress.status("listing nodes") as spinner:
        return cluster.nodes(lambda n: spinner.update(f"listing nodes: {n}"))
