"""A dry run reads the installation and writes none of it (issue 56): pointed at the state
namespace, a preview plans against the real leader's records and leaves every one of them as it
found it, whichever path would write it. Its one write client is a `PreviewApi`
(reconciler/nodes/fence/preview_api.py), under the fence as `reconciler/main.py` builds it; each
path is also run live, so that the dry run's silence is not a path that never ran."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.decisions.persisted_labels import RECORD_LABEL, RECORD_LABEL_VALUE, record_name
from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP
from nodegate.core.objects.sightings_record import SIGHTINGS_CONFIGMAP
from nodegate.core.objects.status_record import STATUS_CONFIGMAP
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP
from nodegate.reconciler.kit.errors import PermanentError
from nodegate.reconciler.kit.events import EventRecorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.health import Health
from nodegate.reconciler.nodes.controller import Controller
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.fence.preview_api import PreviewApi, installation_api, preview_reads
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.settings import ReconcilerSettings
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.nodes.test_controller import (
    CI_RULES,
    GPU_ONLY,
    HEADER,
    PERSIST_RULES,
    STORM_RULES,
    TEAM,
    ci_node,
    persisted_node,
    sync,
    update,
)

NAMESPACE = "nodegate-system"
WRITES = ("create_configmap", "replace_configmap", "patch_configmap", "delete_configmap")


def controller(api: FakeApi, dry_run: bool, *, preview_client: bool = True) -> Controller:
    """A controller on the state namespace, its one write client wired as `nodegate reconcile`
    wires it (`installation_api` under the fence; `preview_client=False`: a wiring mistake),
    its node cache listed once."""
    client = installation_api(api, dry_run) if preview_client else api
    writes = FencedApi(client, LeaderFence(None), lambda _verdict: None)
    settings = ReconcilerSettings(
        rules_configmap=f"{NAMESPACE}/rules", state_namespace=NAMESPACE, dry_run=dry_run
    )
    made = Controller(
        settings,
        writes,
        EventRecorder(api, "default", "test"),
        Metrics(),
        TaintHistory(writes, NAMESPACE),
        Health(),
    )
    return sync(made)


def record_writes(api: FakeApi) -> list[tuple[str, str]]:
    """(call, ConfigMap) of every ConfigMap write that reached the API."""
    written = []
    for call, detail in api.calls:
        if call in WRITES:
            name = detail if isinstance(detail, str) else detail["metadata"]["name"]
            written.append((call, str(name)))
    return written


# --- each path that writes a record, as a step on a cluster, and the record it writes ---------


def rules_applied(api: FakeApi, dry_run: bool) -> None:
    api.add_node(ci_node("n1"))
    controller(api, dry_run).offer_rules(update(CI_RULES))


def update_held(api: FakeApi, dry_run: bool) -> None:
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    made = controller(api, dry_run)
    made.offer_rules(update(CI_RULES))
    api.calls.clear()  # what is asserted on: the hold's own write
    made.offer_rules(update(GPU_ONLY))


def evicting_taint_granted(api: FakeApi, dry_run: bool) -> None:
    for i in range(3):
        node = fake_node(f"n{i}")
        node["status"]["conditions"] = [{"type": "NetworkProblem", "status": "True"}]
        api.add_node(node)
    made = controller(api, dry_run)
    assert made.breaker.load()
    made.offer_rules(update(STORM_RULES, rules_digest(STORM_RULES)))
    made.process("n0")


NIC_FOR_30S = HEADER + (
    "conditionTaints:\n"
    "  - name: nic-broken\n"
    "    conditions: [{type: NetworkInterfaceCard, status: Kaput}]\n"
    "    for: 30s\n"
    "    taint: {key: example.com/nic, value: broken, effect: NoExecute}\n"
)


def for_hold_under_way(api: FakeApi, dry_run: bool) -> None:
    node = fake_node("n1")
    node["status"]["conditions"] = [{"type": "NetworkInterfaceCard", "status": "Kaput"}]
    api.add_node(node)
    made = controller(api, dry_run)
    made.offer_rules(update(NIC_FOR_30S))
    made.process("n1")
    made.sightings.save()  # what the run loop does every few seconds


def with_label_records(api: FakeApi, dry_run: bool, *, preview_client: bool = True) -> Controller:
    made = controller(api, dry_run, preview_client=preview_client)
    stop = threading.Event()
    thread = threading.Thread(target=made.labels.informer.run, args=(stop,), daemon=True)
    thread.start()
    assert made.labels.informer.synced.wait(5)
    stop.set()
    thread.join(5)
    made.offer_rules(update(PERSIST_RULES))
    api.calls.clear()  # what is asserted on: the records' own writes
    return made


def labels_persisted(api: FakeApi, dry_run: bool) -> None:
    api.add_node(persisted_node("n1", "uid-1", "oci://instance-1", **TEAM))
    with_label_records(api, dry_run).process("n1")


def unreadable_record(api: FakeApi) -> None:
    api.add_node(persisted_node("n1", "uid-1", "oci://instance-1", **TEAM))
    name = record_name("oci://instance-1")
    api.configmaps[(NAMESPACE, name)] = {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "resourceVersion": "5",
            "labels": {RECORD_LABEL: RECORD_LABEL_VALUE},
        },
        "data": {"record.json": "{hand-edited"},
    }


def unreadable_record_found(api: FakeApi, dry_run: bool) -> None:
    unreadable_record(api)
    with_label_records(api, dry_run).process("n1")


def node_deleted(api: FakeApi, dry_run: bool) -> None:
    api.add_node(persisted_node("n1", "uid-1", "oci://instance-1", **TEAM))
    made = with_label_records(api, dry_run)
    made.process("n1")  # a live run writes the record here; a dry run does not
    api.calls.clear()  # what is asserted on: the record marked gone
    cached = made.informer.get("n1")
    assert cached is not None
    del api.nodes["n1"]
    made.informer.discard("n1")
    made.intake.on_event("n1", cached, None)  # the watch's delete, as the informer hands it on
    made.process("n1")


Step = Callable[[FakeApi, bool], None]
PATHS: list[Any] = [
    pytest.param(rules_applied, STATUS_CONFIGMAP, id="status record: rules applied"),
    pytest.param(update_held, STATUS_CONFIGMAP, id="status record: update held"),
    pytest.param(rules_applied, HISTORY_CONFIGMAP, id="taint history"),
    pytest.param(evicting_taint_granted, LEDGER_CONFIGMAP, id="eviction ledger"),
    pytest.param(for_hold_under_way, SIGHTINGS_CONFIGMAP, id="sightings"),
    pytest.param(labels_persisted, "nodegate-labels-", id="label record"),
    pytest.param(unreadable_record_found, "nodegate-labels-", id="label record quarantined"),
    pytest.param(node_deleted, "nodegate-labels-", id="label record of a deleted node"),
]


@pytest.mark.parametrize(("step", "record"), PATHS)
def test_a_dry_run_writes_no_record_of_the_installation(step: Step, record: str) -> None:
    api = FakeApi()
    step(api, True)
    assert record_writes(api) == []


@pytest.mark.parametrize(("step", "record"), PATHS)
def test_the_same_step_live_writes_the_record(step: Step, record: str) -> None:
    """The control: each step above does reach its write path."""
    api = FakeApi()
    step(api, False)
    assert any(name.startswith(record) for _, name in record_writes(api))


def test_a_dry_run_s_label_records_are_left_alone_even_on_a_client_that_would_write() -> None:
    """Persisted labels keep their own dry-run guard (a rule's `dryRun` needs it in a live
    run too): an unreadable record is not quarantined, a record is not written."""
    api = FakeApi()
    unreadable_record(api)
    with_label_records(api, True, preview_client=False).process("n1")
    assert [w for w in record_writes(api) if w[1].startswith("nodegate-labels-")] == []


# --- the client itself --------------------------------------------------------------------------


def test_a_preview_reads_what_the_installation_holds() -> None:
    api = FakeApi()
    api.configmaps[(NAMESPACE, STATUS_CONFIGMAP)] = {
        "metadata": {"name": STATUS_CONFIGMAP, "resourceVersion": "3"},
        "data": {"status.json": "{}"},
    }
    preview = PreviewApi(api)
    assert (
        preview.read_configmap(NAMESPACE, STATUS_CONFIGMAP)
        == api.configmaps[(NAMESPACE, STATUS_CONFIGMAP)]
    )


def test_a_record_write_answers_as_if_stored_and_is_not_sent() -> None:
    api = FakeApi()
    body = {"metadata": {"name": LEDGER_CONFIGMAP}, "data": {"k": "v"}}
    answer = PreviewApi(api).create_configmap(NAMESPACE, body)
    assert answer["data"] == {"k": "v"} and answer["metadata"]["namespace"] == NAMESPACE
    assert api.configmaps == {} and record_writes(api) == []


def test_a_node_write_that_reaches_a_preview_is_refused_not_sent() -> None:
    api = FakeApi()
    api.add_node(fake_node("n1"))
    with pytest.raises(PermanentError, match="a dry run writes nothing"):
        PreviewApi(api).patch_node("n1", {"spec": {"taints": []}})
    assert api.count("patch_node") == 0


def test_a_live_run_writes_through_its_client_unchanged() -> None:
    api = FakeApi()
    assert installation_api(api, dry_run=False) is api


def test_at_start_a_preview_names_what_it_reads_and_that_it_takes_no_lease() -> None:
    settings = ReconcilerSettings(rules_configmap="ops/rules", state_namespace="ops", dry_run=True)
    said = preview_reads(settings)
    reads = str(said["reads"])
    for record in (STATUS_CONFIGMAP, LEDGER_CONFIGMAP, SIGHTINGS_CONFIGMAP, HISTORY_CONFIGMAP):
        assert f"ops/{record}" in reads
    assert f"{RECORD_LABEL}={RECORD_LABEL_VALUE}" in reads
    assert said["state_namespace"] == "ops"
    assert "not taken" in str(said["lease"])
