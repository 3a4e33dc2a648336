"""The controller's error paths, guard and fence, against a fake of the client boundary."""

from __future__ import annotations

import textwrap
import threading
import time

import pytest

from nodegate.core.blast_radius import rules_digest
from nodegate.core.loader import parse_rules
from nodegate.core.plan import OWNED_TAINTS_ANNOTATION
from nodegate.reconciler.nodes.controller import Controller
from nodegate.reconciler.kit.events import EventRecorder
from nodegate.reconciler.kit.kube import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.leader import LeaderFence
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.rules_source import RulesUpdate
from nodegate.reconciler.settings import ReconcilerSettings
from nodegate.reconciler.nodes.taint_history import HISTORY_CONFIGMAP, TaintHistory
from tests.unit.reconciler.fakes import FakeApi, fake_node

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
CI_RULES = HEADER + textwrap.dedent(
    """\
    labelTaints:
      - name: ci
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
      - name: gpu
        match: {labels: {example.com/gpu: "true"}}
        taint: {key: example.com/gpu, value: "true", effect: NoSchedule}
    """
)
GPU_ONLY = HEADER + textwrap.dedent(
    """\
    labelTaints:
      - name: gpu
        match: {labels: {example.com/gpu: "true"}}
        taint: {key: example.com/gpu, value: "true", effect: NoSchedule}
    """
)
EMPTY = HEADER
CI_TAINT = {"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"}
REF = ("nodegate-system", "rules", "uid-rules")


def update(text: str, confirmation: str | None = None) -> RulesUpdate:
    return RulesUpdate(parse_rules(text), rules_digest(text), "test", REF, confirmation)


def ci_node(name: str, tainted: bool = False) -> dict[str, object]:
    """A CI node; `tainted`: as the reconciler leaves it (taint and ownership recorded)."""
    spec = {"taints": [dict(CI_TAINT)]} if tainted else {}
    node = fake_node(name, {"example.com/dedicated": "ci"}, **spec)
    if tainted:
        node["metadata"]["annotations"] = {
            OWNED_TAINTS_ANNOTATION: "example.com/dedicated:NoSchedule"
        }
    return node


def synced(api: FakeApi, fence: LeaderFence | None = None, **settings: object) -> Controller:
    """A controller whose node cache has been listed once (its informer is stopped again)."""
    controller = Controller(
        ReconcilerSettings(
            rules_configmap="nodegate-system/rules", state_namespace="nodegate-system", **settings
        ),
        api,
        EventRecorder(api, "default", "test"),
        Metrics(),
        TaintHistory(api, "nodegate-system"),
        fence,
    )
    stop = threading.Event()
    thread = threading.Thread(target=controller.informer.run, args=(stop,), daemon=True)
    thread.start()
    assert controller.informer.synced.wait(5)
    stop.set()
    thread.join(5)
    return controller


def events(api: FakeApi, reason: str) -> list[dict[str, object]]:
    return [e for e in api.events.values() if e["reason"] == reason]


def metric(controller: Controller, name: str, **labels: str) -> float:
    value = controller._metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_a_conflict_whose_re_read_fails_is_requeued_with_backoff() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", ConflictError("409"))
    api.fail("get_node", TemporaryError("connection refused"))
    controller.reconcile("n1")
    due = controller.queue.due_in("n1")
    assert due is not None and 0.5 < due <= 2.0


def test_throttling_is_retried_no_sooner_than_retry_after() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", TemporaryError("429 Too Many Requests", retry_after=7))
    controller.reconcile("n1")
    due = controller.queue.due_in("n1")
    assert due is not None and due > 6.5
    assert metric(controller, "nodegate_errors_total", kind="temporary") == 1


def test_a_permanent_refusal_is_reported_once_and_not_retried_hot() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api, resync_seconds=300)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", PermanentError("403 Forbidden", 403))
    controller.reconcile("n1")
    [refused] = events(api, "NodegateWriteRefused")
    assert refused["type"] == "Warning"
    due = controller.queue.due_in("n1")
    assert due is not None and due > 290
    assert metric(controller, "nodegate_errors_total", kind="permanent") == 1


def test_nothing_is_written_while_the_lease_is_not_proven() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    fence = LeaderFence(renew_deadline_seconds=10)  # never renewed
    controller = synced(api, fence)
    controller.offer_rules(update(CI_RULES))
    controller.reconcile("n1")
    assert api.count("patch_node") == 0
    fence.renewed(time.monotonic())
    controller.reconcile("n1")
    assert api.count("patch_node") == 1


@pytest.mark.parametrize("text", [GPU_ONLY, EMPTY], ids=["rule-deleted", "empty-rules"])
def test_an_update_that_would_untaint_most_nodes_is_held_until_confirmed(text: str) -> None:
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    assert controller.applied is not None and controller.applied.generation == 1

    controller.offer_rules(update(text))
    assert controller.applied.update.digest == rules_digest(CI_RULES)
    [held] = events(api, "RulesHeld")
    assert "4 of 4 nodes" in str(held["message"]) or "no rules at all" in str(held["message"])
    assert rules_digest(text) in str(held["message"])
    assert metric(controller, "nodegate_rules_held") == 1

    controller.offer_rules(update(text, confirmation=rules_digest(text)))
    assert controller.applied.update.digest == rules_digest(text)
    assert metric(controller, "nodegate_rules_held") == 0


def test_an_update_touching_few_nodes_applies_at_once() -> None:
    api = FakeApi()
    api.add_node(ci_node("n0", tainted=True))
    for i in range(1, 4):
        api.add_node(fake_node(f"n{i}"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    controller.offer_rules(update(GPU_ONLY))
    assert controller.applied is not None and controller.applied.generation == 2


def test_a_confirmation_of_another_text_does_not_apply_a_held_update() -> None:
    api = FakeApi()
    for i in range(2):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    controller.offer_rules(update(EMPTY, confirmation=rules_digest(GPU_ONLY)))
    assert controller.applied is not None and controller.applied.generation == 1


def test_applied_rules_are_recorded_in_the_taint_history_before_they_act() -> None:
    api = FakeApi()
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    stored = api.configmaps[("nodegate-system", HISTORY_CONFIGMAP)]["data"]["taints.json"]
    assert "example.com/dedicated" in stored and "example.com/gpu" in stored


def test_dry_run_records_the_same_would_be_change_once() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api, dry_run=True)
    controller.offer_rules(update(CI_RULES))
    for _ in range(3):
        controller.reconcile("n1")
    assert len(events(api, "NodegateDryRun")) == 1
    assert api.count("patch_event") == 0
    assert api.count("patch_node") == 0


PERSIST_RULES = CI_RULES + "persistentLabels: {prefixes: [persist.example.com/]}\n"
TEAM = {"persist.example.com/team": "ml"}


def persisted_node(name: str, uid: str, provider_id: str, **labels: str) -> dict[str, object]:
    node = fake_node(name, dict(labels), providerID=provider_id)
    node["metadata"]["uid"] = uid
    return node


def labelled(api: FakeApi) -> Controller:
    controller = synced(api)
    stop = threading.Event()
    thread = threading.Thread(target=controller.labels.informer.run, args=(stop,), daemon=True)
    thread.start()
    assert controller.labels.informer.synced.wait(5)
    stop.set()
    thread.join(5)
    controller.offer_rules(update(PERSIST_RULES))
    return controller


def test_a_node_re_created_under_a_new_name_gets_its_persisted_labels_back() -> None:
    api = FakeApi()
    api.add_node(persisted_node("old", "uid-1", "oci://instance-1", **TEAM))
    controller = labelled(api)
    controller.reconcile("old")  # the record is written from the node
    del api.nodes["old"]
    api.add_node(persisted_node("new", "uid-2", "oci://instance-1"))
    controller.informer.put(api.nodes["new"])
    controller.reconcile("new")
    assert api.nodes["new"]["metadata"]["labels"] == TEAM
    [restored] = events(api, "NodegateLabelsRestored")
    assert "persist.example.com/team=ml" in str(restored["message"])


def test_an_unreadable_record_is_quarantined_and_the_node_keeps_its_labels() -> None:
    from nodegate.core.persisted_labels import RECORD_LABEL, record_name

    api = FakeApi()
    api.add_node(
        persisted_node("n1", "uid-1", "oci://instance-1", **{"persist.example.com/a": "1"})
    )
    name = record_name("oci://instance-1")
    api.configmaps[("nodegate-system", name)] = {
        "metadata": {
            "name": name,
            "namespace": "nodegate-system",
            "resourceVersion": "5",
            "labels": {RECORD_LABEL: "persisted-labels"},
        },
        "data": {"record.json": "{hand-edited"},
    }
    controller = labelled(api)
    controller.reconcile("n1")
    copies = [n for (_, n) in api.configmaps if n.startswith(f"{name}-quarantined-")]
    assert len(copies) == 1
    assert api.configmaps[("nodegate-system", copies[0])]["data"]["record.json"] == "{hand-edited"
    assert api.nodes["n1"]["metadata"]["labels"] == {"persist.example.com/a": "1"}
    assert events(api, "LabelRecordQuarantined")
    fresh = api.configmaps[("nodegate-system", name)]["data"]["record.json"]
    assert "persist.example.com/a" in fresh
