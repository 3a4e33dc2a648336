"""The reconciler against a real kube-apiserver: label/condition taints, ownership, safe writes,
hot reload of rules, events, metrics and dry run. Each test runs `nodegate reconcile` as a process.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import heartbeat, set_node_condition, wait_until
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    RULES,
    TIMEOUT,
    node_events,
    patch_labels,
    read_node,
    taints_of,
    wait_for_event,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler


def test_label_taint_is_added_when_the_label_appears(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node()
    patch_labels(core_v1, name, {"example.com/dedicated": "ci"})
    taints = wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    assert taints[("example.com/dedicated", "NoSchedule")]["value"] == "ci"


def test_label_taint_goes_when_the_label_goes(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    patch_labels(core_v1, name, {"example.com/dedicated": None})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t)


def test_condition_taint_follows_the_condition_with_time_added(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node()
    set_node_condition(
        core_v1, name, condition_type="NetworkInterfaceCard", status="Kaput", reason="LinkDown"
    )
    taints = wait_for_taints(core_v1, name, lambda t: ("example.com/nic-broken", "NoExecute") in t)
    assert taints[("example.com/nic-broken", "NoExecute")].get("timeAdded")
    set_node_condition(
        core_v1, name, condition_type="NetworkInterfaceCard", status="Fine", reason="LinkUp"
    )
    wait_for_taints(core_v1, name, lambda t: ("example.com/nic-broken", "NoExecute") not in t)


def test_foreign_taints_survive_every_change(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    foreign = [
        {
            "key": "node.cloudprovider.kubernetes.io/uninitialized",
            "value": "true",
            "effect": "NoSchedule",
        },
        {"key": "team.example.com/hold", "effect": "NoSchedule"},
        {"key": "example.com/dedicated", "value": "ci", "effect": "NoExecute"},  # other effect
    ]
    name = make_node(labels={"example.com/dedicated": "ci"}, taints=foreign)
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    patch_labels(core_v1, name, {"example.com/dedicated": None})
    taints = wait_for_taints(
        core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t
    )
    assert {(f["key"], f["effect"]) for f in foreign} <= taints.keys()


def test_pool_reconciler_labels_are_applied_and_drive_label_rules(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    registered = {"nodegate.dev/pool": "ci", "node-restriction.kubernetes.io/nodegate-pool": "ci"}
    name = make_node(labels=registered)
    wait_until(
        lambda: "node-role.kubernetes.io/ci" in read_node(core_v1, name)["metadata"]["labels"],
        TIMEOUT,
        "reconciler label",
    )


def test_every_change_is_an_event_on_the_node_naming_the_rule(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node(labels={"example.com/dedicated": "ci"})
    events = wait_until(
        lambda: [e for e in node_events(core_v1, name) if e.reason == "NodegateUpdated"],
        TIMEOUT,
        "NodegateUpdated event",
    )
    assert "added taint example.com/dedicated=ci:NoSchedule (rule ci-dedicated" in events[0].message
    assert (
        reconciler.metric("nodegate_node_changes_total", rule="ci-dedicated", change="add_taint")
        >= 1
    )


def test_the_process_freezes_its_code_out_of_the_collector_at_start(
    reconciler: ReconcilerProcess,
) -> None:
    started = next(
        json.loads(line)
        for line in reconciler.logs().splitlines()
        if '"reconciler starting"' in line
    )
    # The official client's models alone are tens of thousands of objects (kit/heap.py).
    assert started["frozen_objects"] > 20_000


def test_the_process_exports_its_memory_and_collector_runs(
    reconciler: ReconcilerProcess,
) -> None:
    assert reconciler.metric("process_resident_memory_bytes") > 0
    assert 'python_gc_collections_total{generation="2"}' in reconciler.get("/metrics")[1]


def test_the_full_collection_at_start_is_timed(reconciler: ReconcilerProcess) -> None:
    # The one before the freeze, at least: pauses are observed from before it.
    assert reconciler.metric("nodegate_gc_pause_seconds_count", generation="2") >= 1


def quiet_count(reconciler: ReconcilerProcess, outcome: str, seconds: float) -> float:
    """The count of watch events with `outcome` once it has not moved for `seconds`."""
    last = reconciler.metric("nodegate_node_watch_events_total", outcome=outcome)
    still_since = time.monotonic()
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() - still_since < seconds:
        assert time.monotonic() < deadline, f"{outcome} events never settled"
        time.sleep(0.1)
        now = reconciler.metric("nodegate_node_watch_events_total", outcome=outcome)
        if now != last:
            last, still_since = now, time.monotonic()
    return last


def test_node_already_matching_costs_zero_writes_even_on_heartbeats(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node(
        labels={"example.com/dedicated": "ci"},
        taints=[{"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"}],
        annotations={"nodegate.dev/owned-taints": "example.com/dedicated:NoSchedule"},
    )
    wait_until(lambda: reconciler.metric("nodegate_queue_depth") == 0, TIMEOUT, "queue drained")
    # The node's creation is two writes (the object, then its status): both seen, and nothing
    # else in flight, before counting starts.
    queued = quiet_count(reconciler, "queued", 1.0)
    unchanged = reconciler.metric("nodegate_node_watch_events_total", outcome="unchanged")
    for _ in range(3):  # real heartbeats: only lastHeartbeatTime moves (second precision)
        time.sleep(1.1)
        heartbeat(core_v1, name)
    wait_until(
        lambda: (
            reconciler.metric("nodegate_node_watch_events_total", outcome="unchanged")
            >= unchanged + 3
        ),
        TIMEOUT,
        "heartbeats seen",
    )
    # The relevant-view filter dropped them before the queue: not one was planned.
    assert reconciler.metric("nodegate_node_watch_events_total", outcome="queued") == queued
    # A change elsewhere proves the reconciler is processing events in the meantime.
    witness = make_node("witness", labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, witness, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    writers = {m["manager"] for m in read_node(core_v1, name)["metadata"]["managedFields"]}
    assert "nodegate" not in writers  # the API server records every writer of the object
    assert "nodegate" in {
        m["manager"] for m in read_node(core_v1, witness)["metadata"]["managedFields"]
    }
    assert not [e for e in node_events(core_v1, name) if e.reason == "NodegateUpdated"]


def test_deleted_rule_still_gets_its_taints_cleaned_up(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[..., str],
) -> None:
    name = make_node(
        labels={"example.com/dedicated": "ci"},
        taints=[{"key": "other.io/x", "effect": "NoSchedule"}],
    )
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    without_label_rule = HEADER + "conditionTaints:" + RULES.split("conditionTaints:", 1)[1]
    rules_configmap(without_label_rule)
    taints = wait_for_taints(
        core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t
    )
    assert ("other.io/x", "NoSchedule") in taints
    annotations = read_node(core_v1, name)["metadata"].get("annotations") or {}
    assert "nodegate.dev/owned-taints" not in annotations


def test_a_truncated_rules_configmap_is_held_until_confirmed(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[..., str],
) -> None:
    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    cm_name = rules_configmap(HEADER).split("/")[1]  # every rule gone: valid, and empty

    held = wait_for_event(core_v1, cm_name, "RulesHeld")
    assert rules_digest(HEADER) in (held[0].message or "")
    assert reconciler.metric("nodegate_rules_held") == 1
    time.sleep(1)
    assert ("example.com/dedicated", "NoSchedule") in taints_of(core_v1, name)

    rules_configmap(HEADER, annotations={"nodegate.dev/confirm-rules": rules_digest(HEADER)})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t)
    assert reconciler.metric("nodegate_rules_held") == 0


def test_invalid_rules_update_is_refused_and_the_last_good_rules_stay_in_force(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[[str], str],
) -> None:
    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)

    ref = rules_configmap(RULES.replace("effect: NoSchedule", "effect: NoSchedul"))
    cm_name = ref.split("/")[1]
    wait_until(lambda: reconciler.metric("nodegate_rules_rejected_total") >= 1, TIMEOUT, "refusal")
    assert reconciler.metric("nodegate_rules_last_update_valid") == 0
    refusals = wait_for_event(core_v1, cm_name, "RulesRejected")
    assert refusals[0].type == "Warning"
    message = refusals[0].message or ""
    assert "labelTaints[0].taint.effect: 'NoSchedul' is not a taint effect" in message
    assert "keeping rules generation 1" in message

    # The last good rules still act: a new label change is still reconciled by them.
    patch_labels(core_v1, name, {"example.com/dedicated": None})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t)

    # A valid update then takes over without a restart.
    rules_configmap(
        RULES.replace("value: ci, effect: NoSchedule", "value: ci, effect: PreferNoSchedule")
    )
    patch_labels(core_v1, name, {"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "PreferNoSchedule") in t)
    assert reconciler.metric("nodegate_rules_generation") == 2
    assert reconciler.process.poll() is None


def test_rules_change_applies_to_existing_nodes_without_restart(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[[str], str],
) -> None:
    name = make_node(labels={"example.com/gpu": "a100"})
    gpu_rules = RULES.replace(
        "labelTaints:\n",
        "labelTaints:\n  - name: gpu\n    match: {labels: {example.com/gpu: a100}}\n"
        "    taint: {key: nvidia.com/gpu, effect: NoSchedule}\n    nodeMayLift: true\n",
    )
    rules_configmap(gpu_rules)
    wait_for_taints(core_v1, name, lambda t: ("nvidia.com/gpu", "NoSchedule") in t)


def _race_foreign_taints(
    core_v1: k8s_client.CoreV1Api, name: str, count: int, errors: list[str]
) -> None:
    """A well-behaved second writer: read, add its taint, write with the resourceVersion read."""
    for i in range(count):
        while True:
            node = read_node(core_v1, name)
            taints = [
                *node["spec"].get("taints", []),
                {"key": f"racer.example.com/t{i}", "effect": "NoSchedule"},
            ]
            body = {
                "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                "spec": {"taints": taints},
            }
            try:
                core_v1.patch_node(name, body, _content_type="application/merge-patch+json")
                break
            except ApiException as err:
                if err.status != 409:
                    errors.append(str(err))
                    return


def test_concurrent_writer_never_loses_a_taint(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    name = make_node()
    errors: list[str] = []
    racer = threading.Thread(target=_race_foreign_taints, args=(core_v1, name, 30, errors))
    racer.start()
    for i in range(30):  # flip the rule's label while the racer writes
        patch_labels(core_v1, name, {"example.com/dedicated": "ci" if i % 2 == 0 else None})
    racer.join(timeout=60)
    assert not errors
    patch_labels(core_v1, name, {"example.com/dedicated": "ci"})
    taints = wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    assert {f"racer.example.com/t{i}" for i in range(30)} <= {k for k, _ in taints}
    conflicts = reconciler.metric("nodegate_write_conflicts_total")
    print(f"write conflicts seen by the reconciler: {conflicts}")


def test_dry_run_writes_nothing_but_says_what_it_would_do(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[[str], str],
    tmp_path: Path,
) -> None:
    ref = rules_configmap(RULES)
    name = make_node(labels={"example.com/dedicated": "ci"})
    with running_reconciler(
        control_plane.kubeconfig_path,
        tmp_path,
        "--rules-configmap",
        ref,
        "--no-leader-elect",
        "--dry-run",
    ) as process:
        events = wait_until(
            lambda: [e for e in node_events(core_v1, name) if e.reason == "NodegateDryRun"],
            TIMEOUT,
            "dry-run event",
        )
        assert "would have added taint example.com/dedicated=ci:NoSchedule" in events[0].message
        assert process.metric("nodegate_node_writes_total", result="ok") == 0
    assert ("example.com/dedicated", "NoSchedule") not in taints_of(core_v1, name)


def test_rules_file_source_reloads_and_keeps_last_good_rules_on_a_bad_edit(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
) -> None:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES)
    name = make_node(labels={"example.com/dedicated": "ci"})
    args = ("--rules-file", str(rules_file), "--no-leader-elect", "--max-untaint-share", "1")
    with running_reconciler(control_plane.kubeconfig_path, tmp_path, *args) as process:
        wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
        rules_file.write_text(RULES + "bogus: true\n")
        wait_until(lambda: process.metric("nodegate_rules_rejected_total") >= 1, TIMEOUT, "refusal")
        assert "unknown field 'bogus'" in process.logs()
        rules_file.write_text(HEADER + "conditionTaints:" + RULES.split("conditionTaints:", 1)[1])
        wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t)
        assert process.metric("nodegate_rules_generation") == 2


def test_condition_taint_waits_for_the_hold_before_acting(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[[str], str],
) -> None:
    rules_configmap(
        RULES.replace(
            "    taint: {key: example.com/nic-broken",
            "    for: 3s\n    taint: {key: example.com/nic-broken",
        )
    )
    wait_until(lambda: reconciler.metric("nodegate_rules_generation") == 2, TIMEOUT, "new rules")
    name = make_node()
    written = set_node_condition(
        core_v1, name, condition_type="NetworkInterfaceCard", status="Ruined", reason="LinkDown"
    )
    # The hold counts from the condition's lastTransitionTime, as written (whole seconds): pinned
    # to it, not to when this process got the PATCH's answer back (late, on a loaded machine).
    conditions = (written.status.conditions if written.status else None) or []
    since = next(c.last_transition_time for c in conditions if c.type == "NetworkInterfaceCard")
    assert since is not None
    time.sleep(max(0.0, since.timestamp() + 1.5 - time.time()))  # half-way through the hold
    assert ("example.com/nic-broken", "NoExecute") not in taints_of(core_v1, name)
    taints = wait_for_taints(core_v1, name, lambda t: ("example.com/nic-broken", "NoExecute") in t)
    # The reconciler dates the NoExecute taint it writes (timeAdded): not before the 3s hold.
    added = datetime.fromisoformat(taints[("example.com/nic-broken", "NoExecute")]["timeAdded"])
    assert added >= since + timedelta(seconds=3), (added, since)


def test_a_forged_ownership_annotation_cannot_make_nodegate_strip_foreign_taints(
    reconciler: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    """A kubelet may write its own Node's annotations; claiming the lifecycle controller's
    taint, Karpenter's or another operator's as nodegate's must not get them removed."""
    foreign = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        {"key": "other.io/team", "value": "a", "effect": "NoSchedule"},
    ]
    claim = ",".join(f"{t['key']}:{t['effect']}" for t in foreign)
    name = make_node(
        labels={"example.com/dedicated": "ci"},
        taints=foreign,
        annotations={"nodegate.dev/owned-taints": claim},
    )
    wait_for_taints(core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    # The node forges the claim again, then a label change makes nodegate write once more.
    core_v1.patch_node(
        name,
        {"metadata": {"annotations": {"nodegate.dev/owned-taints": claim}}},
        _content_type="application/merge-patch+json",
    )
    patch_labels(core_v1, name, {"example.com/dedicated": None})
    taints = wait_for_taints(
        core_v1, name, lambda t: ("example.com/dedicated", "NoSchedule") not in t
    )
    assert {(t["key"], t["effect"]) for t in foreign} <= set(taints)
