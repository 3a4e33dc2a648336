"""The OCI poller against a local HTTPS server speaking the Compute API and checking every
request's signature (`oci_compute_server.py` beside this file), through the real `oci` SDK;
Nodes in the fake Kubernetes API. What each poll writes, reports, counts, and what it does when
OCI fails."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from nodegate.core.rules.node import NodeState
from nodegate.core.rules.node_marks import (
    FENCE_ANNOTATION,
    MAINTENANCE_REBOOT_DUE,
    STOPPED,
    TERMINATING,
)
from nodegate.reconciler.kit.errors import ANNOTATIONS_TOO_LONG, PermanentError
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.oci.oci_compute import MAX_PAGES, ComputeLister, compute_client
from nodegate.reconciler.nodes.oci.oci_instances import (
    EVENT_REASON,
    RECHECK_SECONDS,
    OciError,
    OciInstanceConditions,
)
from nodegate.reconciler.settings import OciSettings
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.nodes.oci_compute_server import OciComputeServer, instance, instance_ocid

A = "ocid1.compartment.oc1..aaaaaaaacompa"
B = "ocid1.compartment.oc1..aaaaaaaacompb"


@dataclass
class Recorder:
    events: list[tuple[str, str, str, bool]] = field(default_factory=list)

    def on_node(
        self, name: str, uid: str, reason: str, message: str, warning: bool = False
    ) -> None:
        self.events.append((name, reason, message, warning))

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        self.events.append((name, reason, message, False))

    def on_rules_object(
        self, name: str, uid: str, reason: str, message: str, warning: bool = True
    ) -> None:
        self.events.append((name, reason, message, warning))


@dataclass
class Monotonic:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Scene:
    server: OciComputeServer
    api: FakeApi
    recorder: Recorder
    metrics: Metrics
    clock: Monotonic
    poller: OciInstanceConditions

    def node(self, suffix: str, provider_id: str | None = None) -> str:
        name = f"node-{suffix}"
        self.api.add_node(
            fake_node(name, providerID=provider_id or f"oci://{instance_ocid(suffix)}")
        )
        return name

    def conditions(self, name: str) -> dict[str, dict[str, str]]:
        return {c["type"]: c for c in self.api.nodes[name]["status"]["conditions"]}

    def poll(self, after: float = 0.0) -> None:
        self.clock.now += after
        self.poller.poll_once()

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


def make_scene(
    tmp_path: Path, compartments: tuple[str, ...] = (A,), dry_run: bool = False, **settings: object
) -> Scene:
    server = OciComputeServer(tmp_path)
    config = OciSettings(
        compartments=",".join(compartments),
        auth="api_key",
        config_file=server.api_key_config(),
        endpoint=server.endpoint,
        ca_bundle=server.ca_file,
        **settings,
    )
    api, recorder, metrics, clock = FakeApi(), Recorder(), Metrics(), Monotonic()
    calls = metrics.oci.list_calls
    lister = ComputeLister(
        compute_client(config), config.page_size, lambda outcome: calls.labels(outcome).inc()
    )
    poller = OciInstanceConditions(
        lister,
        compartments,
        config.poll_seconds,
        FencedApi(api, LeaderFence(None), lambda _verdict: None),  # no election: no term
        recorder,
        metrics.oci,
        lambda: [NodeState.from_k8s(raw) for raw in api.nodes.values()],
        lambda: datetime(2026, 11, 28, 6, 0, tzinfo=UTC),
        dry_run=dry_run,
        monotonic=clock,
    )
    return Scene(server, api, recorder, metrics, clock, poller)


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    made = make_scene(tmp_path)
    with made.server:
        yield made


def test_a_terminating_instance_gets_its_condition_an_event_and_a_count(scene: Scene) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    condition = scene.conditions(name)[TERMINATING]
    assert (condition["status"], condition["reason"]) == ("True", "InstanceTerminating")
    assert condition["lastTransitionTime"] == "2026-11-28T06:00:00Z"
    assert [(r, w) for _, r, _, w in scene.recorder.events] == [(EVENT_REASON, True)]
    assert scene.metric("nodegate_oci_condition_writes_total", type=TERMINATING, status="True") == 1
    assert all(seen.verified for seen in scene.server.requests())


def test_a_second_poll_with_nothing_changed_writes_nothing(scene: Scene) -> None:
    scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    scene.poll(after=30)
    scene.poll(after=30)
    assert scene.api.count("patch_node_status") == 1
    # A True condition is read again at each poll (the cache holds no messages to check).
    assert scene.api.count("get_node") == 2


def test_a_node_with_only_false_conditions_is_not_read_at_a_poll(scene: Scene) -> None:
    scene.node("fine")
    scene.server.put(A, instance(instance_ocid("fine"), "RUNNING"))
    scene.poll()
    scene.poll(after=30)
    assert scene.api.count("get_node") == scene.api.count("patch_node_status") == 0


def test_a_message_the_node_forged_is_set_back_at_the_next_poll(scene: Scene) -> None:
    name = scene.node("doomed")
    due = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    scene.server.put(A, instance(instance_ocid("doomed"), "RUNNING", maintenance_due=due))
    scene.poll()
    written = scene.conditions(name)[MAINTENANCE_REBOOT_DUE]["message"]
    forged = {**scene.conditions(name)[MAINTENANCE_REBOOT_DUE], "message": "due 2099-01-01"}
    scene.api.patch_node_status(name, {"status": {"conditions": [forged]}})
    scene.poll(after=30)
    assert scene.conditions(name)[MAINTENANCE_REBOOT_DUE]["message"] == written


def test_a_maintenance_reboot_due_is_written_with_its_time_and_rewritten_when_it_moves(
    scene: Scene,
) -> None:
    name = scene.node("patched")
    due = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    scene.server.put(A, instance(instance_ocid("patched"), maintenance_due=due))
    scene.poll()
    condition = scene.conditions(name)[MAINTENANCE_REBOOT_DUE]
    assert condition["status"] == "True" and "2026-12-01T03:00:00Z" in condition["message"]
    scene.server.put(A, instance(instance_ocid("patched"), maintenance_due=due.replace(day=2)))
    scene.poll(after=30)
    assert "2026-12-02T03:00:00Z" in scene.conditions(name)[MAINTENANCE_REBOOT_DUE]["message"]
    assert scene.api.count("patch_node_status") == 2


def test_a_cleared_state_sets_the_condition_false(scene: Scene) -> None:
    name = scene.node("spared")
    scene.server.put(A, instance(instance_ocid("spared"), "STOPPED"))
    scene.poll()
    assert scene.conditions(name)[STOPPED]["status"] == "True"
    scene.server.put(A, instance(instance_ocid("spared"), "RUNNING"))
    scene.poll(after=30)
    assert scene.conditions(name)[STOPPED]["status"] == "False"
    assert TERMINATING not in scene.conditions(name)  # never carried: not written at all


def test_instances_on_every_page_are_found(tmp_path: Path) -> None:
    scene = make_scene(tmp_path, page_size=2)
    with scene.server:
        names = [scene.node(f"n{i}") for i in range(5)]
        scene.server.put(A, *[instance(instance_ocid(f"n{i}"), "TERMINATING") for i in range(5)])
        scene.poll()
        assert all(scene.conditions(name)[TERMINATING]["status"] == "True" for name in names)
        pages = [seen.query.get("page") for seen in scene.server.requests()]
        assert len(pages) == 3 and pages[0] is None and len(set(pages)) == 3
        assert scene.metric("nodegate_oci_list_calls_total", outcome="ok") == 3


def test_a_throttled_compartment_is_counted_said_once_and_retried_with_backoff(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "nodegate.oci")
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.server.fail_next(429, "TooManyRequests", times=3)
    scene.poll()
    scene.poll(after=0.1)  # not due yet: the backoff holds it
    assert len(scene.server.requests()) == 1
    scene.poll(after=2)
    scene.poll(after=4)
    assert scene.metric("nodegate_oci_errors_total", kind="throttled") == 3
    said = [r for r in caplog.records if "ListInstances failed" in r.getMessage()]
    assert len(said) == 1
    assert TERMINATING not in scene.conditions(name)
    scene.poll(after=8)
    assert scene.conditions(name)[TERMINATING]["status"] == "True"
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_a_compartment_not_found_keeps_nothing_else_from_being_written(tmp_path: Path) -> None:
    scene = make_scene(tmp_path, compartments=(A, B))
    with scene.server:
        name = scene.node("doomed")
        scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))  # B: unknown
        scene.poll()
        assert scene.conditions(name)[TERMINATING]["status"] == "True"
        assert scene.metric("nodegate_oci_errors_total", kind="not_found") == 1


def test_a_request_signed_with_another_key_is_refused_and_counted_as_auth(
    scene: Scene, tmp_path: Path
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not the server's
    config = OciSettings(
        compartments=A,
        auth="api_key",
        config_file=scene.server.api_key_config(other),
        endpoint=scene.server.endpoint,
        ca_bundle=scene.server.ca_file,
    )
    calls: list[str] = []
    lister = ComputeLister(compute_client(config), 10, calls.append)
    scene.poller._lister = lister
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    assert calls == ["auth"]
    assert scene.server.requests(401) and TERMINATING not in scene.conditions(name)
    assert scene.metric("nodegate_oci_errors_total", kind="auth") == 1


def test_a_node_faking_or_erasing_its_condition_is_set_back_at_the_next_poll(
    scene: Scene,
) -> None:
    liar = scene.node("liar")
    doomed = scene.node("doomed")
    scene.server.put(
        A, instance(instance_ocid("liar")), instance(instance_ocid("doomed"), "TERMINATING")
    )
    scene.poll()
    # Each node writes its own status, as NodeRestriction lets it.
    scene.api.patch_node_status(
        liar, {"status": {"conditions": [{"type": TERMINATING, "status": "True"}]}}
    )
    scene.api.nodes[doomed]["status"]["conditions"] = []
    scene.poll(after=30)
    assert scene.conditions(liar)[TERMINATING]["status"] == "False"
    assert scene.conditions(doomed)[TERMINATING]["status"] == "True"


def test_after_a_restart_a_node_carrying_a_condition_is_read_not_rewritten(
    scene: Scene,
) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    scene.poller._messages.clear()
    scene.poll(after=30)
    assert scene.api.count("get_node") == 1
    assert scene.api.count("patch_node_status") == 1
    assert scene.conditions(name)[TERMINATING]["status"] == "True"


def test_nodes_of_other_providers_and_unlisted_instances_are_left_alone(scene: Scene) -> None:
    aws = scene.node("aws", provider_id="aws:///eu-west-1a/i-0abc")
    gone = scene.node("gone")
    scene.api.patch_node_status(
        gone, {"status": {"conditions": [{"type": TERMINATING, "status": "True"}]}}
    )
    scene.server.put(A)
    scene.poll()
    assert scene.api.count("patch_node_status") == 1  # the test's own
    assert scene.conditions(gone)[TERMINATING]["status"] == "True"
    assert not scene.conditions(aws)
    assert scene.metric("nodegate_oci_nodes_unlisted") == 1


def test_a_dry_run_says_what_it_would_set_and_writes_nothing(tmp_path: Path) -> None:
    scene = make_scene(tmp_path, dry_run=True)
    with scene.server:
        name = scene.node("doomed")
        scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
        scene.poll()
        assert scene.api.count("patch_node_status") == 0 and not scene.conditions(name)
        (event,) = scene.recorder.events
        assert event[1] == "NodegateDryRun" and "would set OCIInstanceTerminating=True" in event[2]


def test_a_server_error_is_counted_as_such_and_the_next_try_succeeds(scene: Scene) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.server.fail_next(503, "ServiceUnavailable")
    scene.poll()
    assert scene.metric("nodegate_oci_errors_total", kind="server") == 1
    scene.poll(after=2)
    assert scene.conditions(name)[TERMINATING]["status"] == "True"


def test_a_stalled_endpoint_is_a_timeout_and_blocks_the_poll_no_longer_than_the_timeout(
    tmp_path: Path,
) -> None:
    scene = make_scene(tmp_path, timeout_seconds=0.5)
    with scene.server:
        scene.server.put(A)
        scene.server.stall_next(2.0)
        started = time.monotonic()
        scene.poll()
        assert time.monotonic() - started < 1.5
        assert scene.metric("nodegate_oci_errors_total", kind="timeout") == 1


def test_a_refused_write_is_counted_said_once_and_retried_at_the_next_poll(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    forbidden = PermanentError("nodes/status is forbidden", status=403)
    scene.api.fail("patch_node_status", forbidden, forbidden)
    scene.poll()
    scene.poll(after=30)
    assert scene.metric("nodegate_oci_errors_total", kind="write") == 2
    assert sum("could not write OCI conditions" in r.getMessage() for r in caplog.records) == 1
    scene.poll(after=30)
    assert scene.conditions(name)[TERMINATING]["status"] == "True"


def test_a_node_changing_its_own_condition_is_decided_again_without_an_oci_call(
    scene: Scene,
) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    before = NodeState.from_k8s(scene.api.nodes[name])
    scene.api.patch_node_status(
        name,
        {"status": {"conditions": [{"type": TERMINATING, "status": "False", "reason": "Lie"}]}},
    )
    after = NodeState.from_k8s(scene.api.nodes[name])
    calls = len(scene.server.requests())
    scene.poller.node_changed(before, after)
    scene.poller.node_changed(after, after)  # a heartbeat: nothing of its own changed
    scene.poller.recheck_changed()
    assert scene.conditions(name)[TERMINATING]["status"] == "True"
    assert len(scene.server.requests()) == calls


def test_a_node_whose_annotations_are_full_still_gets_its_conditions_without_a_term(
    scene: Scene,
) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    full = PermanentError(f"Node is invalid: {ANNOTATIONS_TOO_LONG}: must have at most", 422)
    scene.api.fail("patch_node_status", full)
    scene.poll()
    sent = [patch for call, patch in scene.api.calls if call == "patch_node_status"]
    assert [patch.get("metadata") for patch in sent] == [
        None,
        {"annotations": {FENCE_ANNOTATION: None}},  # the token dropped, never grown
    ]
    assert scene.conditions(name)[TERMINATING]["status"] == "True"


def _erase(scene: Scene, name: str) -> None:
    """The node sets its own OCIInstanceTerminating False, and the informer tells the poller."""
    before = NodeState.from_k8s(scene.api.nodes[name])
    lie = {"type": TERMINATING, "status": "False", "reason": "Lie"}
    scene.api.patch_node_status(name, {"status": {"conditions": [lie]}})
    scene.poller.node_changed(before, NodeState.from_k8s(scene.api.nodes[name]))


def test_a_compartment_listed_in_an_earlier_round_still_answers_for_its_nodes(
    tmp_path: Path,
) -> None:
    scene = make_scene(tmp_path, compartments=(A, B))
    with scene.server:
        in_b = scene.node("b")
        scene.server.put(A, instance(instance_ocid("a"), "RUNNING"))
        scene.server.put(B, instance(instance_ocid("b"), "TERMINATING"))
        scene.server.fail_next(429, "TooManyRequests", times=1)  # A, so it falls due apart
        scene.poll()
        scene.poll(after=2)  # A alone is due (its backoff), and lists
        assert scene.metric("nodegate_oci_last_poll_timestamp_seconds") > 0
        _erase(scene, in_b)
        scene.poller.recheck_changed()
        assert scene.conditions(in_b)[TERMINATING]["status"] == "True"


def test_a_node_flipping_its_condition_is_corrected_once_per_window(scene: Scene) -> None:
    name = scene.node("doomed")
    scene.server.put(A, instance(instance_ocid("doomed"), "TERMINATING"))
    scene.poll()
    _erase(scene, name)
    scene.poller.recheck_changed()
    _erase(scene, name)
    scene.poller.recheck_changed()
    assert scene.conditions(name)[TERMINATING]["status"] == "False"  # waits for its window
    assert scene.api.count("patch_node_status") == 2 + 2  # ours twice, the node's twice
    scene.clock.now += RECHECK_SECONDS
    scene.poller.recheck_changed()
    assert scene.conditions(name)[TERMINATING]["status"] == "True"


@pytest.mark.parametrize("token", [lambda n: "again", lambda n: f"page-{n}"], ids=["same", "new"])
def test_paging_that_never_ends_fails_the_listing_instead_of_holding_the_poller(
    token: Callable[[int], str],
) -> None:
    calls = itertools.count()

    class EndlessPages:
        def list_instances(self, compartment_id: str, **kwargs: object) -> SimpleNamespace:
            return SimpleNamespace(data=[], next_page=token(next(calls)))

    with pytest.raises(OciError, match="paging does not end"):
        ComputeLister(EndlessPages(), page_size=100).list_instances(A)
    assert next(calls) <= MAX_PAGES + 2
