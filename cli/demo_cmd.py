"""`nodegate demo`: the whole lifecycle on the embedded local control plane, no cloud account.

Starts kube-apiserver, etcd, scheduler, controller-manager and kwok from the cached build (built,
with progress, when missing), runs the reconciler in-process, and plays the story in
`demo_story.py`. Everything is torn down at the end or on Ctrl-C, unless `--keep`.
"""

from __future__ import annotations

import time
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from nodegate.cli.demo_story import Story
from nodegate.core.errors import RulesError
from nodegate.core.loader import parse_rules
from nodegate.localcluster.build import ensure_built, is_built
from nodegate.localcluster.cluster import LocalControlPlane


def demo(
    rules: Annotated[
        Path | None,
        typer.Option(help="Rules file to play (default: the shipped examples/rules.yaml)."),
    ] = None,
    keep: Annotated[
        bool, typer.Option(help="Leave the cluster running and print how to reach it.")
    ] = False,
) -> None:
    """Play nodegate's whole job on a local cluster: born tainted, gated, kept true."""
    console = Console()
    text = (
        rules.read_text(encoding="utf-8")
        if rules
        else files("nodegate.examples").joinpath("rules.yaml").read_text("utf-8")
    )
    source = str(rules or "examples/rules.yaml")
    try:
        parse_rules(text, source)
    except RulesError as err:
        for problem in err.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(1) from err
    if not is_built():
        console.print("[bold]Building the local control plane[/bold] (first run only, minutes)")
        with console.status("starting the build") as status:
            ensure_built(say=lambda line: status.update(line.strip()[:120]))
    with console.status("starting kube-apiserver, etcd, scheduler, controller-manager, kwok"):
        plane = LocalControlPlane(with_scheduling=True)
        plane.start()
    console.print(f"control plane up in {plane.startup_seconds:.1f}s at {plane.server_url}")
    try:
        result = Story(plane, text, console).play()
    finally:
        if keep:
            console.print(
                f"\n[bold]cluster kept.[/bold] export KUBECONFIG={plane.kubeconfig_path}\n"
                "  kubectl get nodes -o wide; kubectl get events -A | grep nodegate\n"
                "  (Ctrl-C here stops it)"
            )
            _wait_for_interrupt()
        plane.stop()
    if not result.ok:
        raise typer.Exit(1)


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return
