"""`nodegate reconcile`: the in-cluster controller (the same entry point is the image's command)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from nodegate.reconciler.main import run
from nodegate.reconciler.settings import (
    LeaderElectionSettings,
    ReconcilerSettings,
    WebhookSettings,
)

_DEFAULTS = ReconcilerSettings.model_fields  # one home for the defaults the flags show


def reconcile(
    kubeconfig: Annotated[
        Path | None, typer.Option(help="Kubeconfig; omit in a Pod to use its service account.")
    ] = None,
    rules_file: Annotated[
        Path | None, typer.Option(help="Rules file (e.g. a mounted ConfigMap); re-read on change.")
    ] = None,
    rules_configmap: Annotated[
        str | None, typer.Option(help="Watch rules in this ConfigMap: namespace/name.")
    ] = None,
    rules_key: Annotated[
        str, typer.Option(help="Key of the rules YAML in the ConfigMap.")
    ] = "rules.yaml",
    dry_run: Annotated[
        bool, typer.Option(help="Log and record Events only; write nothing.")
    ] = False,
    resync_seconds: Annotated[
        float, typer.Option(help="Full pass over all nodes every N s.")
    ] = 300.0,
    workers: Annotated[int, typer.Option(help="Nodes reconciled in parallel.")] = _DEFAULTS[
        "workers"
    ].default,
    http_port: Annotated[int, typer.Option(help="Port for /healthz /readyz /metrics.")] = 8080,
    leader_elect: Annotated[bool, typer.Option(help="Lease-based leader election.")] = True,
    lease_namespace: Annotated[
        str, typer.Option(help="Namespace of the leader Lease.")
    ] = "kube-system",
    lease_name: Annotated[
        str, typer.Option(help="Name of the leader Lease.")
    ] = "nodegate-reconciler",
    lease_duration_seconds: Annotated[int, typer.Option(help="Lease duration.")] = 15,
    renew_deadline_seconds: Annotated[int, typer.Option(help="Renew deadline.")] = 10,
    retry_period_seconds: Annotated[int, typer.Option(help="Retry period.")] = 2,
    write_qps: Annotated[
        float, typer.Option(help="Client-side limit on node writes per second.")
    ] = _DEFAULTS["write_qps"].default,
    write_burst: Annotated[int, typer.Option(help="Node writes allowed in a burst.")] = _DEFAULTS[
        "write_burst"
    ].default,
    max_untaint_share: Annotated[
        float,
        typer.Option(
            help="Hold a rules update that would untaint more than this share of nodes (0-1)."
        ),
    ] = 0.5,
    confirm_rules: Annotated[
        str | None, typer.Option(help="Apply the held rules with this digest anyway.")
    ] = None,
    state_namespace: Annotated[
        str | None,
        typer.Option(help="Namespace of the reconciler's records (default: its Pod's)."),
    ] = None,
    list_page_size: Annotated[int, typer.Option(help="Objects per LIST page.")] = 200,
    webhook_port: Annotated[
        int | None,
        typer.Option(help="Serve the Node admission webhook (HTTPS) on this port (0: any free)."),
    ] = None,
    webhook_service: Annotated[
        str, typer.Option(help="The webhook's Service name, for its certificate's DNS names.")
    ] = "nodegate-webhook",
    webhook_host: Annotated[
        list[str] | None,
        typer.Option(help="Another DNS name or IP for the webhook certificate (repeatable)."),
    ] = None,
    webhook_configuration: Annotated[
        str, typer.Option(help="MutatingWebhookConfiguration whose caBundle is kept.")
    ] = "nodegate-node-admission",
    webhook_tls_secret: Annotated[
        str, typer.Option(help="Secret (own namespace) with the shared self-signed CA and cert.")
    ] = "nodegate-webhook-tls",
    webhook_cert_dir: Annotated[
        Path | None,
        typer.Option(help="Serve tls.crt/tls.key from here (e.g. cert-manager) instead."),
    ] = None,
) -> None:
    """Keep every node's labels and taints what the rules want, for the life of the node."""
    try:
        settings = ReconcilerSettings(
            kubeconfig=kubeconfig,
            rules_file=rules_file,
            rules_configmap=rules_configmap,
            rules_key=rules_key,
            dry_run=dry_run,
            resync_seconds=resync_seconds,
            workers=workers,
            http_port=http_port,
            write_qps=write_qps,
            write_burst=write_burst,
            max_untaint_share=max_untaint_share,
            confirm_rules=confirm_rules,
            state_namespace=state_namespace,
            list_page_size=list_page_size,
            webhook=None
            if webhook_port is None
            else WebhookSettings(
                port=webhook_port,
                service=webhook_service,
                hosts=tuple(webhook_host or ()),
                configuration=webhook_configuration,
                tls_secret=webhook_tls_secret,
                cert_dir=webhook_cert_dir,
            ),
            leader_election=LeaderElectionSettings(
                enabled=leader_elect,
                lease_name=lease_name,
                lease_namespace=lease_namespace,
                lease_duration_seconds=lease_duration_seconds,
                renew_deadline_seconds=renew_deadline_seconds,
                retry_period_seconds=retry_period_seconds,
            ),
        )
    except ValidationError as err:
        for error in err.errors():
            typer.echo(
                f"nodegate reconcile: {error['msg'].removeprefix('Value error, ')}", err=True
            )
        raise typer.Exit(2) from err
    raise typer.Exit(run(settings))
