"""OCI instance state as node conditions: providerIDs, the conditions an instance calls for, and
what is written (only nodegate's own types, only what differs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.oci_instances import (
    OWNED_TYPES,
    InstanceRecord,
    ObservedCondition,
    condition_writes,
    desired_conditions,
    parse_provider_id,
    utc_iso,
)
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.node_marks import MAINTENANCE_REBOOT_DUE, STOPPED, TERMINATING

OCID = "ocid1.instance.oc1.eu-frankfurt-1.antheljtabcdef123"


@pytest.mark.parametrize(
    ("provider_id", "expected"),
    [
        (f"oci://{OCID}", OCID),
        (OCID, OCID),
        ("oci://ocid1.instance.oc1.phx.abyhqljt3", "ocid1.instance.oc1.phx.abyhqljt3"),
        ("oci://ocid1.instance.oc2.iad.future.abc", "ocid1.instance.oc2.iad.future.abc"),
        ("aws:///eu-west-1a/i-0abc", None),
        ("azure:///subscriptions/x/virtualMachines/0", None),
        ("oci://ocid1.vnic.oc1.phx.abc", None),
        ("", None),
        ("oci://", None),
    ],
    ids=[
        "oke",
        "bare-ocid",
        "region-key",
        "future-use",
        "aws",
        "azure",
        "not-instance",
        "empty",
        "prefix-only",
    ],
)
def test_a_provider_id_names_its_instance_only_when_it_is_an_oci_instance(
    provider_id: str, expected: str | None
) -> None:
    assert parse_provider_id(provider_id) == expected


def running(**kwargs: object) -> InstanceRecord:
    return InstanceRecord(**{"id": OCID, "lifecycle_state": "RUNNING", **kwargs})  # type: ignore[arg-type]


def written(writes: tuple[object, ...]) -> dict[str, str]:
    return {w.type: w.status for w in writes}  # type: ignore[attr-defined]


@pytest.mark.parametrize("state", ["TERMINATING", "TERMINATED"])
def test_a_terminating_instance_sets_terminating_true(state: str) -> None:
    writes = condition_writes([], running(lifecycle_state=state))
    assert written(writes) == {TERMINATING: "True"}
    assert writes[0].transition and state in writes[0].message


@pytest.mark.parametrize("state", ["STOPPING", "STOPPED"])
def test_a_stopped_instance_has_its_own_condition_not_terminating(state: str) -> None:
    assert written(condition_writes([], running(lifecycle_state=state))) == {STOPPED: "True"}


def test_a_running_instance_with_nothing_to_report_costs_no_write() -> None:
    assert condition_writes([], running()) == ()


def test_a_maintenance_reboot_due_is_true_with_the_due_time_in_utc() -> None:
    due = datetime(2026, 12, 1, 4, 30, tzinfo=timezone(timedelta(hours=1)))
    (write,) = condition_writes([], running(time_maintenance_reboot_due=due))
    assert (write.type, write.status) == (MAINTENANCE_REBOOT_DUE, "True")
    assert "2026-12-01T03:30:00Z" in write.message


def test_a_moved_due_time_rewrites_the_message_without_a_transition() -> None:
    first = condition_writes(
        [], running(time_maintenance_reboot_due=datetime(2026, 12, 1, tzinfo=UTC))
    )
    now = [ObservedCondition(w.type, w.status, w.reason, w.message) for w in first]
    (moved,) = condition_writes(
        now, running(time_maintenance_reboot_due=datetime(2026, 12, 2, tzinfo=UTC))
    )
    assert "2026-12-02T00:00:00Z" in moved.message and not moved.transition


def test_a_cleared_state_sets_the_condition_false_with_a_transition() -> None:
    terminating = condition_writes([], running(lifecycle_state="TERMINATING"))
    now = [ObservedCondition(w.type, w.status, w.reason, w.message) for w in terminating]
    (cleared,) = condition_writes(now, running())
    assert (cleared.type, cleared.status, cleared.transition) == (TERMINATING, "False", True)


def test_a_node_faking_terminating_on_itself_is_set_back_to_false() -> None:
    faked = [ObservedCondition(TERMINATING, "True", "Faked", "by the node")]
    assert written(condition_writes(faked, running())) == {TERMINATING: "False"}


def test_a_node_erasing_or_falsifying_terminating_gets_it_back() -> None:
    instance = running(lifecycle_state="TERMINATING")
    assert written(condition_writes([], instance)) == {TERMINATING: "True"}
    falsified = [ObservedCondition(TERMINATING, "False", "InstanceRunning", "lie")]
    assert written(condition_writes(falsified, instance)) == {TERMINATING: "True"}


def test_an_unlisted_instance_changes_nothing_not_knowing_is_not_cleared() -> None:
    held = [ObservedCondition(TERMINATING, "True", "InstanceTerminating", "x")]
    assert condition_writes(held, None) == ()


def test_utc_iso_reads_a_naive_time_as_utc() -> None:
    assert utc_iso(datetime(2026, 1, 2, 3, 4, 5, 999)) == "2026-01-02T03:04:05Z"


STATES = st.sampled_from(
    [
        "RUNNING",
        "TERMINATING",
        "TERMINATED",
        "STOPPING",
        "STOPPED",
        "STARTING",
        "PROVISIONING",
        "MOVING",
    ]
)
TYPES = st.one_of(
    st.sampled_from(OWNED_TYPES), st.sampled_from(["Ready", "MemoryPressure"]), st.text(max_size=20)
)
CONDITIONS = st.lists(
    st.builds(
        ObservedCondition,
        TYPES,
        st.sampled_from(["True", "False", "Unknown"]),
        st.text(max_size=10),
        st.text(max_size=10),
    ),
    max_size=6,
)
"""A node may list a type twice (its own status is its to write)."""
INSTANCES = st.one_of(
    st.none(),
    st.builds(
        InstanceRecord,
        st.just(OCID),
        STATES,
        st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
    ),
)


@given(CONDITIONS, INSTANCES)
def test_only_owned_types_are_ever_written_and_a_second_look_writes_nothing(
    current: list[ObservedCondition], instance: InstanceRecord | None
) -> None:
    writes = condition_writes(current, instance)
    assert {w.type for w in writes} <= set(OWNED_TYPES)
    assert len({w.type for w in writes}) == len(writes)
    # The node after the write: the foreign conditions untouched, each written one merged into
    # the first of its type, as a strategic merge patch by type does.
    after = list(current)
    for w in writes:
        written = ObservedCondition(w.type, w.status, w.reason, w.message)
        first = next((i for i, c in enumerate(after) if c.type == w.type), None)
        if first is None:
            after.append(written)
        else:
            after[first] = written
    assert condition_writes(after, instance) == ()


def test_a_type_listed_twice_is_read_as_its_first_as_the_planner_reads_it() -> None:
    faked = ObservedCondition(TERMINATING, "True", "InstanceTerminating", "faked by the node")
    running = InstanceRecord(OCID, "RUNNING")
    [want] = [w for w in desired_conditions(running) if w.type == TERMINATING]
    ours = ObservedCondition(TERMINATING, want.status, want.reason, want.message)
    [write] = condition_writes([faked, ours], running)
    assert (write.type, write.status) == (TERMINATING, "False")


def test_the_oke_example_rules_read_the_conditions_nodegate_writes() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "oke-instance-events.yaml"
    rules = load_rules(example)
    read = {c.type for rule in rules.condition_taints for c in rule.conditions}
    assert set(OWNED_TYPES) <= read <= {*OWNED_TYPES, "Ready"}
