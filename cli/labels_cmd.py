"""`nodegate labels list|show NODE|forget NODE|hand-over KEY --to NODE`: the persisted-label
records, without reading raw ConfigMaps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nodegate.cli.help_format import Command, typer_app
from nodegate.cli.live.options import Context, Kubeconfig, Namespace, kube_client
from nodegate.defaults.names import DEFAULT_NAMESPACE

# What the commands run on is imported when they run (cli/lazy_group.py,
# tests/unit/cli/test_lazy_commands.py).
if TYPE_CHECKING:
    from nodegate.cli.live.cluster import Cluster
    from nodegate.cli.live.label_records import LabelRecords
    from nodegate.core.decisions.persisted_labels import StoredRecord
    from nodegate.core.rules.model import PersistentLabels

app = typer_app(help="Inspect and drop persisted-label records.", no_args_is_help=True)


def _store(kubeconfig: Path | None, context: str | None, namespace: str) -> LabelRecords:
    """The cluster kubectl would talk to (as `status` and `explain`), and the records' writes."""
    from nodegate.cli.live.cluster import Where  # noqa: PLC0415  (see the imports)
    from nodegate.cli.live.label_records import LabelRecords  # noqa: PLC0415

    return LabelRecords(kube_client(kubeconfig, context), Where(namespace))


def _records(kubeconfig: Path | None, context: str | None, namespace: str) -> list[StoredRecord]:
    """The records; exit 1 if they cannot be read."""
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415  (see the imports)

    try:
        return _store(kubeconfig, context, namespace).label_records()
    except KubeError as err:
        raise _fail(err) from err


def _matching(records: list[StoredRecord], node: str) -> list[StoredRecord]:
    """The readable records kept under the key `node`; if none is, those whose node was ever
    called `node` (a key names one record: `forget KEY` never drops another record that merely
    remembers a node of that name, as a record handed over remembers its old node's)."""
    readable = [r for r in records if r.record is not None]
    by_key = [r for r in readable if r.record is not None and r.record.key == node]
    return by_key or [r for r in readable if r.record is not None and node in r.record.node_names]


def _found_any(matching: list[StoredRecord], node: str, namespace: str) -> None:
    if not matching:
        typer.echo(f"no record for {node} in namespace {namespace}", err=True)
        raise typer.Exit(1)


def _fail(message: object) -> typer.Exit:
    """`message` said on stderr; raise what this returns (exit 1)."""
    typer.echo(f"nodegate labels: {message}", err=True)
    return typer.Exit(1)


@app.command("list", cls=Command)
def list_records(
    kubeconfig: Kubeconfig = None, context: Context = None, namespace: Namespace = DEFAULT_NAMESPACE
) -> None:
    """Every record: key, node names, labels, when captured, whether its node is gone."""
    from rich.console import Console  # noqa: PLC0415  (see the imports)
    from rich.table import Table  # noqa: PLC0415

    records = _records(kubeconfig, context, namespace)
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
    records = _records(kubeconfig, context, namespace)
    matching = _matching(records, node)
    _found_any(matching, node, namespace)
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
    from nodegate.reconciler.kit.errors import KubeError  # noqa: PLC0415  (see the imports)

    try:
        store = _store(kubeconfig, context, namespace)
        matching = _matching(store.label_records(), node)
        for stored in matching:
            store.forget(stored)
            typer.echo(f"forgot record {stored.name}")
    except KubeError as err:
        raise _fail(err) from err
    _found_any(matching, node, namespace)


def _key_by(cluster: Cluster, namespace: str) -> PersistentLabels:
    """How the reconciler keys records now: the rules in force, as its status record publishes
    them (never the rules ConfigMap, which may hold a held update). Refused (exit 1) when no
    rules persisting labels are in force: nothing would be restored."""
    from nodegate.cli.live.cluster import RulesInForceUnknownError  # noqa: PLC0415  (see the imports)

    try:
        in_force = cluster.rules_in_force()
    except RulesInForceUnknownError as err:
        raise _fail(f"cannot tell how records are keyed: {err}") from err
    if in_force is None or in_force.rules is None:
        why = (
            f"no reconciler has published rules in force in namespace {namespace}"
            if in_force is None
            else in_force.which
        )
        raise _fail(
            f"{why}: nothing says how records are keyed (keyBy) and nothing would restore the "
            "labels; nothing is handed over"
        )
    config = in_force.rules.persistent_labels
    if config is None:
        raise _fail(
            f"{in_force.which} persist no labels: nothing would restore them; nothing is handed "
            "over"
        )
    return config


@app.command("hand-over", cls=Command)
def hand_over(
    node: Annotated[str, typer.Argument(help="The record's key, or its node's name.")],
    to: Annotated[str, typer.Option("--to", help="The Node of the machine to hand it to.")],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = DEFAULT_NAMESPACE,
) -> None:
    """Hand NODE's record to another machine's Node (a replacement machine): nodegate never
    takes a node's word for that. The record is kept under that node's key (keyBy in the rules
    in force), where the reconciler looks: moved there if it was kept under another key, never
    over a record the node has of its own (then nothing changes, and what to forget is said).
    Its labels are restored at that node's next plan (its next change, or the resync)."""
    from nodegate.core.decisions.persisted_labels import (  # noqa: PLC0415  (see the imports)
        hand_over as decide_hand_over,
    )
    from nodegate.core.decisions.persisted_labels import record_key, record_name  # noqa: PLC0415
    from nodegate.reconciler.kit.errors import ConflictError, KubeError  # noqa: PLC0415

    try:
        store = _store(kubeconfig, context, namespace)
        config = _key_by(store, namespace)
        records = store.label_records()
        found = _matching(records, node)  # the one record NODE names
        _found_any(found, node, namespace)
        if len(found) > 1:
            keys = ", ".join(sorted(r.record.key for r in found if r.record is not None))
            raise _fail(
                f"{node} names {len(found)} records (keys {keys}); hand one over by its key: "
                "nodegate labels hand-over KEY --to NODE"
            )
        stored = found[0]
        target = store.node(to)
        if target is None:
            raise _fail(f"no node {to}")
        assert stored.record is not None
        own = record_name(record_key(target, config))
        has_own = any(r.name == own and r.name != stored.name for r in records)
        handed = decide_hand_over(stored.record, target, config, has_own)
        if handed.record is None:
            raise _fail(handed.refusal)
        name, kept = store.hand_over(stored, handed)
    # The reconciler wrote the record, or gave the node a record of its own, meanwhile: this
    # hand-over was decided on what is no longer there.
    except ConflictError as err:
        raise _fail(
            f"a record changed, or node {to} got one of its own, since they were read; nothing "
            "changed: run this again"
        ) from err
    except KubeError as err:
        raise _fail(err) from err
    restored = f"its labels are restored at {to}'s next plan"
    if not handed.from_key:
        typer.echo(f"handed record {name} (key {handed.record.key}) to {to}: {restored}")
        return
    typer.echo(
        f"re-keyed record {stored.name} from {handed.from_key} to {handed.record.key}, "
        f"{to}'s key: now record {name}; {restored}"
    )
    if kept is not None:
        typer.echo(
            f"nodegate labels: record {stored.name} (key {handed.from_key}) is kept: {kept}; "
            f"drop it with: nodegate labels forget {handed.from_key}",
            err=True,
        )
