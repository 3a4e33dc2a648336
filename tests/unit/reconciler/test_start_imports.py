"""What the reconciler's start loads (an import guard, not a timing: `make bench-restart` and
`make bench-cli` time it): the Node admission webhook (off by default) is loaded when used, not
by every start, and the calls of `KubeApi` load none of the official client's generated API
classes (`kit.client.Direct`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
UNUSED_AT_START = (
    "nodegate.reconciler.webhook.server",
    "cryptography",
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.api.apps_v1_api",
    "kubernetes.client.api.storage_v1_api",
    "kubernetes.client.api.custom_objects_api",
    "kubernetes.client.api.apiextensions_v1_api",
    "kubernetes.client.api.version_api",
)

_PROGRAM = """
import json, sys
from nodegate.reconciler.main import _build
from nodegate.reconciler.settings import ReconcilerSettings

_build(ReconcilerSettings(kubeconfig=sys.argv[1], rules_configmap="ns/rules"))
print(json.dumps(sorted(sys.modules)))
"""


def test_a_start_loads_neither_the_webhook_nor_the_api_classes_of_kube_api(tmp_path: Path) -> None:
    # The parts a start builds (clients, election, controller, rules watcher), no server called.
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(KUBECONFIG)
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(kubeconfig)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])

    assert "nodegate.reconciler.nodes.controller" in modules  # the start was built
    assert [m for m in modules if m.startswith(UNUSED_AT_START)] == []
