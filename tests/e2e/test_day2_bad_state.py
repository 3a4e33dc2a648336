"""The day-2 commands when the reconciler's published state cannot be trusted as it stands: a
status record someone corrupted, or one that says no rules are in force yet while an update is
held. `nodegate plan` and `explain` must never guess the rules in force from the rules
ConfigMap then (it holds the held update, not the rules in force). No reconciler runs here:
the test writes the state a reconciler (or a careless hand) left.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.core.objects.status_record import HeldUpdate, ReconcilerStatus, encode_status
from nodegate.localcluster.cluster import LocalControlPlane
from tests.e2e.support.reconciler_fixtures import HEADER

BIN = Path(sys.executable).parent
TEAM = "e2e.nodegate.dev/day2-bad-state"
RULES = HEADER + (
    "labelTaints:\n"
    "  - name: team\n"
    f"    match: {{labels: {{{TEAM}: 'yes'}}}}\n"
    "    taint: {key: e2e.nodegate.dev/day2-bad-state, effect: NoSchedule}\n"
    "    nodeMayLift: true\n"
)


@pytest.fixture
def namespace(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[str]:
    name = unique_name[:63].rstrip("-")
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": name}))
    yield name
    core_v1.delete_namespace(name)


def put_configmap(
    core_v1: k8s_client.CoreV1Api, namespace: str, name: str, data: dict[str, str]
) -> None:
    core_v1.create_namespaced_config_map(
        namespace, k8s_client.V1ConfigMap(metadata={"name": name}, data=data)
    )


def run(plane: LocalControlPlane, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(BIN / "nodegate"),
        *args,
        "-n",
        namespace,
        "--kubeconfig",
        str(plane.kubeconfig_path),
    ]
    env = {**os.environ, "COLUMNS": "160"}
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=env)


def test_plan_and_explain_refuse_a_corrupted_status_record_rather_than_guess(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    namespace: str,
    make_node: Callable[..., str],
    tmp_path: Path,
) -> None:
    node = make_node("team", labels={TEAM: "yes"})
    put_configmap(core_v1, namespace, "nodegate-rules", {"rules.yaml": RULES})
    put_configmap(
        core_v1, namespace, "nodegate-status", {"status.json": "{not json", "rules.yaml": RULES}
    )
    new = tmp_path / "new.yaml"
    new.write_text(RULES)

    planned = run(control_plane, namespace, "plan", "--rules", str(new))
    explained = run(control_plane, namespace, "explain", node)

    assert planned.returncode == 1, planned.stdout + planned.stderr
    assert f"{namespace}/nodegate-status" in planned.stderr
    assert "the rules in force are unknown" in planned.stderr
    assert explained.returncode == 1, explained.stdout + explained.stderr
    assert f"{namespace}/nodegate-status" in explained.stderr


def test_plan_compares_with_no_rules_while_the_first_update_is_held(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    namespace: str,
    make_node: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Generation 0 with a held update: the ConfigMap holds the held text, and no rules are in
    force. Planning that same text must show what it would do (exit 2), not "no change"."""
    node = make_node("held", labels={TEAM: "yes"})
    put_configmap(core_v1, namespace, "nodegate-rules", {"rules.yaml": RULES})
    now = datetime.now(UTC).replace(microsecond=0)
    held = HeldUpdate("0123456789abcdef", "held for the test", "configmap", now)
    status = ReconcilerStatus("replica-1", "0.1.0", 0, None, "", None, held, now)
    put_configmap(core_v1, namespace, "nodegate-status", encode_status(status, ""))
    new = tmp_path / "held.yaml"
    new.write_text(RULES)

    planned = run(control_plane, namespace, "plan", "--rules", str(new))

    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert "compared with no rules (none are in force yet)" in planned.stdout
    assert node in planned.stdout
