"""The leader's status record: the rules in force (generation, digest, text) and a held update,
written where `nodegate status|explain|plan` read them, and written again after a failure."""

from __future__ import annotations

import os
import threading
import time

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.objects.status_record import STATUS_CONFIGMAP, ReconcilerStatus, decode_status
from nodegate.core.rules.loader import parse_rules
from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.nodes.rules.status_publisher import (
    PERMANENT_RETRY_SECONDS,
    StatusPublisher,
    this_process,
)
from tests.unit.core.builders import NOW
from tests.unit.reconciler.kit.fakes import FakeApi
from tests.unit.reconciler.nodes.test_controller import CI_RULES, GPU_ONLY, REF, ci_node, synced


def offered(text: str, confirmation: str | None = None) -> RulesUpdate:
    return RulesUpdate(parse_rules(text), rules_digest(text), "test", REF, confirmation, text)


def record(api: FakeApi) -> tuple[ReconcilerStatus, str]:
    stored = api.configmaps[("nodegate-system", STATUS_CONFIGMAP)]
    return decode_status(stored["data"])


def test_the_rules_in_force_are_published_with_their_generation_digest_and_text() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1", tainted=True))
    controller = synced(api, max_untaint_share=0.3)
    controller.offer_rules(offered(CI_RULES))

    status, text = record(api)
    assert (status.generation, status.digest, status.held) == (1, rules_digest(CI_RULES), None)
    assert (status.max_untaint_share, status.source) == (0.3, "test")
    assert text == CI_RULES


def test_a_held_update_is_published_with_its_digest_and_reason_beside_the_rules_in_force() -> None:
    api = FakeApi()
    for i in range(4):
        api.add_node(ci_node(f"n{i}", tainted=True))
    controller = synced(api)
    controller.offer_rules(offered(CI_RULES))
    controller.offer_rules(offered(GPU_ONLY))

    status, text = record(api)
    assert status.held is not None and status.held.digest == rules_digest(GPU_ONLY)
    assert "remove taints from 4 of 4 nodes" in status.held.reason
    assert (status.generation, text) == (1, CI_RULES)  # the ConfigMap's text is not in force

    controller.offer_rules(offered(CI_RULES))  # reverted: nothing is held any more
    assert record(api)[0].held is None


def test_a_status_write_that_failed_is_written_by_the_next_retry() -> None:
    api = FakeApi()
    api.add_node(ci_node("n1", tainted=True))
    controller = synced(api)
    api.fail("replace_configmap", TemporaryError("connection refused"))
    controller.offer_rules(offered(CI_RULES))
    assert controller.rules_in_force.applied is not None  # the failed write held nothing up
    assert ("nodegate-system", STATUS_CONFIGMAP) not in api.configmaps

    assert controller.status.retry()
    assert record(api)[0].generation == 1


def test_a_failed_status_write_is_tried_again_by_the_frequent_chores_not_the_resync() -> None:
    """A transient failure (a 503 under load) left the record stale until the next resync, five
    minutes later: `nodegate status` said nothing of a held update. The leader's frequent
    chores try it again, with backoff."""
    api = FakeApi()
    api.add_node(ci_node("n1", tainted=True))
    controller = synced(api)
    api.fail("replace_configmap", TemporaryError("503"))
    controller.offer_rules(offered(CI_RULES))
    assert ("nodegate-system", STATUS_CONFIGMAP) not in api.configmaps

    stop = threading.Event()
    chores = threading.Thread(target=controller._chores.run, args=(stop,), daemon=True)
    chores.start()
    try:
        deadline = time.monotonic() + 10
        while ("nodegate-system", STATUS_CONFIGMAP) not in api.configmaps:
            assert time.monotonic() < deadline, "the record was not written again"
            time.sleep(0.05)
    finally:
        stop.set()
        chores.join()
    assert record(api)[0].generation == 1


def test_failed_status_writes_are_tried_again_with_backoff_not_every_few_milliseconds() -> None:
    api = FakeApi()
    publisher = StatusPublisher(api, "nodegate-system", "replica-a", lambda: NOW, process="p")
    api.fail("replace_configmap", *(TemporaryError("503") for _ in range(100)))
    publisher.applied(offered(CI_RULES), 1)  # the first attempt fails

    started = time.monotonic()
    while time.monotonic() - started < 0.5:
        publisher.retry_when_due()
    assert 100 - len(api.failures["replace_configmap"]) == 1  # none within the first 0.8 s


def test_a_refused_status_write_is_not_tried_again_for_minutes() -> None:
    """A 403 (RBAC) or 422 (too large) is mended by a person, not by retrying: tried as seldom
    as the resync did, not every 30 s with a Warning each time."""
    api = FakeApi()
    publisher = StatusPublisher(api, "nodegate-system", "replica-a", lambda: NOW, process="p")
    api.fail("replace_configmap", PermanentError("forbidden", 403))
    publisher.applied(offered(CI_RULES), 1)

    assert publisher._next_attempt - time.monotonic() > PERMANENT_RETRY_SECONDS - 5
    assert not publisher.retry_when_due()


def test_the_chores_retry_never_waits_for_a_status_write_in_flight() -> None:
    """The chores run every few milliseconds beside the resync and the sightings: a write of
    the rules' thread stuck in a slow API call must not stall them."""
    api = FakeApi()
    publisher = StatusPublisher(api, "nodegate-system", "replica-a", lambda: NOW, process="p")
    publisher.applied(offered(CI_RULES), 1)
    in_flight = threading.Thread(target=publisher._writing.acquire, daemon=True)
    in_flight.start()
    in_flight.join()  # held, as by a write in flight on another thread...
    finished = threading.Timer(2.0, publisher._writing.release)  # ...that ends in 2 s
    finished.start()

    started = time.monotonic()
    assert not publisher.retry_when_due()
    assert time.monotonic() - started < 1.0
    finished.join()


def test_a_conflict_creating_the_record_is_retried_and_never_holds_up_the_rules() -> None:
    """The API server answers 409 when another writer (a former leader, a hand) created the
    record between the update's 404 and the create: the rules still take effect, and a retry
    stores the record over the other writer's (an unconditional update)."""
    api = FakeApi()
    api.add_node(ci_node("n1", tainted=True))
    controller = synced(api)
    api.configmaps.pop(("nodegate-system", STATUS_CONFIGMAP), None)  # deleted by hand
    api.fail("create_configmap", ConflictError("already exists"))
    controller.offer_rules(offered(CI_RULES))
    assert controller.rules_in_force.applied is not None
    assert not api.failures["create_configmap"]  # the 409 was met
    api.configmaps[("nodegate-system", STATUS_CONFIGMAP)] = {
        "metadata": {"name": STATUS_CONFIGMAP, "resourceVersion": "1"},
        "data": {"status.json": "written by someone else"},
    }
    controller.status.applied(offered(CI_RULES), 1)  # as the next generation or resync would

    assert record(api)[0].generation == 1


def test_the_record_says_which_process_wrote_it() -> None:
    """Its Lease identity, and the process: `nodegate reconcile` (a dry run writes no record),
    its host and pid, so a reader can tell who left the rules it names."""
    api = FakeApi()
    api.add_node(ci_node("n1", tainted=True))
    controller = synced(api)
    controller.offer_rules(offered(CI_RULES))

    status, _ = record(api)
    assert status.writer == controller._settings.leader_election.identity
    assert status.writer_process == this_process()
    assert this_process().startswith("nodegate reconcile on ")
    assert f"pid {os.getpid()}" in this_process()


def test_a_new_process_under_the_same_identity_says_so_in_the_record() -> None:
    """A restart under a fixed `--lease-identity` is another process: the record names it as
    soon as the rules are put back, nothing else about the rules changed."""
    api = FakeApi()
    before = StatusPublisher(api, "nodegate-system", "replica-a", lambda: NOW, process="p1")
    before.applied(offered(CI_RULES), 1)
    after = StatusPublisher(api, "nodegate-system", "replica-a", lambda: NOW, process="p2")

    after.recover()

    status, text = record(api)
    assert (status.writer, status.writer_process) == ("replica-a", "p2")
    assert (status.generation, status.digest, text) == (1, rules_digest(CI_RULES), CI_RULES)


def test_a_record_written_before_the_process_was_kept_still_reads() -> None:
    status, _ = decode_status(
        {
            "status.json": '{"version": 1, "writer": "old", "nodegateVersion": "0.1", '
            '"generation": 0, "digest": null, "updatedAt": "2026-01-01T00:00:00Z"}'
        }
    )
    assert (status.writer, status.writer_process) == ("old", "")
