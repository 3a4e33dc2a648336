"""`nodegate labels list|show|forget|hand-over` against the real API server, run as a user runs
it (the installed executable), finding its cluster as kubectl does: `--kubeconfig`, else
`$KUBECONFIG`, with `--context` choosing among its contexts.

Each test has a namespace of its own holding one persisted-label record, written in the
reconciler's format (`encode_record`), for a Node the test creates and deletes.
"""

from __future__ import annotations

import json
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

BIN = Path(sys.executable).parent
OLD_MACHINE = "kwok://old-machine"


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
            spec={"providerID": "kwok://new-machine"},
        )
    )
    record = LabelRecord(
        key=OLD_MACHINE,
        node_uid="uid-of-the-old-node",
        labels={"persist.example.com/team": "ml"},
        captured_at=datetime(2026, 11, 28, tzinfo=UTC),
        node_names=("old-node",),
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


def test_hand_over_moves_the_record_to_the_named_nodes_machine(
    scene: Scene, core_v1: k8s_client.CoreV1Api
) -> None:
    handed = nodegate_labels(
        "hand-over",
        "old-node",
        "--to",
        scene.node,
        "-n",
        scene.namespace,
        "--kubeconfig",
        str(scene.kubeconfig),
    )
    assert handed.returncode == 0, handed.stderr
    data = core_v1.read_namespaced_config_map(scene.record, scene.namespace).data or {}
    document = json.loads(next(iter(data.values())))
    assert document["providerID"] == "kwok://new-machine"
    assert document["nodeNames"][-1] == scene.node
    assert document["labels"] == {"persist.example.com/team": "ml"}


def test_forget_drops_the_record(scene: Scene, core_v1: k8s_client.CoreV1Api) -> None:
    args = ("-n", scene.namespace, "--kubeconfig", str(scene.kubeconfig))
    forgot = nodegate_labels("forget", OLD_MACHINE, *args)
    assert forgot.returncode == 0, forgot.stderr
    with pytest.raises(ApiException) as gone:
        core_v1.read_namespaced_config_map(scene.record, scene.namespace)
    assert gone.value.status == 404
