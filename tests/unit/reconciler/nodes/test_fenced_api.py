"""Every write of the leader goes through the fence and carries its term; a refusal by the API
server's fence policy is read for who is behind. A fake API that checks terms as the policy
does; the e2e tier (tests/e2e/test_server_fencing.py) runs the real policy."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.fencing import (
    REFUSAL_MARK,
)
from nodegate.core.rules.node_marks import FENCE_ANNOTATION
from nodegate.reconciler.kit.errors import ConflictError, PermanentError, TemporaryError
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.nodes.fence.fenced_api import STALE_VIEW_SECONDS, FencedApi, FencedError
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node

NS = "nodegate-system"
POLICY = "nodegate-reconciler-fence"


class FencingApi(FakeApi):
    """Judges writes as the fence policy does: the term the object carries once written (a
    patch merges into what is stored; a delete is judged on the object as it was) must be
    `view`, the API server's view of the Lease's term, or none at all (None: no Lease in its
    view, and the binding allows every write)."""

    def __init__(self) -> None:
        super().__init__()
        self.view: str | None = "me/1"
        self.sent = 0
        """Writes that reached this API server (refused ones included)."""

    def _judge(self, stored: RawObject | None, change: RawObject, merged: bool) -> None:
        self.sent += 1
        annotations = dict(((stored or {}).get("metadata") or {}).get("annotations") or {})
        written = (change.get("metadata") or {}).get("annotations") or {}
        annotations = {**annotations, **written} if merged else dict(written)
        carried = annotations.get(FENCE_ANNOTATION) or ""
        if self.view is not None and carried not in ("", self.view):
            raise refused(f"{REFUSAL_MARK} lease={self.view} write={carried} (...)")

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        self._judge(self.nodes.get(name), merge_patch, merged=True)
        super().patch_node(name, merge_patch)

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        self._judge(None, body, merged=False)
        return super().create_configmap(namespace, body)

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        self._judge(None, body, merged=False)
        return super().replace_configmap(namespace, name, body)

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        self._judge(self.configmaps.get((namespace, name)), merge_patch, merged=True)
        return super().patch_configmap(namespace, name, merge_patch)

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        self._judge(None, self.configmaps[(namespace, name)], merged=False)
        super().delete_configmap(namespace, name, resource_version)


def refused(message: str, policy: str = POLICY) -> PermanentError:
    """A refusal as the reconciler's client raises it: the API server's Status is its cause."""
    answer = ApiException(status=403, reason="Forbidden")
    answer.body = json.dumps(
        {
            "kind": "Status",
            "code": 403,
            "message": f"nodes \"n1\" is forbidden: ValidatingAdmissionPolicy '{policy}' with "
            f"binding '{policy}' denied request: {message}",
        }
    )
    error = PermanentError("403 Forbidden", 403)
    error.__cause__ = answer
    return error


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def leading(term: tuple[str, int] = ("me", 1), clock: Clock | None = None) -> LeaderFence:
    fence = LeaderFence(10, clock or Clock())
    fence.renewed(clock.now if clock else 100.0, term)
    return fence


def fenced(
    api: FakeApi,
    fence: LeaderFence,
    clock: Clock | None = None,
    lease: tuple[str, int] | None = None,
) -> tuple[FencedApi, list[str]]:
    """The API through `fence`; `lease`: the Lease as read now (None: someone else's)."""
    refusals: list[str] = []
    writes = FencedApi(
        api, fence, refusals.append, POLICY, lambda term: term == lease, clock or Clock()
    )
    return writes, refusals


def patch(api: FakeApi, name: str = "n1") -> RawObject:
    version = api.nodes[name]["metadata"]["resourceVersion"]
    return {"metadata": {"resourceVersion": version, "labels": {"a": "b"}}}


def test_a_node_write_carries_the_term_it_is_made_under() -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    writes, _ = fenced(api, leading())

    writes.patch_node("n1", patch(api))

    assert api.nodes["n1"]["metadata"]["annotations"][FENCE_ANNOTATION] == "me/1"
    assert api.nodes["n1"]["metadata"]["labels"] == {"a": "b"}


def test_configmap_writes_carry_the_term_and_keep_their_own_annotations() -> None:
    api = FencingApi()
    writes, _ = fenced(api, leading())
    body: RawObject = {"metadata": {"name": "c", "annotations": {"x": "y"}}, "data": {}}

    created = writes.create_configmap(NS, body)
    writes.replace_configmap(NS, "c", {**created, "data": {"k": "v"}})

    stored = api.configmaps[(NS, "c")]
    assert stored["metadata"]["annotations"] == {"x": "y", FENCE_ANNOTATION: "me/1"}
    assert stored["data"] == {"k": "v"}


def test_without_leader_election_writes_are_sent_as_they_are() -> None:
    api = FakeApi()
    api.add_node(fake_node("n1"))
    writes, _ = fenced(api, LeaderFence(None))
    body = patch(api)

    writes.patch_node("n1", body)

    assert api.calls[-1] == ("patch_node", body)
    assert "annotations" not in api.nodes["n1"]["metadata"]


def test_no_write_starts_once_the_client_side_fence_has_lapsed() -> None:
    api, clock = FencingApi(), Clock()
    api.add_node(fake_node("n1"))
    writes, _ = fenced(api, leading(clock=clock), clock)
    clock.now += 10

    with pytest.raises(TemporaryError, match="fence does not hold"):
        writes.patch_node("n1", patch(api))
    assert api.count("patch_node") == 0


def test_a_write_refused_because_another_replica_leads_ends_this_term(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    fence = leading(("me", 1))
    writes, refusals = fenced(api, fence)
    api.view = "other/2"

    with caplog.at_level(logging.ERROR, "nodegate.fence"):
        with pytest.raises(FencedError):
            writes.patch_node("n1", patch(api))
        assert not fence.holds()
        with pytest.raises(TemporaryError, match="fence does not hold"):  # never retried
            writes.patch_node("n1", patch(api))

    assert refusals == ["deposed"]
    assert api.sent == 1
    assert [r.message for r in caplog.records].count(
        "the API server refused a write: this replica no longer leads; it stops writing "
        "(logged once)"
    ) == 1


def test_a_write_refused_before_the_api_server_saw_the_takeover_is_retried_later() -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    fence = leading(("me", 2))
    writes, refusals = fenced(api, fence, lease=("me", 2))
    api.view = "old/1"  # its view of the Lease lags our takeover

    with pytest.raises(FencedError) as refused:
        writes.patch_node("n1", patch(api))
    assert isinstance(refused.value, TemporaryError)
    assert fence.holds()
    api.view = "me/2"
    writes.patch_node("n1", patch(api))

    assert refusals == ["lagging"]
    assert api.nodes["n1"]["metadata"]["annotations"][FENCE_ANNOTATION] == "me/2"


def test_a_refusal_by_another_policy_is_passed_on_as_it_is() -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    api.fail("patch_node", refused(f"{REFUSAL_MARK} lease=evil/99 write=x", policy="vendor"))
    fence = leading()
    writes, refusals = fenced(api, fence)

    with pytest.raises(PermanentError) as refusal:
        writes.patch_node("n1", patch(api))

    assert not isinstance(refusal.value, FencedError)
    assert refusals == []
    assert fence.holds()


def test_a_view_that_lags_for_seconds_is_said_to_be_stale(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = FencingApi(), Clock()
    api.add_node(fake_node("n1"))
    fence = leading(("me", 2), clock)
    writes, refusals = fenced(api, fence, clock, lease=("me", 2))
    api.view = "old/1"

    with caplog.at_level(logging.ERROR, "nodegate.fence"):
        for _ in range(3):
            with pytest.raises(FencedError):
                writes.patch_node("n1", patch(api))
            clock.now += STALE_VIEW_SECONDS / 2
            fence.renewed(clock.now, ("me", 2))

    assert refusals == ["lagging", "lagging", "stale_view"]
    assert any("kubernetes/kubernetes#130887" in r.message for r in caplog.records)


def test_an_accepted_write_ends_the_lag() -> None:
    api, clock = FencingApi(), Clock()
    api.add_node(fake_node("n1"))
    fence = leading(("me", 2), clock)
    writes, refusals = fenced(api, fence, clock, lease=("me", 2))
    api.view = "old/1"
    with pytest.raises(FencedError):
        writes.patch_node("n1", patch(api))
    api.view = "me/2"
    writes.patch_node("n1", patch(api))
    clock.now += STALE_VIEW_SECONDS
    fence.renewed(clock.now, ("me", 2))
    api.view = "old/1"

    with pytest.raises(FencedError):
        writes.patch_node("n1", patch(api))

    assert refusals == ["lagging", "lagging"]


def test_a_refusal_that_is_not_the_fences_is_passed_on_as_it_is() -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    api.fail("patch_node", PermanentError("403 Forbidden: cannot patch nodes", 403))
    writes, refusals = fenced(api, leading())

    with pytest.raises(PermanentError) as refused:
        writes.patch_node("n1", patch(api))

    assert not isinstance(refused.value, FencedError)
    assert refusals == []


def stored_record(api: FakeApi, annotations: dict[str, str] | None = None) -> RawObject:
    body: dict[str, Any] = {"metadata": {"name": "r", "annotations": annotations or {}}}
    return FakeApi.create_configmap(api, NS, {**body, "data": {"k": "v"}})  # as it was stored


def test_a_delete_marks_the_object_with_the_term_first_so_the_policy_can_check_it() -> None:
    api = FencingApi()
    record = stored_record(api, {FENCE_ANNOTATION: "earlier/0"})
    writes, _ = fenced(api, leading())

    writes.delete_configmap(NS, "r", record["metadata"]["resourceVersion"])

    assert (NS, "r") not in api.configmaps
    assert [c for c, _ in api.calls][-2:] == ["patch_configmap", "delete_configmap"]


def test_a_delete_of_an_object_changed_since_it_was_read_is_a_conflict() -> None:
    api = FencingApi()
    read_version = str(stored_record(api)["metadata"]["resourceVersion"])
    writes, _ = fenced(api, leading())
    api.patch_configmap(NS, "r", {"metadata": {"annotations": {FENCE_ANNOTATION: "me/1"}}})

    with pytest.raises(ConflictError):
        writes.delete_configmap(NS, "r", read_version)

    assert (NS, "r") in api.configmaps


def test_without_a_lease_to_read_the_refusals_numbers_decide() -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    fence = leading(("me", 2))

    def unreadable(_term: tuple[str, int]) -> bool:
        raise TemporaryError("the Lease cannot be read")

    refusals: list[str] = []
    writes = FencedApi(api, fence, refusals.append, POLICY, unreadable, Clock())
    api.view = "old/1"
    with pytest.raises(FencedError):
        writes.patch_node("n1", patch(api))
    api.view = "other/3"
    with pytest.raises(FencedError):
        writes.patch_node("n1", patch(api))

    assert refusals == ["lagging", "deposed"]
    assert not fence.holds()


@pytest.mark.parametrize(
    ("mine", "lease", "view", "verdict"),
    [
        # Someone deleted the Lease and this leader made it again, numbering from 0: an API
        # server whose view still holds the old Lease names a higher number.
        (("me", 0), ("me", 0), "old/7", "lagging"),
        # Another replica made it again: the number alone would say the API server lags.
        (("me", 5), ("other", 0), "other/0", "deposed"),
    ],
    ids=["still-ours-though-numbered-higher", "taken-though-numbered-lower"],
)
def test_a_refusal_is_judged_by_who_holds_the_lease_now_not_by_its_numbers(
    mine: tuple[str, int], lease: tuple[str, int], view: str, verdict: str
) -> None:
    api = FencingApi()
    api.add_node(fake_node("n1"))
    fence = leading(mine)
    writes, refusals = fenced(api, fence, lease=lease)
    api.view = view

    with pytest.raises(FencedError):
        writes.patch_node("n1", patch(api))

    assert refusals == [verdict]
    assert fence.holds() is (verdict == "lagging")


def test_a_delete_is_not_sent_once_the_fence_has_lapsed_after_the_mark() -> None:
    clock = Clock()

    class SlowMark(FencingApi):
        def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
            marked = super().patch_configmap(namespace, name, merge_patch)
            clock.now += 60  # the process was paused after the mark
            return marked

    api = SlowMark()
    record = stored_record(api)
    writes, _ = fenced(api, leading(clock=clock), clock)

    with pytest.raises(TemporaryError, match="fence does not hold"):
        writes.delete_configmap(NS, "r", record["metadata"]["resourceVersion"])

    assert (NS, "r") in api.configmaps


def test_a_write_may_take_only_until_a_standby_could_lead() -> None:
    """Renewed at 100 s (renew deadline 10 s, lease 15 s): writes may start until 110 s and a
    standby may lead from 115 s on, so a write started at 108 s must end within 7 s."""
    api, clock = FencingApi(), Clock()
    api.add_node(fake_node("n1"))
    fence = LeaderFence(10, clock, lease_duration_seconds=15)
    fence.renewed(100.0, ("me", 1))
    writes, _ = fenced(api, fence, clock)
    clock.now = 108.0

    writes.patch_node("n1", patch(api))

    assert api.write_deadlines == [7.0]
