"""A restart or a failover puts the rules that were in force back in force, from the status
record, before any update is judged: an update held before the restart stays held, and the
rules it would have replaced keep working."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Any, cast

import pytest

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.objects.status_record import STATUS_CONFIGMAP, STATUS_KEY, decode_status
from nodegate.reconciler.kit import backoff
from nodegate.reconciler.kit.errors import TemporaryError
from nodegate.reconciler.kit.workqueue import Lane
from nodegate.reconciler.main import readiness
from nodegate.reconciler.nodes.controller import Controller
from tests.unit.reconciler.kit.fakes import FakeApi
from tests.unit.reconciler.nodes.test_controller import (
    CI_RULES,
    GPU_ONLY,
    REF,
    ci_node,
    metric,
    new_controller,
    sync,
    synced,
)
from tests.unit.reconciler.nodes.test_status_publisher import offered

RECORD = ("nodegate-system", STATUS_CONFIGMAP)
CI_EVICTING = CI_RULES.replace("effect: NoSchedule", "effect: NoExecute")


def held_after_ci_rules() -> FakeApi:
    """Four tainted CI nodes; CI_RULES in force (generation 1), GPU_ONLY (which would untaint
    all four) held, as a first process left them."""
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    first = synced(api)
    first.offer_rules(offered(CI_RULES))
    first.offer_rules(offered(GPU_ONLY))
    assert first.rules_in_force.generation == 1
    assert decode_status(api.configmaps[RECORD]["data"])[0].held is not None
    return api


def restarted(api: FakeApi, **settings: object) -> Controller:
    """A new process on the same cluster, in `run`'s order: it recovers, then its node cache
    syncs (which is when the rules recovered take effect)."""
    controller = new_controller(api, None, **settings)
    controller.read_backs.rules(threading.Event())
    return sync(controller)


def test_a_restart_while_an_update_is_held_keeps_the_rules_that_were_in_force() -> None:
    api = held_after_ci_rules()
    controller = restarted(api)
    controller.offer_rules(offered(GPU_ONLY))  # what the rules ConfigMap still holds

    assert controller.rules_in_force.applied is not None
    assert (
        controller.rules_in_force.applied.generation,
        controller.rules_in_force.applied.update.digest,
    ) == (
        1,
        rules_digest(CI_RULES),
    )
    status, text = decode_status(api.configmaps[RECORD]["data"])
    assert (status.generation, text) == (1, CI_RULES)
    assert status.held is not None and status.held.digest == rules_digest(GPU_ONLY)


def test_the_rules_put_back_reconcile_nodes_as_before() -> None:
    api = held_after_ci_rules()
    api.add_node(ci_node("new"))
    controller = restarted(api)
    controller.offer_rules(offered(GPU_ONLY))

    controller.process("new")

    taints = api.nodes["new"]["spec"].get("taints", [])
    assert {"key": "example.com/dedicated", "value": "ci", "effect": "NoSchedule"} in taints


def test_the_same_text_offered_after_a_restart_keeps_its_generation_and_takes_its_source() -> None:
    api = held_after_ci_rules()
    controller = restarted(api)
    controller.offer_rules(offered(CI_RULES))  # the held update was reverted meanwhile

    assert controller.rules_in_force.applied is not None
    assert controller.rules_in_force.applied.generation == 1
    assert controller.rules_in_force.applied.update.ref == REF
    assert decode_status(api.configmaps[RECORD]["data"])[0].held is None


def test_a_held_updates_since_survives_the_restart() -> None:
    api = held_after_ci_rules()
    before = decode_status(api.configmaps[RECORD]["data"])[0].held
    controller = restarted(api)
    controller.offer_rules(offered(GPU_ONLY))

    after = decode_status(api.configmaps[RECORD]["data"])[0].held
    assert before is not None and after is not None
    assert after.since == before.since


def test_a_record_whose_text_does_not_match_its_digest_puts_nothing_back() -> None:
    api = held_after_ci_rules()
    data = api.configmaps[RECORD]["data"]
    data["rules.yaml"] = GPU_ONLY  # edited by hand: not the text applied under that digest
    controller = restarted(api)

    assert controller.rules_in_force.applied is None
    assert controller.rules_recovered.is_set()
    assert metric(controller, "nodegate_errors_total", kind="status") == 1


def test_a_record_of_a_newer_format_puts_nothing_back_and_says_so() -> None:
    api = held_after_ci_rules()
    data = api.configmaps[RECORD]["data"]
    data[STATUS_KEY] = json.dumps(json.loads(data[STATUS_KEY]) | {"version": 99})
    controller = restarted(api)

    assert controller.rules_in_force.applied is None
    assert metric(controller, "nodegate_errors_total", kind="status") == 1


def test_a_first_start_has_nothing_to_recover_and_is_recovered() -> None:
    api = FakeApi()
    controller = restarted(api)

    assert controller.rules_in_force.applied is None
    assert controller.rules_recovered.is_set()
    assert metric(controller, "nodegate_errors_total", kind="status") == 0


def test_recovery_waits_for_an_api_server_that_cannot_answer_yet() -> None:
    api = held_after_ci_rules()
    api.fail("read_configmap", TemporaryError("connection refused"))
    controller = restarted(api)

    assert controller.rules_in_force.generation == 1


def _ready(controller: Controller) -> tuple[bool, str]:
    watcher = SimpleNamespace(loaded=threading.Event())
    watcher.loaded.set()
    leading = threading.Event()
    leading.set()
    return readiness(cast(Any, watcher), controller, leading)()


def test_a_leader_is_not_ready_until_the_rules_in_force_are_recovered() -> None:
    controller = sync(new_controller(held_after_ci_rules()))

    ok, why = _ready(controller)

    assert not ok and "not recovered" in why


def test_a_held_update_with_nothing_in_force_leaves_the_leader_ready_and_says_so() -> None:
    """Unready would also take the webhook away; RulesHeld and its metric say it instead."""
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}"))
    controller = restarted(api)
    controller.offer_rules(offered(CI_EVICTING))  # would evict every node: held at first start

    assert controller.rules_in_force.applied is None
    assert _ready(controller) == (True, "ok (rules generation 0)")
    assert metric(controller, "nodegate_rules_held") == 1


def test_the_rules_recovered_plan_nothing_before_the_node_cache_syncs() -> None:
    """Nodes listed before the sync are planned only once the offered update was judged
    against the rules recovered: a stale record never writes its rules first."""
    controller = new_controller(held_after_ci_rules())
    controller.read_backs.rules(threading.Event())

    assert controller.rules is None
    assert controller.rules_in_force.applied is None
    assert sync(controller).rules_in_force.applied is not None


def test_a_record_that_breaks_the_parser_puts_nothing_back_and_kills_nothing() -> None:
    api = held_after_ci_rules()
    api.configmaps[RECORD]["data"][STATUS_KEY] = "[" * 200_000
    controller = restarted(api)

    assert controller.rules_in_force.applied is None
    assert controller.rules_recovered.is_set()
    assert metric(controller, "nodegate_errors_total", kind="status") == 1


def test_recovery_gives_up_after_the_history_deadline_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backoff, "READ_BACK_SECONDS", 0.2)
    api = held_after_ci_rules()
    for _ in range(100):
        api.fail("read_configmap", TemporaryError("503"))
    controller = restarted(api)

    assert controller.rules_recovered.is_set()
    assert metric(controller, "nodegate_errors_total", kind="status") == 1


def test_the_record_takes_this_processs_limit_at_once() -> None:
    """`nodegate plan` judges with the recorded limit: it must be the running one's."""
    api = held_after_ci_rules()
    restarted(api, max_untaint_share=0.9)

    assert decode_status(api.configmaps[RECORD]["data"])[0].max_untaint_share == 0.9


def test_a_recovered_leader_is_ready_with_its_generation() -> None:
    controller = restarted(held_after_ci_rules())
    controller.offer_rules(offered(GPU_ONLY))

    assert _ready(controller) == (True, "ok (rules generation 1)")


def test_an_update_in_force_at_once_after_a_restart_plans_no_node_under_the_rules_recovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader paused before writing the NoExecute taint of CI rules; the admin deleted the
    rule meanwhile; the new leader recovers the CI rules and is offered the rules without it,
    which untaint nothing and take effect at once. No node may be queued (and a worker take it
    at once) while the CI rules are in force: it would write a NoExecute taint of a deleted
    rule, evicting, and take it off a moment later (seen as a taint flap in
    tests/e2e/test_server_fencing.py)."""
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}"))
    first = synced(api, max_untaint_share=1.0)  # as the e2e test's replicas
    first.offer_rules(offered(CI_EVICTING))  # in force; no node written yet
    assert first.rules_in_force.generation == 1
    controller = new_controller(api, max_untaint_share=1.0)
    controller.read_backs.rules(threading.Event())
    controller.offer_rules(offered(GPU_ONLY))  # what the rules ConfigMap holds now
    queued_under: list[str] = []
    add = controller.queue.add

    def spy(key: str, lane: Lane = "event") -> None:
        if (update := controller.rules_in_force.update) is not None:
            queued_under.append(update.digest)
        add(key, lane)

    monkeypatch.setattr(controller.queue, "add", spy)
    sync(controller)

    assert controller.rules_in_force.applied is not None
    assert controller.rules_in_force.applied.update.digest == rules_digest(GPU_ONLY)
    assert controller.rules_in_force.generation == 2
    assert queued_under and set(queued_under) == {rules_digest(GPU_ONLY)}
