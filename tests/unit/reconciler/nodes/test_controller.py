"""The controller's error paths, guard and fence, against a fake of the client boundary."""

from __future__ import annotations

import logging
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP, decode_history
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import format_time
from nodegate.core.rules.node_marks import FENCE_ANNOTATION, OWNED_TAINTS_ANNOTATION
from nodegate.reconciler.kit.errors import (
    ConflictError,
    PermanentError,
    TemporaryError,
    ThrottledError,
)
from nodegate.reconciler.kit.events import EventRecorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.health import Health
from nodegate.reconciler.kit.worker import Outcome
from nodegate.reconciler.nodes.controller import Controller
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.records.label_records import COALESCE_SECONDS
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.settings import ReconcilerSettings
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.kit.queue_state import due_in, num_requeues

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
CI_RULES = HEADER + textwrap.dedent(
    """\
    labelTaints:
      - name: ci
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        nodeMayLift: true
      - name: gpu
        match: {labels: {example.com/gpu: "true"}}
        taint: {key: example.com/gpu, value: "true", effect: NoSchedule}
        nodeMayLift: true
    """
)
GPU_ONLY = HEADER + textwrap.dedent(
    """\
    labelTaints:
      - name: gpu
        match: {labels: {example.com/gpu: "true"}}
        taint: {key: example.com/gpu, value: "true", effect: NoSchedule}
        nodeMayLift: true
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


def fenced(api: FakeApi) -> FencedApi:
    """The one client `nodegate reconcile` hands every writer, over the fake (no election: its
    writes carry no term)."""
    return FencedApi(api, LeaderFence(None), lambda _verdict: None)


def new_controller(
    api: FakeApi | FencedApi, fence: LeaderFence | None = None, **settings: object
) -> Controller:
    """A controller as `nodegate reconcile` builds one, on the fake client boundary (through
    the fenced client: `api` if it is one)."""
    writes = api if isinstance(api, FencedApi) else fenced(api)
    return Controller(
        ReconcilerSettings(
            rules_configmap="nodegate-system/rules", state_namespace="nodegate-system", **settings
        ),
        writes,
        EventRecorder(api, "default", "test"),
        Metrics(),
        TaintHistory(writes, "nodegate-system"),
        Health(),
        fence,
    )


def sync(controller: Controller) -> Controller:
    """List the nodes once, as `run` does (the informer is stopped again)."""
    stop = threading.Event()
    thread = threading.Thread(target=controller.informer.run, args=(stop,), daemon=True)
    thread.start()
    assert controller.informer.synced.wait(5)
    stop.set()
    thread.join(5)
    return controller


def synced(
    api: FakeApi | FencedApi, fence: LeaderFence | None = None, **settings: object
) -> Controller:
    """A controller whose node cache has been listed once (its informer is stopped again)."""
    return sync(new_controller(api, fence, **settings))


def relist_until_cached(controller: Controller, name: str) -> None:
    """List the nodes once more, so a node added since reaches the controller as an event."""
    controller.informer.request_relist()
    stop = threading.Event()
    thread = threading.Thread(target=controller.informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while controller.informer.get(name) is None:
            assert time.monotonic() < deadline, f"{name} never listed"
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)


def events(api: FakeApi, reason: str) -> list[dict[str, object]]:
    return [e for e in api.events.values() if e["reason"] == reason]


def metric(controller: Controller, name: str, **labels: str) -> float:
    value = controller._metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def conflict_then_failed_re_read() -> Controller:
    """A node write answered 409, and the re-read that follows fails."""
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", ConflictError("409"))
    api.fail("get_node", TemporaryError("connection refused"))
    controller.process("n1")
    return controller


def test_a_conflict_whose_re_read_fails_is_requeued_with_backoff() -> None:
    controller = conflict_then_failed_re_read()
    due = due_in(controller.queue, "n1")
    assert due is not None and 0.5 < due <= 2.0


def throttled_write() -> Controller:
    """A node the ci rule taints, whose write the API server's flow control turns away."""
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", ThrottledError("429 Too Many Requests", retry_after=7))
    controller.process("n1")
    return controller


def test_throttling_is_retried_no_sooner_than_retry_after() -> None:
    due = due_in(throttled_write().queue, "n1")
    assert due is not None and due > 6.5


def test_throttling_is_counted_as_throttled_not_as_a_failure() -> None:
    controller = throttled_write()
    assert metric(controller, "nodegate_errors_total", kind="throttled") == 1
    assert metric(controller, "nodegate_errors_total", kind="temporary") == 0


def refused_ci_write(error: PermanentError) -> tuple[FakeApi, Controller]:
    """A node the ci rule taints, whose first write the API server refuses with `error`."""
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api, resync_seconds=300)
    controller.offer_rules(update(CI_RULES))
    api.fail("patch_node", error)
    controller.process("n1")
    return api, controller


def test_a_permanent_refusal_is_reported_once_and_not_retried_hot() -> None:
    api, controller = refused_ci_write(PermanentError("403 Forbidden", 403))
    [refused] = events(api, "NodegateWriteRefused")
    assert refused["type"] == "Warning"
    assert due_in(controller.queue, "n1") is None  # not requeued: the next resync brings it back
    assert num_requeues(controller.queue, "n1") == 0
    assert metric(controller, "nodegate_errors_total", kind="permanent") == 1


def test_nothing_is_written_while_the_lease_is_not_proven() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    fence = LeaderFence(renew_deadline_seconds=10)  # never renewed
    controller = synced(api, fence)
    controller.offer_rules(update(CI_RULES))
    controller.process("n1")
    assert api.count("patch_node") == 0
    fence.renewed(time.monotonic())
    controller.process("n1")
    assert api.count("patch_node") == 1


@pytest.mark.parametrize("text", [GPU_ONLY, EMPTY], ids=["rule-deleted", "empty-rules"])
def test_an_update_that_would_untaint_most_nodes_is_held_until_confirmed(text: str) -> None:
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    assert controller.rules_in_force.applied is not None
    assert controller.rules_in_force.generation == 1

    controller.offer_rules(update(text))
    assert controller.rules_in_force.applied.update.digest == rules_digest(CI_RULES)
    [held] = events(api, "RulesHeld")
    assert "4 of 4 nodes" in str(held["message"]) or "no rules at all" in str(held["message"])
    assert rules_digest(text) in str(held["message"])
    assert metric(controller, "nodegate_rules_held") == 1

    controller.offer_rules(update(text, confirmation=rules_digest(text)))
    assert controller.rules_in_force.applied.update.digest == rules_digest(text)
    assert metric(controller, "nodegate_rules_held") == 0


def test_a_held_update_reverted_clears_the_hold_and_a_re_offer_is_reported_again() -> None:
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    controller.offer_rules(update(GPU_ONLY))
    assert metric(controller, "nodegate_rules_held") == 1

    controller.offer_rules(update(CI_RULES))  # the admin reverts instead of confirming
    assert metric(controller, "nodegate_rules_held") == 0
    [cleared] = events(api, "RulesHoldCleared")
    assert rules_digest(GPU_ONLY) in str(cleared["message"])
    assert controller.rules_in_force.generation == 1

    controller.offer_rules(update(GPU_ONLY))  # offered again: held, and said so again
    assert metric(controller, "nodegate_rules_held") == 1
    [held] = events(api, "RulesHeld")
    assert held["count"] == 2


def test_an_update_touching_few_nodes_applies_at_once() -> None:
    api = FakeApi()
    api.add_node(ci_node("n0", tainted=True))
    for i in range(1, 4):
        api.add_node(fake_node(f"n{i}"))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    controller.offer_rules(update(GPU_ONLY))
    assert controller.rules_in_force.generation == 2


def test_a_confirmation_of_another_text_does_not_apply_a_held_update() -> None:
    api = FakeApi()
    for i in range(2):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    controller.offer_rules(update(EMPTY, confirmation=rules_digest(GPU_ONLY)))
    assert controller.rules_in_force.generation == 1


def test_applied_rules_are_recorded_in_the_taint_history_before_they_act() -> None:
    api = FakeApi()
    controller = synced(api)
    controller.offer_rules(update(CI_RULES))
    stored = api.configmaps[("nodegate-system", HISTORY_CONFIGMAP)]["data"]["taints.json"]
    assert "example.com/dedicated" in stored and "example.com/gpu" in stored


def test_the_taint_history_is_dated_on_the_controllers_clock_not_the_hosts() -> None:
    """Which entries are oldest (dropped first past the bound) must not depend on which
    replica's host clock wrote them: they are dated on the one clock, the API server's."""
    api = FakeApi()
    writes = fenced(api)
    server_time = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    controller = sync(
        Controller(
            ReconcilerSettings(
                rules_configmap="nodegate-system/rules", state_namespace="nodegate-system"
            ),
            writes,
            EventRecorder(api, "default", "test"),
            Metrics(),
            TaintHistory(writes, "nodegate-system"),
            Health(),
            clock=lambda: server_time,
        )
    )
    controller.offer_rules(update(CI_RULES))
    stored = api.configmaps[("nodegate-system", HISTORY_CONFIGMAP)]["data"]
    assert set(decode_history(stored).values()) == {"2031-05-06T07:08:09Z"}


def test_dry_run_records_the_same_would_be_change_once() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api, dry_run=True)
    controller.offer_rules(update(CI_RULES))
    for _ in range(3):
        controller.process("n1")
    assert len(events(api, "NodegateDryRun")) == 1
    assert api.count("patch_event") == 0
    assert api.count("patch_node") == 0


STORM_RULES = HEADER + textwrap.dedent(
    """\
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
    """
)


def test_dry_run_says_which_evicting_taints_would_wait_for_the_budget() -> None:
    api = FakeApi()
    for i in range(10):
        node = fake_node(f"n{i}")
        node["status"]["conditions"] = [{"type": "NetworkProblem", "status": "True"}]
        api.add_node(node)
    controller = synced(api, dry_run=True)
    # Held by the blast-radius guard otherwise (it would NoExecute every node): confirmed.
    controller.offer_rules(update(STORM_RULES, rules_digest(STORM_RULES)))

    for i in range(10):
        controller.process(f"n{i}")

    said = [str(e["message"]) for e in events(api, "NodegateDryRun")]
    assert sum("would have added taint example.com/network-problem" in m for m in said) == 2
    assert sum("would wait to add evicting taints (rule network-problem" in m for m in said) == 8
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


def persisted_n1() -> tuple[FakeApi, Controller]:
    """A node with a persisted label, and a controller whose record cache is synced."""
    api = FakeApi()
    api.add_node(persisted_node("n1", "uid-1", "oci://instance-1", **TEAM))
    return api, labelled(api)


def test_a_node_re_created_under_a_new_name_gets_its_persisted_labels_back() -> None:
    api = FakeApi()
    api.add_node(persisted_node("old", "uid-1", "oci://instance-1", **TEAM))
    controller = labelled(api)
    controller.process("old")  # the record is written from the node
    del api.nodes["old"]
    controller.informer.discard("old")
    api.add_node(persisted_node("new", "uid-2", "oci://instance-1"))
    controller.informer.put(api.nodes["new"])
    controller.process("new")
    assert api.nodes["new"]["metadata"]["labels"] == TEAM
    [restored] = events(api, "NodegateLabelsRestored")
    assert "persist.example.com/team=ml" in str(restored["message"])


def test_two_live_nodes_claiming_one_provider_id_get_nothing_and_write_no_record() -> None:
    api = FakeApi()
    api.add_node(persisted_node("victim", "uid-1", "oci://shared", **TEAM))
    controller = labelled(api)
    controller.process("victim")  # the record is the victim's
    recorded = dict(api.configmaps)
    evil = {"persist.example.com/evil": "yes"}
    api.add_node(persisted_node("evil-2", "uid-2", "oci://shared", **evil))
    relist_until_cached(controller, "evil-2")  # an event: both nodes live, the key contested
    controller.process("evil-2")
    controller.process("victim")
    assert api.nodes["evil-2"]["metadata"]["labels"] == evil
    assert api.nodes["victim"]["metadata"]["labels"] == TEAM
    assert api.configmaps == recorded
    assert len(events(api, "LabelRecordWithheld")) == 2
    assert metric(controller, "nodegate_label_keys_contested") == 1
    assert metric(controller, "nodegate_label_records_withheld_total", reason="contested") == 2


def test_an_unreadable_record_is_quarantined_and_the_node_keeps_its_labels() -> None:
    from nodegate.core.decisions.persisted_labels import RECORD_LABEL, record_name

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
    controller.process("n1")
    copies = [n for (_, n) in api.configmaps if n.startswith(f"{name}-quarantined-")]
    assert len(copies) == 1
    assert api.configmaps[("nodegate-system", copies[0])]["data"]["record.json"] == "{hand-edited"
    assert api.nodes["n1"]["metadata"]["labels"] == {"persist.example.com/a": "1"}
    assert events(api, "LabelRecordQuarantined")
    fresh = api.configmaps[("nodegate-system", name)]["data"]["record.json"]
    assert "persist.example.com/a" in fresh


# --- what each outcome counts, and what is forgotten (issue 24's defects) ----------------------


def test_a_failed_label_record_write_is_not_counted_as_a_node_write_error() -> None:
    api, controller = persisted_n1()
    api.fail("create_configmap", TemporaryError("503 Service Unavailable"))
    controller.process("n1")
    assert metric(controller, "nodegate_label_restore_failures_total", reason="record_write") == 1
    assert metric(controller, "nodegate_node_writes_total", result="error") == 0
    assert metric(controller, "nodegate_errors_total", kind="temporary") == 1
    assert due_in(controller.queue, "n1") is not None


def test_a_failed_re_read_after_a_conflict_is_not_counted_as_a_node_write_error() -> None:
    controller = conflict_then_failed_re_read()
    assert metric(controller, "nodegate_write_conflicts_total") == 1
    assert metric(controller, "nodegate_node_writes_total", result="error") == 0
    assert metric(controller, "nodegate_errors_total", kind="temporary") == 1


EXITS: dict[str, Callable[[FakeApi], object]] = {
    "no-rules": lambda api: None,
    "node-not-cached": lambda api: api.nodes.pop("n1"),
    "nothing-to-do": lambda api: api.nodes["n1"]["metadata"].update(labels={}),
    "written": lambda api: None,
    "refused": lambda api: api.fail("patch_node", PermanentError("403 Forbidden", 403)),
    "temporary": lambda api: api.fail("patch_node", TemporaryError("503")),
    "conflicts-exhausted": lambda api: api.fail("patch_node", *[ConflictError("409")] * 5),
}


@pytest.mark.parametrize("exit_path", list(EXITS))
def test_every_exit_of_a_reconcile_is_timed_once(exit_path: str) -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api)
    if exit_path != "no-rules":
        controller.offer_rules(update(CI_RULES))
    EXITS[exit_path](api)
    if exit_path in ("node-not-cached", "nothing-to-do"):
        controller.informer.discard("n1")
        if exit_path == "nothing-to-do":
            controller.informer.put(api.nodes["n1"])
    controller.process("n1")
    assert metric(controller, "nodegate_reconcile_duration_seconds_count") == 1


def test_a_node_waiting_for_the_label_records_cache_is_timed_and_looked_at_again() -> None:
    api = FakeApi()
    api.add_node(persisted_node("n1", "uid-1", "oci://instance-1", **TEAM))
    controller = synced(api)  # the records' informer never ran: not synced
    controller.offer_rules(update(PERSIST_RULES))
    controller.process("n1")
    assert metric(controller, "nodegate_reconcile_duration_seconds_count") == 1
    due = due_in(controller.queue, "n1")
    assert due is not None and due <= 1.0
    assert api.count("patch_node") == 0


GATE_RULES = HEADER + textwrap.dedent(
    """\
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/ready=true}
        timeout: 10m
        onTimeout: keep
    """
)


def gated_node(name: str) -> dict[str, object]:
    node = fake_node(
        name,
        {"pool": "gpu"},
        taints=[{"key": "startup.example.com/init", "value": "wait", "effect": "NoSchedule"}],
    )
    node["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    return node


def timed_out_gate(**settings: object) -> tuple[FakeApi, Controller]:
    """A node gated past its gate's timeout (onTimeout: keep), reconciled once."""
    api = FakeApi()
    api.add_node(gated_node("g1"))
    controller = synced(api, None, **settings)
    controller.offer_rules(update(GATE_RULES))
    controller.process("g1")
    return api, controller


def gates_remembered_after(
    controller: Controller, api: FakeApi, kind: str, raw: dict[str, Any]
) -> int:
    """Nodes the gate reports still remember once the informer has seen this watch event."""
    stop = threading.Event()
    thread = threading.Thread(target=controller.informer.run, args=(stop,), daemon=True)
    thread.start()
    api.push_watch(kind, raw)
    deadline = time.monotonic() + 5
    while len(controller.gates._said) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(5)
    return len(controller.gates._said)


def test_what_is_remembered_about_a_node_s_gates_goes_when_the_node_is_deleted() -> None:
    api, controller = timed_out_gate()
    assert len(events(api, "StartupGateTimedOut")) == 1
    assert len(controller.gates._said) == 1

    assert gates_remembered_after(controller, api, "DELETED", api.nodes.pop("g1")) == 0


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_gate_pod_loops_report_to_the_health_the_controller_was_given() -> None:
    class Crash(BaseException):
        """Gets past every `except Exception`, as a bug in the loop itself would."""

    api = FakeApi()
    health = Health()
    controller = Controller(
        ReconcilerSettings(rules_configmap="ns/rules", state_namespace="ns"),
        fenced(api),
        EventRecorder(api, "default", "test"),
        Metrics(),
        TaintHistory(fenced(api), "ns"),
        health,
    )
    api.fail("list_page", Crash())
    pod_gate = GATE_RULES.replace(
        "readyWhen: {annotation: example.com/ready=true}",
        "readyWhen: {pods: {namespace: kube-system, selector: {app: init}}}",
    )
    controller.gate_pods.follow(parse_rules(pod_gate))
    deadline = time.monotonic() + 5
    while health.check()[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    for thread in threading.enumerate():
        if thread.name.startswith("pods "):
            thread.join(5)  # its exception is reported within this test
    healthy, why = health.check()
    assert not healthy and "kube-system" in why


def test_a_record_that_changed_meanwhile_is_planned_again_without_counting_an_error() -> None:
    api, controller = persisted_n1()
    api.fail("create_configmap", ConflictError("409 already exists"))
    controller.process("n1")
    assert (
        metric(controller, "nodegate_label_restore_failures_total", reason="record_conflict") == 1
    )
    assert metric(controller, "nodegate_errors_total", kind="temporary") == 0
    assert num_requeues(controller.queue, "n1") == 1


def test_a_refused_write_still_comes_back_when_a_gate_times_out() -> None:
    api = FakeApi()
    node: dict[str, Any] = gated_node("g1")
    node["metadata"]["labels"]["example.com/dedicated"] = "ci"  # needs the ci taint: a write
    node["metadata"]["creationTimestamp"] = format_time(datetime.now(UTC) - timedelta(minutes=1))
    api.add_node(node)
    controller = synced(api)
    controller.offer_rules(update(GATE_RULES + CI_RULES.removeprefix(HEADER)))
    api.fail("patch_node", PermanentError("403 Forbidden", 403))
    controller.process("g1")
    due = due_in(controller.queue, "g1")
    assert due is not None and 500 < due < 600  # the gate's 10m timeout, 1m after creation
    assert num_requeues(controller.queue, "g1") == 0


def test_a_gate_kept_past_its_timeout_is_logged_as_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="nodegate.controller"):
        timed_out_gate()
    said = [r for r in caplog.records if "timed out" in r.getMessage()]
    assert said and getattr(said[0], "node", None) == "g1"


def test_a_node_re_created_under_its_name_while_unwatched_is_forgotten_as_the_old_node() -> None:
    api, controller = timed_out_gate()
    assert len(controller.gates._said) == 1
    again: dict[str, Any] = gated_node("g1")
    again["metadata"]["uid"] = "uid-g1-second"
    api.nodes["g1"] = api.add_node(again)
    # MODIFIED with a new uid: what a relist after a watch gap reports.
    assert gates_remembered_after(controller, api, "MODIFIED", api.nodes["g1"]) == 0


def test_the_resync_forgets_nodes_whose_delete_was_never_seen() -> None:
    api, controller = timed_out_gate(resync_seconds=0.2, workers=1)
    assert len(controller.gates._said) == 1
    del api.nodes["g1"]
    controller.informer.discard("g1")  # gone without a DELETED event
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while len(controller.gates._said) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    assert len(controller.gates._said) == 0


def records_listed(api: FakeApi) -> int:
    return sum(1 for name, detail in api.calls if name == "list_page" and detail[0] == "ConfigMap")


def test_label_records_are_watched_only_while_the_rules_persist_labels() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = synced(api, resync_seconds=60, workers=1)
    controller.offer_rules(update(CI_RULES))
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.5)
    assert records_listed(api) == 0  # the shipped RBAC grants no list for such rules
    controller.offer_rules(update(PERSIST_RULES))
    deadline = time.monotonic() + 5
    while not controller.labels.synced() and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(10)
    assert records_listed(api) >= 1 and controller.labels.synced()


def test_the_controller_tells_the_planner_when_it_saw_a_nodes_boots() -> None:
    now = [datetime(2026, 11, 24, 12, 0, tzinfo=UTC)]
    controller = Controller(
        ReconcilerSettings(rules_configmap="nodegate-system/rules"),
        fenced(FakeApi()),
        EventRecorder(FakeApi(), "default", "test"),
        Metrics(),
        TaintHistory(fenced(FakeApi()), "nodegate-system"),
        Health(),
        clock=lambda: now[0],
    )

    def seen(boot: str, seconds: int) -> None:
        now[0] += timedelta(seconds=seconds)
        raw = fake_node("n1")
        raw["status"]["nodeInfo"] = {"bootID": boot}
        controller.intake.on_event("n1", None, controller.intake.slim(raw))

    seen("boot-1", 0)
    seen("boot-1", 10)
    seen("boot-2", 5)
    seen("boot-2", 30)  # a heartbeat later: the reboot was seen 30 s ago
    facts = controller._node_facts.of("n1")
    assert facts.boot_first_seen == datetime(2026, 11, 24, 12, 0, 15, tzinfo=UTC)
    assert facts.previous_boot_seen == datetime(2026, 11, 24, 12, 0, 10, tzinfo=UTC)


def test_a_write_refused_as_invalid_still_writes_the_nodes_taints_alone() -> None:
    """A node can fill its own annotations up to the size limit (a kubelet may write them):
    that must not keep its taints from landing."""
    too_long = PermanentError("422 metadata.annotations: Too long", 422)
    api, controller = refused_ci_write(too_long)
    taints = api.nodes["n1"]["spec"].get("taints") or []
    assert [t["key"] for t in taints] == ["example.com/dedicated"]
    assert OWNED_TAINTS_ANNOTATION not in (api.nodes["n1"]["metadata"].get("annotations") or {})
    [alone] = events(api, "NodegateTaintsWrittenAlone")
    assert alone["type"] == "Warning"
    assert metric(controller, "nodegate_node_writes_split_total") == 1


def test_a_write_refused_for_permission_is_not_split() -> None:
    api, _ = refused_ci_write(PermanentError("403 Forbidden", 403))
    assert api.count("patch_node") == 1


@pytest.mark.parametrize("claimed", [True, False], ids=["claimed-at-birth", "unclaimed"])
def test_a_gate_the_rules_drop_before_the_first_write_is_lifted_if_the_webhook_claimed_it(
    claimed: bool,
) -> None:
    """The webhook births a node with a gate of the rules in force and claims it; the rules drop
    the gate before the reconciler ever wrote the node: the claim and the history lift it."""
    api = FakeApi()
    born: dict[str, Any] = gated_node("g1")
    if claimed:
        born["metadata"]["annotations"] = {
            OWNED_TAINTS_ANNOTATION: "startup.example.com/init:NoSchedule"
        }
    api.add_node(born)
    controller = synced(api, max_untaint_share=1.0)
    controller.offer_rules(update(GATE_RULES))  # in force: its gate key enters the history
    controller.offer_rules(update(CI_RULES))  # the gate dropped before the node was written
    controller.process("g1")
    left = [t["key"] for t in api.nodes["g1"]["spec"].get("taints") or []]
    assert left == ([] if claimed else ["startup.example.com/init"])


def slowed_controller(nodes: int, seconds_each: float) -> tuple[FakeApi, Controller, list[str]]:
    """CI nodes already as planned, a resync every 0.2 s, 2 workers, each reconcile taking
    `seconds_each` (so a pass takes measurable time); returns the keys reconciled."""
    api = FakeApi()
    for i in range(nodes):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api, resync_seconds=0.2, workers=2)
    controller.offer_rules(update(CI_RULES))
    reconciled: list[str] = []
    reconcile = controller._node.reconcile

    def slowly(key: str) -> Outcome:
        time.sleep(seconds_each)
        reconciled.append(key)
        return reconcile(key)

    controller._worker._reconcile = slowly
    return api, controller, reconciled


def run_until_resyncs(
    controller: Controller, resyncs: int, also: Callable[[threading.Event], None] | None = None
) -> float:
    """Run the controller (and `also`, beside it) until it counted `resyncs` periodic resyncs,
    at most 5 s; returns the count."""
    sample = controller._metrics.registry.get_sample_value
    stop = threading.Event()
    threads = [threading.Thread(target=controller.run, args=(stop,), daemon=True)]
    if also is not None:
        threads.append(threading.Thread(target=also, args=(stop,), daemon=True))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while (sample("nodegate_resyncs_total") or 0) < resyncs and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(10)
    return sample("nodegate_resyncs_total") or 0


def test_a_periodic_resync_is_timed_until_every_node_it_queued_is_reconciled() -> None:
    api, controller, reconciled = slowed_controller(20, 0.01)  # 2 workers: >= 100 ms a pass

    assert run_until_resyncs(controller, 1) == 1

    assert len(reconciled) >= 20 and api.count("patch_node") == 0
    duration = controller._metrics.registry.get_sample_value("nodegate_resync_duration_seconds")
    assert 0.1 <= (duration or 0) < 5


def test_a_node_that_never_stops_changing_does_not_hold_off_the_periodic_resync() -> None:
    _, controller, _ = slowed_controller(5, 0.005)

    def flap(stop: threading.Event) -> None:
        """A hostile node changing its labels without end: always queued, or being reconciled."""
        while not stop.wait(0.001):
            controller.queue.add("n0", "event")

    assert run_until_resyncs(controller, 2, also=flap) >= 2


def test_housekeeping_goes_on_while_a_long_resync_is_under_way() -> None:
    api = FakeApi()
    api.add_node(gated_node("g1"))
    for i in range(20):
        api.add_node(ci_node(f"n{i}"))
    controller = synced(api, None, resync_seconds=0.2, workers=1)
    controller.offer_rules(update(GATE_RULES))
    controller.process("g1")
    assert len(controller.gates._said) == 1
    reconcile = controller._node.reconcile

    def slowly(key: str) -> Outcome:
        time.sleep(0.2)  # 21 nodes, 1 worker: a pass of 4 s
        return reconcile(key)

    controller._worker._reconcile = slowly
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.5)  # the pass is under way
    del api.nodes["g1"]
    controller.informer.discard("g1")  # gone without a DELETED event
    deadline = time.monotonic() + 1.5
    while len(controller.gates._said) and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    assert len(controller.gates._said) == 0  # forgotten at the next period, not after the pass


NIC_FOR_30S = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
conditionTaints:
  - name: nic-broken
    conditions: [{type: NetworkInterfaceCard, status: Kaput}]
    for: 30s
    taint: {key: example.com/nic, value: broken, effect: NoExecute}
    evictionBudget: unlimited
"""


def test_a_for_hold_counts_from_the_controllers_first_sight_not_the_nodes_time() -> None:
    """The node wrote its condition's time an hour behind: the hold still runs its 30 s, from
    when this controller first saw the condition, then the taint goes on."""
    now = [datetime(2026, 11, 24, 12, 0, tzinfo=UTC)]
    api = FakeApi()
    raw = fake_node("n1")
    raw["status"]["conditions"] = [
        {
            "type": "NetworkInterfaceCard",
            "status": "Kaput",
            "lastTransitionTime": "2026-11-24T11:00:00Z",
        }
    ]
    api.add_node(raw)
    controller = sync(
        Controller(
            ReconcilerSettings(rules_configmap="nodegate-system/rules"),
            fenced(api),
            EventRecorder(api, "default", "test"),
            Metrics(),
            TaintHistory(fenced(api), "nodegate-system"),
            Health(),
            clock=lambda: now[0],
        )
    )
    controller.offer_rules(update(NIC_FOR_30S))

    controller.process("n1")
    assert not api.nodes["n1"]["spec"].get("taints")
    now[0] += timedelta(seconds=29)
    controller.process("n1")
    assert not api.nodes["n1"]["spec"].get("taints")
    now[0] += timedelta(seconds=2)
    controller.process("n1")
    assert [t["key"] for t in api.nodes["n1"]["spec"]["taints"]] == ["example.com/nic"]


def test_a_node_churning_what_no_rule_reads_costs_no_reconcile() -> None:
    """Issue 45: a node changing 50 times the reason (and time) of a condition no rule reads,
    or of one whose reason no rule matches, queues nothing; a status a rule reads does."""
    controller = synced(FakeApi())
    controller.offer_rules(update(NIC_FOR_30S))
    controller.queue.discard("n1")

    def churn(kind: str, status: str, reason: str, at: int) -> CachedNode:
        raw = fake_node("n1")
        when = f"2026-11-24T12:{at // 60:02d}:{at % 60:02d}Z"
        raw["status"]["conditions"] = [
            {"type": kind, "status": status, "reason": reason, "lastTransitionTime": when}
        ]
        return controller.intake.slim(raw)

    old = churn("KernelDeadlock", "False", "r0", 0)
    for i in range(1, 51):
        new = churn("KernelDeadlock", "False", f"r{i}", i)
        controller.intake.on_event("n1", old, new)
        old = new
    old = churn("NetworkInterfaceCard", "Fine", "r0", 0)
    for i in range(1, 51):
        new = churn("NetworkInterfaceCard", "Fine", f"r{i}", i)
        controller.intake.on_event("n1", old, new)
        old = new
    assert len(controller.queue) == 0

    controller.intake.on_event("n1", old, churn("NetworkInterfaceCard", "Kaput", "r", 59))
    assert len(controller.queue) == 1


def record_writes(api: FakeApi) -> list[dict[str, Any]]:
    """The bodies of every write of a persisted-label record."""
    return [
        body
        for call, body in api.calls
        if call in ("create_configmap", "replace_configmap")
        and str(body["metadata"]["name"]).startswith("nodegate-labels-")
    ]


def test_a_node_churning_a_label_no_rule_reads_costs_no_reconcile() -> None:
    """Issue 45: 50 changes of a label no rule's match, pool or persistence names queue
    nothing; a label a rule matches on does."""
    controller = synced(FakeApi())
    controller.offer_rules(update(CI_RULES))
    controller.queue.discard("n1")

    def labelled(labels: dict[str, str]) -> CachedNode:
        return controller.intake.slim(fake_node("n1", labels))

    old = labelled({"team.example.com/mood": "0"})
    for i in range(1, 51):
        new = labelled({"team.example.com/mood": str(i)})
        controller.intake.on_event("n1", old, new)
        old = new
    assert len(controller.queue) == 0

    controller.intake.on_event("n1", old, labelled({"example.com/dedicated": "ci"}))
    assert len(controller.queue) == 1


def test_a_node_flipping_a_persisted_label_pays_one_record_write_per_interval() -> None:
    """Issue 45: 50 flips of a persisted label cost one record write, then, once the interval
    has passed, one more with the last value: etcd writes are not the node's to spend."""
    api, controller = persisted_n1()
    ticks = [0.0]
    controller.labels._monotonic = lambda: ticks[0]
    controller.process("n1")
    assert len(record_writes(api)) == 1

    for flip in range(50):
        api.nodes["n1"]["metadata"]["labels"] = {"persist.example.com/team": f"t{flip}"}
        controller.informer.put(api.nodes["n1"])
        controller.process("n1")
    assert len(record_writes(api)) == 1

    ticks[0] += COALESCE_SECONDS
    controller.process("n1")
    [_, last] = record_writes(api)
    assert "t49" in last["data"]["record.json"]


def test_a_label_change_still_coalesced_when_its_node_is_deleted_is_not_lost() -> None:
    """An admin removes a persisted label and the node is deleted before the record's next
    write was due: the record keeps the labels the watch last saw, not the earlier ones."""
    api, controller = persisted_n1()
    ticks = [0.0]
    controller.labels._monotonic = lambda: ticks[0]
    controller.process("n1")
    old = controller.informer.get("n1")
    api.nodes["n1"]["metadata"]["labels"] = {}
    controller.informer.put(api.nodes["n1"])
    controller.process("n1")  # coalesced: the record still says team=ml
    gone = controller.informer.get("n1")
    assert old is not None and gone is not None
    del api.nodes["n1"]
    controller.informer.discard("n1")
    controller.intake.on_event("n1", gone, None)
    controller.process("n1")

    [*_, last] = record_writes(api)
    assert "persist.example.com/team" not in last["data"]["record.json"]
    assert '"nodeGoneAt": null' not in last["data"]["record.json"]


class FullAnnotationsApi(FakeApi):
    """A node whose own annotations fill the size limit: a write that adds one is refused."""

    def patch_node(self, name: str, merge_patch: dict[str, Any]) -> None:
        present = self.nodes[name]["metadata"].get("annotations") or {}
        added = (merge_patch.get("metadata") or {}).get("annotations") or {}
        if any(value is not None and key not in present for key, value in added.items()):
            self._enter("patch_node", merge_patch)
            raise PermanentError("422 metadata.annotations: Too long", 422)
        super().patch_node(name, merge_patch)


def fenced_ci_controller(api: FakeApi) -> Controller:
    """A leader (term me/1) on the ci rule, writing through the fence as `nodegate reconcile`
    does (reconciler/main.py)."""
    fence = LeaderFence(10)
    fence.renewed(time.monotonic(), ("me", 1))
    writes = FencedApi(api, fence, lambda _verdict: None)
    controller = synced(writes, fence, resync_seconds=300)
    controller.offer_rules(update(CI_RULES))
    return controller


def test_a_taints_alone_write_carries_no_term_so_a_full_node_still_gets_its_taints() -> None:
    """The fence's token is an annotation too: stamped on the taints-alone write it would be
    refused like the first; that write drops it instead (fenced on the client only)."""
    api = FullAnnotationsApi()
    api.add_node(ci_node("n1"))
    controller = fenced_ci_controller(api)

    controller.process("n1")

    taints = api.nodes["n1"]["spec"].get("taints") or []
    assert [t["key"] for t in taints] == ["example.com/dedicated"]
    alone = [body for call, body in api.calls if call == "patch_node"][-1]
    assert alone["metadata"]["annotations"] == {FENCE_ANNOTATION: None}
    assert FENCE_ANNOTATION not in (api.nodes["n1"]["metadata"].get("annotations") or {})


def test_a_taints_alone_write_after_another_refusal_keeps_its_term() -> None:
    """Only full annotations make the taints go without the term: a label the API server
    refuses is not in the taints-alone write, so nothing keeps the term from it."""
    api = FakeApi()
    api.add_node(ci_node("n1"))
    controller = fenced_ci_controller(api)
    api.fail("patch_node", PermanentError("422 metadata.labels: Invalid value", 422))

    controller.process("n1")

    alone = [body for call, body in api.calls if call == "patch_node"][-1]
    assert alone["metadata"]["annotations"] == {FENCE_ANNOTATION: "me/1"}
    assert [t["key"] for t in api.nodes["n1"]["spec"].get("taints") or []] == [
        "example.com/dedicated"
    ]


def test_a_record_write_waiting_for_its_interval_goes_out_at_a_clean_stop() -> None:
    """Issue 45: coalescing must lose nothing at a stop: the next leader may never see the node
    again (deleted while no replica ran), so its latest labels are written before the hand-back."""
    api, controller = persisted_n1()
    ticks = [0.0]
    controller.labels._monotonic = lambda: ticks[0]
    controller.process("n1")
    api.nodes["n1"]["metadata"]["labels"] = {"persist.example.com/team": "latest"}
    controller.informer.put(api.nodes["n1"])
    controller.process("n1")  # within the interval: waits
    assert len(record_writes(api)) == 1

    assert controller.flush_labels() == 1

    [_, last] = record_writes(api)
    assert "latest" in last["data"]["record.json"]
    assert not controller.labels._deferred


def test_a_node_that_gets_its_provider_id_late_is_looked_at_again_when_labels_persist() -> None:
    """A kubelet may set its providerID after registration (once, while empty): the record it
    keys is looked up at once, not at the next resync."""
    controller = labelled(FakeApi())  # no node listed: nothing queued yet
    without = fake_node("n1")
    with_id = {**without, "spec": {**without["spec"], "providerID": "oci://late"}}
    assert len(controller.queue) == 0

    slim = controller.intake.slim
    controller.intake.on_event("n1", slim(without), slim(with_id))

    assert len(controller.queue) == 1


REMEMBERED_RULES = (
    HEADER
    + textwrap.dedent(
        """\
    evictionBudget: {cluster: {maxNodes: 1}}
    labelTaints:
      - name: trial
        match: {labels: {pool: gpu}}
        taint: {key: example.com/trial, value: "on", effect: NoSchedule}
        nodeMayLift: true
        dryRun: true
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
    """
    )
    + GATE_RULES.removeprefix(HEADER)
)
"""Rules under which a node is remembered by every collaborator that keeps something per node:
its condition sightings and boot, a dry-run rule's pending change, an evicting taint waiting for
the budget (another node spent it) and a gate's timeout said."""


def remembered(controller: Controller, *marks: str) -> set[str]:
    """Where, from the controller, something holds one of `marks` (a node's name or uid): a
    dict's key or value, a member of a set, list or tuple, or a field of nodegate's own
    objects, by the shortest attribute path. The kit (informers, queue, Event recorder) and the
    API are not looked into: what they hold is not the node controller's memory."""
    found: set[str] = set()
    seen: set[int] = set()
    todo: deque[tuple[object, str]] = deque([(controller, "controller")])
    while todo:
        value, path = todo.popleft()
        if isinstance(value, str):
            if value in marks:
                found.add(path)
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            todo.extend((item, path) for pair in list(value.items()) for item in pair)
        elif isinstance(value, (list, tuple, set, frozenset)):
            todo.extend((item, path) for item in list(value))
        elif type(value).__module__.startswith(("nodegate.reconciler.nodes", "nodegate.core")):
            fields = dict(getattr(value, "__dict__", {}))
            fields.update(
                (slot, getattr(value, slot))
                for slot in getattr(type(value), "__slots__", ())
                if hasattr(value, slot)
            )
            todo.extend((item, f"{path}.{name}") for name, item in fields.items())
    return found


def test_a_deleted_node_is_forgotten_by_every_collaborator_that_remembered_it() -> None:
    """Every collaborator keeping something per node is in the one list the controller forgets
    through (`node_memory`): leave one out of it and this fails, naming what it kept."""
    api = FakeApi()
    broken = [{"type": "NetworkProblem", "status": "True"}]
    spender = fake_node("spender")
    spender["status"]["conditions"] = broken
    api.add_node(spender)
    node: dict[str, Any] = gated_node("forgotten")
    node["status"]["conditions"] = broken
    node["status"]["nodeInfo"] = {"bootID": "boot-1"}
    api.add_node(node)
    controller = synced(api)
    controller.offer_rules(update(REMEMBERED_RULES, rules_digest(REMEMBERED_RULES)))
    controller.process("spender")  # spends the eviction budget: "forgotten" waits for it
    controller.process("forgotten")
    marks = ("forgotten", "uid-forgotten")
    before = remembered(controller, *marks)
    owners = {path.split(".")[1] for path in before}
    assert owners == {"_node_facts", "_writer", "breaker", "gates"}, before

    gone = controller.informer.get("forgotten")
    del api.nodes["forgotten"]
    controller.informer.discard("forgotten")
    controller.intake.on_event("forgotten", gone, None)

    assert remembered(controller, *marks) == set()


def test_a_node_hook_is_called_on_node_events_until_it_is_unwatched() -> None:
    controller = new_controller(FakeApi())
    seen: list[str] = []
    unwatch = controller.intake.watch(lambda _old, new: seen.append(new.name))
    controller.intake.on_event("n1", None, controller.intake.slim(fake_node("n1")))
    unwatch()  # the poller's leadership ended
    controller.intake.on_event("n2", None, controller.intake.slim(fake_node("n2")))
    assert seen == ["n1"]
