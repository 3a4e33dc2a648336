"""Persisted labels on the real API server: nodes deleted and re-created as clouds do it.

OKE replaces an instance (same name, new providerID); AKS re-images a VMSS instance (new name,
same providerID). Records live in a namespace of each test's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client as k8s_client

from nodegate.core.decisions.persisted_labels import record_name
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import (
    SimNode,
    azure_provider_id,
    create_node,
    delete_node,
    wait_until,
)
from tests.e2e.support.reconciler_fixtures import (
    RULES,
    TIMEOUT,
    Start,
    after_a_reconcile,
    configmaps,
    patch_labels,
    read_node,
    record_of,
    records,
    settled,
    wait_for_event,
    wait_for_record,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess

TEAM = "persist.example.com/team"
PERSIST = RULES + "persistentLabels: {prefixes: [persist.example.com/], forgetAfter: %s}\n"


@pytest.fixture
def persisting(records_namespace: str, start_reconciler_with: Start) -> Start:
    """Records namespace first, so it outlives the reconciler (teardown runs in reverse)."""

    def start(forget_after: str = "720h") -> ReconcilerProcess:
        rules = PERSIST % forget_after
        return start_reconciler_with(rules, "--state-namespace", records_namespace)

    return start


def node_uid(core_v1: k8s_client.CoreV1Api, name: str) -> str:
    return str(read_node(core_v1, name)["metadata"]["uid"])


def labelled_node(
    core_v1: k8s_client.CoreV1Api, namespace: str, name: str, provider_id: str
) -> None:
    """A node an admin labelled (`kubectl label`), once its record holds the label."""
    create_node(core_v1, SimNode(name=name, provider_id=provider_id))
    patch_labels(core_v1, name, {TEAM: "ml"})
    wait_for_record(core_v1, namespace, provider_id, lambda r: r["labels"].get(TEAM) == "ml")


def wait_for_team_label(core_v1: k8s_client.CoreV1Api, name: str, what: str) -> None:
    """Until the node carries the persisted label team=ml (polled every 20 ms)."""
    wait_until(
        lambda: read_node(core_v1, name)["metadata"]["labels"].get(TEAM) == "ml",
        TIMEOUT,
        what,
        interval=0.02,
    )


def test_a_node_re_created_with_a_new_name_and_the_same_provider_id_gets_its_labels_back(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    persisting()
    provider_id = azure_provider_id(unique_name[:30], 3)
    old, new = f"{unique_name}-vmss000003"[:63], f"{unique_name}-vmss000003b"[:63]
    labelled_node(core_v1, records_namespace, old, provider_id)
    delete_node(core_v1, old)

    created = time.monotonic()
    create_node(core_v1, SimNode(name=new, provider_id=provider_id))
    wait_for_team_label(core_v1, new, "restored label")
    print(f"re-created node carried no persisted labels for {time.monotonic() - created:.3f}s")
    [event] = wait_for_event(core_v1, new, "NodegateLabelsRestored")
    assert f"{TEAM}=ml" in (event.message or "")
    delete_node(core_v1, new)


def test_a_label_an_admin_removed_stays_gone_after_re_creation(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    persisting()
    name, provider_id = f"{unique_name}-n", f"oci://ocid1.instance.oc1.phx.{unique_name}"
    labelled_node(core_v1, records_namespace, name, provider_id)
    patch_labels(core_v1, name, {TEAM: None})
    wait_for_record(core_v1, records_namespace, provider_id, lambda r: TEAM not in r["labels"])
    delete_node(core_v1, name)
    create_node(core_v1, SimNode(name=name, provider_id=provider_id))
    uid = node_uid(core_v1, name)
    wait_for_record(core_v1, records_namespace, provider_id, lambda r: r["nodeUID"] == uid)
    assert TEAM not in read_node(core_v1, name)["metadata"]["labels"]
    delete_node(core_v1, name)


def test_same_name_with_a_new_provider_id_carries_nothing_over_when_keyed_by_provider_id(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    persisting()
    name = f"{unique_name}-n"
    first, second = (f"oci://ocid1.instance.oc1.phx.{unique_name}-{i}" for i in (1, 2))
    labelled_node(core_v1, records_namespace, name, first)
    delete_node(core_v1, name)
    create_node(core_v1, SimNode(name=name, provider_id=second))
    patch_labels(core_v1, name, {"persist.example.com/witness": "x"})
    wait_for_record(core_v1, records_namespace, second, lambda r: bool(r["labels"]))
    assert TEAM not in read_node(core_v1, name)["metadata"]["labels"]
    delete_node(core_v1, name)


def test_a_corrupt_record_is_quarantined_and_no_label_is_lost(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    reconciler = persisting()
    name, provider_id = f"{unique_name}-n", f"oci://ocid1.instance.oc1.phx.{unique_name}"
    labelled_node(core_v1, records_namespace, name, provider_id)
    record = record_name(provider_id)
    core_v1.patch_namespaced_config_map(
        record, records_namespace, {"data": {"record.json": "{hand-edited, broken"}}
    )
    patch_labels(core_v1, name, {"persist.example.com/other": "y"})  # makes it look again

    wait_for_event(core_v1, name, "LabelRecordQuarantined")
    kept = [
        cm
        for cm in configmaps(core_v1, records_namespace)
        if cm["metadata"]["name"].startswith(f"{record}-quarantined-")
    ]
    assert [cm["data"]["record.json"] for cm in kept] == ["{hand-edited, broken"]
    labels = read_node(core_v1, name)["metadata"]["labels"]
    assert labels[TEAM] == "ml" and labels["persist.example.com/other"] == "y"
    wait_for_record(
        core_v1, records_namespace, provider_id, lambda r: r["labels"].get(TEAM) == "ml"
    )
    assert reconciler.get("/healthz")[0] == 200
    assert reconciler.metric("nodegate_label_records_quarantined_total") == 1
    delete_node(core_v1, name)


def test_a_restore_racing_another_clients_label_write_loses_neither(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    reconciler = persisting()
    provider_id = f"oci://ocid1.instance.oc1.phx.{unique_name}"
    old, new = f"{unique_name}-a", f"{unique_name}-b"
    labelled_node(core_v1, records_namespace, old, provider_id)
    delete_node(core_v1, old)

    create_node(core_v1, SimNode(name=new, provider_id=provider_id))

    def other_client() -> None:  # another controller labelling the fresh node, over and over
        for i in range(20):
            patch_labels(core_v1, new, {"other.io/step": str(i)})

    writer = threading.Thread(target=other_client)
    writer.start()
    writer.join()
    wait_until(
        lambda: read_node(core_v1, new)["metadata"]["labels"].get(TEAM) == "ml",
        TIMEOUT,
        "restored label",
    )
    labels = read_node(core_v1, new)["metadata"]["labels"]
    assert labels["other.io/step"] == "19"
    print(f"conflicts retried: {reconciler.metric('nodegate_write_conflicts_total'):.0f}")
    delete_node(core_v1, new)


def test_records_of_deleted_nodes_are_forgotten_after_forget_after_and_live_ones_kept(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    reconciler = persisting(forget_after="3s")
    gone, live = f"{unique_name}-gone", f"{unique_name}-live"
    gone_id, live_id = (f"oci://ocid1.instance.oc1.phx.{n}" for n in (gone, live))
    labelled_node(core_v1, records_namespace, gone, gone_id)
    labelled_node(core_v1, records_namespace, live, live_id)
    delete_node(core_v1, gone)
    wait_for_record(core_v1, records_namespace, gone_id, lambda r: r["nodeGoneAt"] is not None)
    wait_until(
        lambda: record_name(gone_id) not in records(core_v1, records_namespace),
        TIMEOUT,
        "record forgotten",
    )
    time.sleep(4)  # well past forgetAfter: a live node's record is never collected
    assert record_name(live_id) in records(core_v1, records_namespace)
    assert reconciler.metric("nodegate_label_records_forgotten_total") == 1
    delete_node(core_v1, live)


def test_nodegate_labels_lists_shows_and_forgets_a_record(
    persisting: Start,
    core_v1: k8s_client.CoreV1Api,
    records_namespace: str,
    unique_name: str,
    control_plane: LocalControlPlane,
) -> None:
    from typer.testing import CliRunner

    from nodegate.cli.main import app

    persisting()
    name, provider_id = f"{unique_name}-n", f"oci://ocid1.instance.oc1.phx.{unique_name}"
    labelled_node(core_v1, records_namespace, name, provider_id)
    where = ["--kubeconfig", str(control_plane.kubeconfig_path), "--namespace", records_namespace]
    runner = CliRunner()

    listed = runner.invoke(app, ["labels", "list", *where])
    assert listed.exit_code == 0 and record_name(provider_id) in listed.output
    shown = runner.invoke(app, ["labels", "show", name, *where])
    assert shown.exit_code == 0 and f"{TEAM}=ml" in shown.output
    forgotten = runner.invoke(app, ["labels", "forget", name, *where])
    assert forgotten.exit_code == 0
    assert record_name(provider_id) not in records(core_v1, records_namespace)
    assert runner.invoke(app, ["labels", "show", "no-such-node", *where]).exit_code == 1
    delete_node(core_v1, name)


def test_dry_run_persisted_labels_report_the_restore_and_neither_restore_nor_record(
    persisting: Start,
    core_v1: k8s_client.CoreV1Api,
    records_namespace: str,
    unique_name: str,
    rules_configmap: Callable[..., str],
) -> None:
    process = persisting()
    provider_id = azure_provider_id(unique_name[:30], 5)
    old, new = f"{unique_name}-vmss000005"[:63], f"{unique_name}-vmss000005b"[:63]
    labelled_node(core_v1, records_namespace, old, provider_id)
    old_uid = node_uid(core_v1, old)
    rules_configmap(RULES + "persistentLabels: {prefixes: [persist.example.com/], dryRun: true}\n")
    wait_until(lambda: process.metric("nodegate_rules_generation") == 2, TIMEOUT, "dry-run rules")
    delete_node(core_v1, old)

    create_node(core_v1, SimNode(name=new, provider_id=provider_id))
    (event,) = wait_for_event(core_v1, new, "DryRunLabelWouldRestore")
    assert event.message.startswith(
        f"dry run: rule persistentLabels would restore label {TEAM}=ml ("
    )
    settled(process, core_v1, new)
    assert TEAM not in read_node(core_v1, new)["metadata"]["labels"]
    record = record_of(core_v1, records_namespace, provider_id)
    assert (record["nodeUID"], record.get("nodeGoneAt")) == (old_uid, None)


def test_a_survivor_of_two_claimants_gets_its_labels_as_soon_as_its_rival_is_deleted(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    """Issue 45's second case: an OKE node re-registered under a new name while its old Node
    object lingered. While both claim the providerID neither gets the record's labels; once the
    admin deletes the stale one, the survivor is planned again at once, not at the next resync
    (5 minutes by default)."""
    persisting()
    provider_id = azure_provider_id(unique_name[:30], 7)
    stale, survivor = f"{unique_name}-old"[:63], f"{unique_name}-new"[:63]
    labelled_node(core_v1, records_namespace, stale, provider_id)
    create_node(core_v1, SimNode(name=survivor, provider_id=provider_id))
    wait_for_event(core_v1, survivor, "LabelRecordWithheld")
    assert TEAM not in read_node(core_v1, survivor)["metadata"]["labels"]

    delete_node(core_v1, stale)
    deleted = time.monotonic()
    wait_for_team_label(core_v1, survivor, "the survivor's labels")
    print(f"survivor labelled {time.monotonic() - deleted:.2f}s after its rival's deletion")
    delete_node(core_v1, survivor)


def test_a_label_change_waiting_for_its_record_write_is_written_at_a_clean_stop(
    persisting: Start, core_v1: k8s_client.CoreV1Api, records_namespace: str, unique_name: str
) -> None:
    """Record writes that only follow a node's labels are coalesced (2 s): a SIGTERM inside the
    interval writes the last labels before the process goes, since the node may be deleted
    before any replica runs again."""
    process = persisting()
    name, provider_id = f"{unique_name}-n", f"oci://{unique_name}"
    labelled_node(core_v1, records_namespace, name, provider_id)
    after_a_reconcile(process, lambda: patch_labels(core_v1, name, {TEAM: "latest"}))

    assert process.stop() == 0

    assert record_of(core_v1, records_namespace, provider_id)["labels"].get(TEAM) == "latest"
    delete_node(core_v1, name)  # the cluster is shared: other tests count its nodes
