"""What the reconciler's start loads (an import guard, not a timing: `make bench-restart` and
`make bench-cli` time it): the Node admission webhook (off by default) is loaded when used, not
by every start, and none of the official client's generated API classes or models is loaded at
all: every call goes through `kit.client.Direct` (making `CoreV1Api` alone took 0.4-0.57 s of
CPU, about half a start's)."""

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
    # The generated API classes (each imports the pydantic model of every object its calls
    # name) and the models themselves.
    "kubernetes.client.api.",
    "kubernetes.client.apis.",
    "kubernetes.client.models.",
)

_START = """
import json, sys
from nodegate.reconciler.main import _build
from nodegate.reconciler.settings import ReconcilerSettings

_build(ReconcilerSettings(kubeconfig=sys.argv[1], rules_configmap="ns/rules"))
print(json.dumps(sorted(sys.modules)))
"""
_CLIENT = """
import json, sys
import kubernetes.client
print(json.dumps(sorted(sys.modules)))
"""


def _modules(program: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_start_loads_neither_the_webhook_nor_any_generated_api_class_or_model(
    tmp_path: Path,
) -> None:
    # The parts a start builds (clients, election, controller, rules watcher), no server called.
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(KUBECONFIG)
    modules = _modules(_START, str(kubeconfig))

    assert "nodegate.reconciler.nodes.controller" in modules  # the start was built
    assert [m for m in modules if m.startswith(UNUSED_AT_START)] == []
    # Of the client, only what `import kubernetes.client` loads itself (its configuration, its
    # pool, its exceptions; `kubernetes.client.models` is a package whose models load lazily).
    client_own = set(_modules(_CLIENT))
    loaded = {m for m in modules if m.startswith("kubernetes.client.")}
    assert sorted(loaded - client_own) == []
