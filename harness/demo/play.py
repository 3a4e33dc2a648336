"""What `nodegate demo` runs once its rules are valid: the local control plane, the story.

Starts kube-apiserver, etcd, scheduler, controller-manager and kwok from the cached build (built,
with progress, when missing), runs the reconciler in-process, and plays the story in
`story.py`. Everything is torn down at the end or on Ctrl-C, unless `keep`.
"""

from __future__ import annotations

import time

from rich.console import Console

from nodegate.demo.story import Story
from nodegate.localcluster.build import ensure_built, is_built
from nodegate.localcluster.cluster import LocalControlPlane


def play(rules_text: str, console: Console, *, keep: bool = False) -> bool:
    """Play the story on validated rules; True when every step did what it says."""
    if not is_built():
        console.print("[bold]Building the local control plane[/bold] (first run only, minutes)")
        with console.status("starting the build") as status:
            ensure_built(say=lambda line: status.update(line.strip()[:120]))
    with console.status("starting kube-apiserver, etcd, scheduler, controller-manager, kwok"):
        plane = LocalControlPlane(with_scheduling=True)
        plane.start()
    console.print(f"control plane up in {plane.startup_seconds:.1f}s at {plane.server_url}")
    try:
        result = Story(plane, rules_text, console).play()
    finally:
        if keep:
            console.print(
                f"\n[bold]cluster kept.[/bold] export KUBECONFIG={plane.kubeconfig_path}\n"
                "  kubectl get nodes -o wide; kubectl get events -A | grep nodegate\n"
                "  (Ctrl-C here stops it)"
            )
            _wait_for_interrupt()
        plane.stop()
    return result.ok


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return
