"""`nodegate labels list|show|forget|hand-over` against the real API server, run as a user runs
it (the installed executable), finding its cluster as kubectl does: `--kubeconfig`, else
`$KUBECONFIG`, with `--context` choosing among its contexts.

Each test has a namespace of its own holding one persisted-label record, written in the
reconciler's format (`encode_record`), of a machine whose Node is gone, and a Node of another
machine (another providerID) the test creates and deletes. The hand-over tests run a
reconciler on that namespace: the rules in force say how records are keyed, and it restores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.persisted_labels import (
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    LabelRecord,
    encode_record,
    record_name,
)
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import (
    RULES,
    TIMEOUT,
    Start,
    patch_labels,
    read_node,
    record_of,
    status_in,
    wait_for_event,
    wait_for_record,
)

BIN = Path(sys.executable).parent
OLD_MACHINE = "kwok://old-machine"
NEW_MACHINE = "kwok://new-machine"
TEAM = "persist.example.com/team"
PERSIST = RULES + "persistentLabels: {prefixes: [persist.example.com/], forgetAfter: 720h}\n"


@dataclass(frozen=True)
class Scene:
    namespace: str
    node: str
    record: str
    kubeconfig: Path


def nodegate_labels(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "nodegate"), "labels", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


@pytest.fixture
def scene(
    control_plane: LocalControlPlane, core_v1: k8s_client.CoreV1Api, unique_name: str
) -> Iterator[Scene]:
    namespace = unique_name[:63].rstrip("-")
    node = f"{namespace[:50]}-new"
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": namespace}))
    core_v1.create_node(
        k8s_client.V1Node(
            metadata={"name": node},
            spec={"providerID": NEW_MACHINE},
        )
    )
    record = LabelRecord(
        key=OLD_MACHINE,
        node_uid="uid-of-the-old-node",
        labels={"persist.example.com/team": "ml"},
        captured_at=datetime(2026, 11, 28, tzinfo=UTC),
        node_names=("old-node",),
        node_gone_at=datetime(2026, 11, 29, tzinfo=UTC),
        provider_id=OLD_MACHINE,
    )
    name = record_name(OLD_MACHINE)
    core_v1.create_namespaced_config_map(
        namespace,
        k8s_client.V1ConfigMap(
            metadata={"name": name, "labels": {RECORD_LABEL: RECORD_LABEL_VALUE}},
            data=encode_record(record),
        ),
    )
    yield Scene(namespace, node, name, control_plane.kubeconfig_path)
    core_v1.delete_node(node)
    core_v1.delete_namespace(namespace)


def test_list_and_show_find_the_cluster_through_kubeconfig_as_kubectl_does(scene: Scene) -> None:
    env = {"KUBECONFIG": str(scene.kubeconfig)}
    listed = nodegate_labels("list", "-n", scene.namespace, env=env)
    assert listed.returncode == 0, listed.stderr
    assert scene.record in listed.stdout and "persist.example.com/team=ml" in listed.stdout
    shown = nodegate_labels("show", "old-node", "-n", scene.namespace, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "persist.example.com/team=ml" in shown.stdout


def test_context_chooses_the_cluster_among_the_kubeconfigs_contexts(
    scene: Scene, tmp_path: Path
) -> None:
    config = yaml.safe_load(scene.kubeconfig.read_text())
    config["contexts"].append({"name": "elsewhere", "context": {"cluster": "nowhere", "user": "x"}})
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["users"].append({"name": "x", "user": {}})
    config["current-context"] = "elsewhere"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    here = config["contexts"][0]["name"]
    args = ("list", "-n", scene.namespace, "--kubeconfig", str(kubeconfig))
    assert nodegate_labels(*args, "--context", here).returncode == 0
    unreachable = nodegate_labels(*args)
    assert unreachable.returncode == 1
    assert "nodegate labels:" in unreachable.stderr
    missing = nodegate_labels(*args, "--context", "no-such-context")
    assert missing.returncode == 1
    assert "cannot load a kubeconfig" in missing.stderr


def reconciling(scene: Scene, start: Start, core_v1: k8s_client.CoreV1Api) -> None:
    """A reconciler persisting labels (keyBy: providerID) with the scene's namespace as its
    own, resyncing every second (so "the node's next plan" is within one), once its rules in
    force are published there."""
    start(PERSIST, "--state-namespace", scene.namespace, "--resync-seconds", "1")
    wait_until(
        lambda: status_in(core_v1, scene.namespace)[0] >= 1, TIMEOUT, "rules in force published"
    )


def version(core_v1: k8s_client.CoreV1Api, scene: Scene) -> str:
    """The resourceVersion of the scene's record (any write changes it)."""
    meta = core_v1.read_namespaced_config_map(scene.record, scene.namespace).metadata
    assert meta is not None
    return str(meta.resource_version)


def hand_over(scene: Scene, key: str) -> subprocess.CompletedProcess[str]:
    args = ("-n", scene.namespace, "--kubeconfig", str(scene.kubeconfig))
    return nodegate_labels("hand-over", key, "--to", scene.node, *args)


def test_hand_over_with_no_rules_in_force_changes_nothing_and_says_why(
    scene: Scene, core_v1: k8s_client.CoreV1Api
) -> None:
    before = version(core_v1, scene)

    handed = hand_over(scene, "old-node")

    assert handed.returncode == 1
    assert "no reconciler has published rules in force" in handed.stderr
    assert version(core_v1, scene) == before


def test_hand_over_to_a_machine_under_another_key_moves_the_record_there_and_it_is_restored(
    scene: Scene, core_v1: k8s_client.CoreV1Api, start_reconciler_with: Start
) -> None:
    """Issue 56: the replacement machine's providerID is another key. The command says it
    re-keyed the record, and the reconciler, which looks the node's record up under the node's
    own key, restores the labels there."""
    reconciling(scene, start_reconciler_with, core_v1)

    handed = hand_over(scene, "old-node")

    assert handed.returncode == 0, handed.stderr
    wait_until(
        lambda: read_node(core_v1, scene.node)["metadata"].get("labels", {}).get(TEAM) == "ml",
        TIMEOUT,
        "the handed-over label on the new machine",
    )
    assert f"re-keyed record {scene.record} from {OLD_MACHINE} to {NEW_MACHINE}" in handed.stdout
    [event] = wait_for_event(core_v1, scene.node, "NodegateLabelsRestored")
    assert record_name(NEW_MACHINE) in (event.message or "")
    with pytest.raises(ApiException) as gone:
        core_v1.read_namespaced_config_map(scene.record, scene.namespace)
    assert gone.value.status == 404


def test_hand_over_to_a_node_with_a_record_of_its_own_is_refused_and_changes_nothing(
    scene: Scene, core_v1: k8s_client.CoreV1Api, start_reconciler_with: Start
) -> None:
    reconciling(scene, start_reconciler_with, core_v1)
    patch_labels(core_v1, scene.node, {"persist.example.com/zone": "a"})
    own = wait_for_record(core_v1, scene.namespace, NEW_MACHINE, lambda r: bool(r["labels"]))
    before = version(core_v1, scene)

    handed = hand_over(scene, OLD_MACHINE)

    assert handed.returncode == 1
    assert OLD_MACHINE in handed.stderr and NEW_MACHINE in handed.stderr
    assert f"nodegate labels forget {NEW_MACHINE}, then run this again" in handed.stderr
    assert version(core_v1, scene) == before
    assert record_of(core_v1, scene.namespace, NEW_MACHINE) == own
    assert TEAM not in read_node(core_v1, scene.node)["metadata"]["labels"]


def test_forget_drops_the_record(scene: Scene, core_v1: k8s_client.CoreV1Api) -> None:
    args = ("-n", scene.namespace, "--kubeconfig", str(scene.kubeconfig))
    forgot = nodegate_labels("forget", OLD_MACHINE, *args)
    assert forgot.returncode == 0, forgot.stderr
    with pytest.raises(ApiException) as gone:
        core_v1.read_namespaced_config_map(scene.record, scene.namespace)
    assert gone.value.status == 404
