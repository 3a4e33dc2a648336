"""A compromised node, acting with its own kubelet credentials, cannot steer nodegate past
NodeRestriction (docs/reconciler.md, "Security"); the legitimate flows still work.

Every hostile write here is made as `system:node:<name>` (the `as_node` fixture) against the
real kube-apiserver with Node authorization and NodeRestriction on, as on OKE and AKS.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes import client as k8s_client

from nodegate.core.decisions.persisted_labels import (
    QUARANTINE_LABEL,
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    LabelRecord,
    encode_record,
    record_name,
)
from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL
from nodegate.localcluster.nodes import SimNode, oci_provider_id, wait_until
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    Start,
    after_a_reconcile,
    configmaps,
    read_node,
    record_of,
    taints_of,
    wait_for_event,
    wait_for_record,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess

TENANT = "node-restriction.kubernetes.io/tenant"
ROLE = "node-role.kubernetes.io/payments"
PERSISTED = "persist.example.com/tenant"
RULES = HEADER + (
    "labelTaints:\n"
    "  - name: tenant-payments\n"
    f"    match: {{labels: {{{TENANT}: payments}}}}\n"
    "    taint: {key: example.com/tenant, value: payments, effect: NoSchedule}\n"
    "  - name: ci-dedicated\n"
    "    match: {labels: {example.com/dedicated: ci}}\n"
    "    taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}\n"
    "    nodeMayLift: true\n"
    "nodePools:\n"
    "  - name: payments\n"
    "    provider: oke\n"
    "    size: 1\n"
    f'    reconcilerLabels: {{{TENANT}: payments, {ROLE}: ""}}\n'
    "persistentLabels: {prefixes: [persist.example.com/]}\n"
)
TENANT_TAINT = ("example.com/tenant", "NoSchedule")


@pytest.fixture
def guarded(records_namespace: str, start_reconciler_with: Start) -> ReconcilerProcess:
    return start_reconciler_with(
        RULES, "--state-namespace", records_namespace, "--resync-seconds", "1"
    )


def labels_of(core_v1: k8s_client.CoreV1Api, name: str) -> dict[str, str]:
    return dict(read_node(core_v1, name)["metadata"].get("labels") or {})


def test_a_node_claiming_a_pool_gains_none_of_the_labels_a_kubelet_may_not_set(
    guarded: ReconcilerProcess,
    make_node: Callable[..., str],
    as_node: AsNode,
    core_v1: k8s_client.CoreV1Api,
) -> None:
    name = make_node("claims")
    after_a_reconcile(
        guarded,
        lambda: as_node(name).patch_node(name, {"metadata": {"labels": {POOL_LABEL: "payments"}}}),
    )
    after_a_reconcile(guarded, lambda: None)  # a resync too: nothing comes later either
    labels = labels_of(core_v1, name)
    assert labels[POOL_LABEL] == "payments"
    assert TENANT not in labels and ROLE not in labels
    assert TENANT_TAINT not in taints_of(core_v1, name)


def test_a_node_registered_in_a_pool_gets_its_reconciler_labels_and_their_taint(
    guarded: ReconcilerProcess, make_node: Callable[..., str], core_v1: k8s_client.CoreV1Api
) -> None:
    registered = {POOL_LABEL: "payments", TRUSTED_POOL_LABEL: "payments"}
    name = make_node("registered", labels=registered)
    wait_for_taints(core_v1, name, lambda taints: TENANT_TAINT in taints)
    labels = labels_of(core_v1, name)
    assert labels[TENANT] == "payments" and labels[ROLE] == ""


def test_a_node_cannot_lift_a_taint_whose_label_only_an_admin_may_remove(
    guarded: ReconcilerProcess,
    make_node: Callable[..., str],
    as_node: AsNode,
    core_v1: k8s_client.CoreV1Api,
) -> None:
    name = make_node("tenant", labels={TENANT: "payments"})
    wait_for_taints(core_v1, name, lambda taints: TENANT_TAINT in taints)
    with pytest.raises(k8s_client.ApiException) as refused:
        as_node(name).patch_node(name, {"metadata": {"labels": {TENANT: None}}})
    assert refused.value.status == 403
    core_v1.patch_node(name, {"metadata": {"labels": {TENANT: None}}})  # the admin may
    wait_for_taints(core_v1, name, lambda taints: TENANT_TAINT not in taints)


def test_two_live_nodes_with_one_provider_id_exchange_nothing_and_the_record_stays_put(
    guarded: ReconcilerProcess,
    make_node: Callable[..., str],
    as_node: AsNode,
    core_v1: k8s_client.CoreV1Api,
    records_namespace: str,
    unique_name: str,
) -> None:
    shared = oci_provider_id(f"{unique_name}-shared")
    victim = make_node("victim", provider_id=shared, labels={PERSISTED: "payments"})
    kept = wait_for_record(core_v1, records_namespace, shared, lambda r: bool(r["labels"]))

    intruder = f"{unique_name}-intruder"[:63]
    body = SimNode(name=intruder, provider_id=shared, labels={"persist.example.com/evil": "yes"})
    as_node(intruder).create_node(cast(Any, body.body()))
    try:
        wait_for_event(core_v1, intruder, "LabelRecordWithheld")
        wait_for_event(core_v1, victim, "LabelRecordWithheld")
        version = configmap_version(core_v1, records_namespace, shared)
        for _ in range(3):  # three resyncs of both nodes (--resync-seconds 1)
            after_a_reconcile(guarded, lambda: time.sleep(1))
        assert configmap_version(core_v1, records_namespace, shared) == version
        assert record_of(core_v1, records_namespace, shared)["nodeUID"] == kept["nodeUID"]
        assert PERSISTED not in labels_of(core_v1, intruder)
        assert "persist.example.com/evil" not in labels_of(core_v1, victim)
        assert guarded.metric("nodegate_label_keys_contested") == 1
    finally:
        core_v1.delete_node(intruder)


def configmap_version(core_v1: k8s_client.CoreV1Api, namespace: str, key: str) -> str:
    read: Any = core_v1.read_namespaced_config_map(
        record_name(key), namespace, _preload_content=False
    )
    return str(json.loads(read.data)["metadata"]["resourceVersion"])


def test_a_record_holding_a_value_the_api_refuses_is_quarantined_and_blocks_nothing(
    guarded: ReconcilerProcess,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    records_namespace: str,
    unique_name: str,
) -> None:
    provider_id = oci_provider_id(f"{unique_name}-reborn")
    now = datetime.now(UTC)
    stored = LabelRecord(
        provider_id,
        "uid-of-the-old-node",
        {"persist.example.com/team": "ml team"},  # a space: the API server refuses the value
        now,
        ("old",),
        now,
    )
    core_v1.create_namespaced_config_map(
        records_namespace,
        k8s_client.V1ConfigMap(
            metadata={
                "name": record_name(provider_id),
                "labels": {RECORD_LABEL: RECORD_LABEL_VALUE},
            },
            data=encode_record(stored),
        ),
    )
    name = make_node("reborn", provider_id=provider_id, labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda taints: ("example.com/dedicated", "NoSchedule") in taints)
    wait_for_event(core_v1, name, "LabelRecordQuarantined")
    wait_until(
        lambda: configmaps(core_v1, records_namespace, QUARANTINE_LABEL),
        TIMEOUT,
        "the quarantined copy",
    )
    assert "persist.example.com/team" not in labels_of(core_v1, name)


def test_a_kubelet_with_another_machines_provider_id_neither_gets_nor_erases_its_record(
    guarded: ReconcilerProcess,
    make_node: Callable[..., str],
    as_node: AsNode,
    core_v1: k8s_client.CoreV1Api,
    records_namespace: str,
    unique_name: str,
) -> None:
    """Issue 45's first case: the machine's Node is deleted (a repair); meanwhile
    `system:node:evil-1` registers with the machine's providerID and its own system UUID. It
    gets nothing, the record stays the machine's, and the machine, back, gets its labels."""
    shared = oci_provider_id(f"{unique_name}-machine")
    machine = make_node("machine", provider_id=shared, labels={PERSISTED: "payments"})
    kept = wait_for_record(core_v1, records_namespace, shared, lambda r: bool(r["labels"]))
    core_v1.delete_node(machine)
    wait_for_record(core_v1, records_namespace, shared, lambda r: r.get("nodeGoneAt") is not None)

    intruder = f"{unique_name}-evil-1"[:63]
    body = SimNode(name=intruder, provider_id=shared, system_uuid="uuid-of-evil-1")
    as_node(intruder).create_node(cast(Any, body.body()))
    try:
        [event] = wait_for_event(core_v1, intruder, "LabelRecordWithheld")
        assert "another machine" in (event.message or "")
        after_a_reconcile(guarded, lambda: time.sleep(1))
        stored = record_of(core_v1, records_namespace, shared)
        assert stored["labels"] == kept["labels"]
        assert stored["systemUUID"] == kept["systemUUID"]
        assert PERSISTED not in labels_of(core_v1, intruder)
    finally:
        core_v1.delete_node(intruder)

    back = make_node("machine-back", provider_id=shared)  # the same machine, a new Node object
    wait_until(
        lambda: labels_of(core_v1, back).get(PERSISTED) == "payments",
        TIMEOUT,
        "the machine's labels back",
    )
