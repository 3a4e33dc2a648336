"""`nodegate plan` with a `nodeAgents` rule, on the real control plane with the DaemonSet
controller and kwok: the plan looks the new rule's agents up as the reconciler's guard does, and
offline, from what `kubectl` saved of the same nodes, DaemonSets and pods, gives the same report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from nodegate.localcluster.build import ensure_kubectl_built
from tests.e2e.support.agent_scene import AGENT, Scene, scene

__all__ = ["scene"]  # the shared fixture, used by name

BIN = Path(sys.executable).parent
RULE = f"""\
nodeAgents:
  - name: agent
    match: {{labels: {{example.com/agents: POOL}}}}
    daemonSets: [{{namespace: NAMESPACE, name: agent}}]
    mode: continuous
    for: 0s
    taint: {{key: {AGENT[0]}, effect: {AGENT[1]}}}
"""


def kubectl(scene: Scene, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(scene.plane.kubeconfig_path)}
    return subprocess.run(
        [str(ensure_kubectl_built()), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout


def nodegate_plan(*args: str, kubeconfig: Path | None = None) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    argv = [str(BIN / "nodegate"), "plan", *args, "-o", "json"]
    if kubeconfig is not None:
        argv += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 2, 3), done.stdout + done.stderr
    return json.loads(done.stdout)


def test_plan_live_and_offline_taint_the_node_whose_agent_is_not_ready_and_no_other(
    scene: Scene,
) -> None:
    ready, failing = scene.node("ready", tainted=False), scene.node("failing", tainted=False)
    scene.daemon_set("agent")
    scene.ready_pod_of("agent", ready)
    scene.fail(scene.ready_pod_of("agent", failing))
    new = scene.tmp_path / "new.yaml"
    new.write_text(scene.rules(RULE), encoding="utf-8")
    nodes, objects = scene.tmp_path / "nodes.yaml", scene.tmp_path / "objects.yaml"
    for _ in range(5):  # other tests' nodes come and go: both plans must see the same ones
        nodes.write_text(kubectl(scene, "get", "nodes", "-o", "yaml"), encoding="utf-8")
        objects.write_text(
            kubectl(scene, "get", "daemonsets,pods", "-n", scene.namespace, "-o", "yaml"),
            encoding="utf-8",
        )
        live = nodegate_plan(
            "--rules", str(new), "-n", scene.namespace, kubeconfig=scene.plane.kubeconfig_path
        )
        names = yaml.safe_load(kubectl(scene, "get", "nodes", "-o", "yaml"))["items"]
        if live["nodes"] == len(names) == len(yaml.safe_load(nodes.read_text())["items"]):
            break
    offline = nodegate_plan(
        "--rules",
        str(new),
        "--nodes",
        str(nodes),
        "--daemon-sets",
        str(objects),
        "--pods",
        str(objects),
    )

    assert live["changes"] == [
        {"node": failing, "pool": "-", "changes": [f"+ taint {AGENT[0]}:{AGENT[1]}"]}
    ]
    assert live.pop("comparedWith") == "no rules (none are in force)"
    assert offline.pop("comparedWith").startswith("no rules (offline")
    assert live.pop("assumed") == []
    assert offline.pop("assumed")
    assert offline == live
