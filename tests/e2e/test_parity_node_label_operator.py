"""Parity with the node-label-operator: its quick start (label a node, delete it, register it
again, the label is back) replayed on the real API server, the reconciler run with what
`nodegate migrate node-label-operator` makes of its environment; and the one difference a
hostile or recycled name calls for: another machine registering under the name (OKE names nodes
by private IP, and IPs are reused) does not inherit the record."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.nodes import SimNode, create_node, delete_node, wait_until
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.defaults import OperatorSettings
from nodegate.migrate.node_label_operator import convert_node_label_operator
from tests.e2e.support.reconciler_fixtures import (
    TIMEOUT,
    Start,
    patch_labels,
    read_node,
    wait_for_event,
    wait_for_record,
)
from tests.unit.migrate.support import env_file

LABEL = "persist.demo/type"  # the label of its README's state example


def start_migrated(records_namespace: str, start_reconciler_with: Start) -> None:
    env = env_file("node-label-operator.env")
    settings = OperatorSettings(
        persist_label_prefix=env["PERSIST_LABEL_PREFIX"],
        resync_interval_seconds=env["RESYNC_INTERVAL_SECONDS"],
    )
    conversion = convert_node_label_operator(
        replace(settings, operator_namespace=records_namespace)
    )
    assert "--state-namespace" in conversion.reconciler_flags
    start_reconciler_with(to_yaml(conversion), *conversion.reconciler_flags)


def labelled_then_deleted(core_v1: k8s_client.CoreV1Api, namespace: str, name: str) -> str:
    """A node labelled as the quick start does, then deleted; its providerID."""
    provider_id = f"oci://ocid1.instance.oc1.phx.{name}-1"
    create_node(core_v1, SimNode(name=name, provider_id=provider_id))
    patch_labels(core_v1, name, {LABEL: "expensive"})
    wait_for_record(core_v1, namespace, name, lambda r: r["labels"] == {LABEL: "expensive"})
    delete_node(core_v1, name)
    kept = wait_for_record(core_v1, namespace, name, lambda r: bool(r["nodeGoneAt"]))
    assert kept["labels"] == {LABEL: "expensive"}  # the deleted node keeps its record
    return provider_id


@pytest.fixture
def deleted_worker(
    records_namespace: str,
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> tuple[str, str]:
    """The quick start's labelled node, deleted under the migrated reconciler: name, providerID."""
    start_migrated(records_namespace, start_reconciler_with)
    name = f"{unique_name}-worker"
    return name, labelled_then_deleted(core_v1, records_namespace, name)


def test_a_node_deleted_and_registered_again_gets_its_persisted_labels_back(
    deleted_worker: tuple[str, str], core_v1: k8s_client.CoreV1Api
) -> None:
    name, provider_id = deleted_worker

    registered = time.monotonic()  # the same machine registers again (keyBy: nodeName)
    create_node(core_v1, SimNode(name=name, provider_id=provider_id))
    wait_until(
        lambda: read_node(core_v1, name)["metadata"]["labels"].get(LABEL) == "expensive",
        TIMEOUT,
        "restored label",
        interval=0.02,
    )
    print(f"re-registered node carried no persisted label for {time.monotonic() - registered:.2f}s")
    [event] = wait_for_event(core_v1, name, "NodegateLabelsRestored")
    assert f"{LABEL}=expensive" in (event.message or "")
    delete_node(core_v1, name)


def test_another_machine_registering_under_the_name_does_not_inherit_the_record(
    deleted_worker: tuple[str, str], core_v1: k8s_client.CoreV1Api
) -> None:
    name, _ = deleted_worker

    other = SimNode(name=name, provider_id=f"oci://ocid1.instance.oc1.phx.{name}-2")
    create_node(core_v1, other)
    [event] = wait_for_event(core_v1, name, "LabelRecordWithheld")
    assert "another machine" in (event.message or "")
    assert f"{LABEL}=expensive" in (event.message or "")  # the labels it no longer keeps
    assert LABEL not in read_node(core_v1, name)["metadata"]["labels"]
    delete_node(core_v1, name)
