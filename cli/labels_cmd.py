"""`nodegate labels list|show NODE|forget NODE|hand-over NODE --to NODE`: the persisted-label
records, without reading raw ConfigMaps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nodegate.cli.help_format import Command, typer_app
from nodegate.cli.live.label_records import LabelRecords, NoSuchNodeError
from nodegate.cli.live.options import Context, Kubeconfig, Namespace, label_records
from nodegate.core.objects.installation import DEFAULT_NAMESPACE
from nodegate.core.objects.label_records import StoredRecord
from nodegate.reconciler.kit.errors import KubeError

app = typer_app(help="Inspect and drop persisted-label records.", no_args_is_help=True)


def _records(
    kubeconfig: Path | None, context: str | None, namespace: str
) -> tuple[LabelRecords, list[StoredRecord]]:
    """The records, from the cluster kubectl would talk to (as `status` and `explain`)."""
    records = label_records(kubeconfig, context, namespace)
    return records, records.all()


def _matching(records: list[StoredRecord], node: str) -> list[StoredRecord]:
    return [
        r
        for r in records
        if r.record is not None and (node in r.record.node_names or r.record.key == node)
    ]


def _found_any(matching: list[StoredRecord], node: str, namespace: str) -> None:
    if not matching:
        typer.echo(f"no record for {node} in namespace {namespace}", err=True)
        raise typer.Exit(1)


def _fail(err: KubeError) -> typer.Exit:
    typer.echo(f"nodegate labels: {err}", err=True)
    return typer.Exit(1)


@app.command("list", cls=Command)
def list_records(
    kubeconfig: Kubeconfig = None, context: Context = None, namespace: Namespace = DEFAULT_NAMESPACE
) -> None:
    """Every record: key, node names, labels, when captured, whether its node is gone."""
    try:
        _, records = _records(kubeconfig, context, namespace)
    except KubeError as err:
        raise _fail(err) from err
    table = Table()
    for column in ("record", "key", "nodes", "labels", "captured", "gone since"):
        table.add_column(column, no_wrap=True)
    for stored in sorted(records, key=lambda r: r.name):
        record = stored.record
        if record is None:
            table.add_row(stored.name, f"[red]unreadable: {stored.error}[/red]", "", "", "", "")
            continue
        table.add_row(
            stored.name,
            record.key,
            ", ".join(record.node_names),
            ", ".join(f"{k}={v}" for k, v in sorted(record.labels.items())),
            str(record.captured_at),
            str(record.node_gone_at or ""),
        )
    Console(width=400).print(table)


@app.command("show", cls=Command)
def show(
    node: Annotated[str, typer.Argument(help="Node name (or providerID).")],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
) -> None:
    """The labels nodegate would restore onto NODE if it were re-created."""
    try:
        _, records = _records(kubeconfig, context, namespace)
    except KubeError as err:
        raise _fail(err) from err
    matching = _matching(records, node)
    if not matching:
        typer.echo(f"no record for {node} in namespace {namespace}", err=True)
        raise typer.Exit(1)
    for stored in matching:
        record = stored.record
        assert record is not None
        typer.echo(f"record {stored.name} (key {record.key}, nodes {', '.join(record.node_names)})")
        for key, value in sorted(record.labels.items()):
            typer.echo(f"  {key}={value}")


@app.command("forget", cls=Command)
def forget(
    node: Annotated[str, typer.Argument(help="Node name (or providerID).")],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
) -> None:
    """Drop NODE's record: a re-created node then starts with no persisted labels."""
    try:
        store, records = _records(kubeconfig, context, namespace)
        matching = _matching(records, node)
        for stored in matching:
            store.forget(stored)
            typer.echo(f"forgot record {stored.name}")
    except KubeError as err:
        raise _fail(err) from err
    _found_any(matching, node, namespace)


@app.command("hand-over", cls=Command)
def hand_over(
    node: Annotated[str, typer.Argument(help="The record's node name, or its key.")],
    to: Annotated[str, typer.Option("--to", help="The Node of the machine to hand it to.")],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
) -> None:
    """Hand NODE's record to another machine's Node (a machine replaced under the same key):
    nodegate never takes a node's word for that. Its labels are restored there at that node's
    next plan (its next change, or the resync)."""
    try:
        store, records = _records(kubeconfig, context, namespace)
        target = store.node(to)
        matching = [m for m in _matching(records, node) if m.record is not None]
        for stored in matching:
            store.hand_over(stored, target)
            typer.echo(f"handed record {stored.name} to {to}")
    except NoSuchNodeError as err:
        typer.echo(f"nodegate labels: no node {to}", err=True)
        raise typer.Exit(1) from err
    except KubeError as err:
        raise _fail(err) from err
    _found_any(matching, node, namespace)
