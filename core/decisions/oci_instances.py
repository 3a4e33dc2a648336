"""OCI instance state as node conditions: which of nodegate's own conditions a Node should carry,
given its Compute instance as ListInstances reports it. Pure: plain records in, plain data out.

OCI has no node termination handler (AWS, GCP and AKS each have one): a preemptible instance
being reclaimed goes to `TERMINATING`, a scheduled maintenance reboot shows as
`timeMaintenanceRebootDue`, a stop from the console or API as `STOPPING`/`STOPPED`. The
shell (`reconciler/nodes/oci/oci_instances.py`) lists the instances of the configured compartments,
maps each Node to its instance by providerID, and writes what `condition_writes` decides; rules
then act on these conditions like on any other (docs/migrating.md, the OKE recipe).

Ownership: nodegate owns exactly the `OWNED_TYPES`. Whatever else a node reports is never
written, whatever its type (a property test checks it). A condition whose state cleared is set
`False` (not removed): a False condition stops every `status: "True"` rule, keeps its
lastTransitionTime for a human, and a strategic merge patch can set it without reading or
replacing the node's other conditions.

A node may write its own status (NodeRestriction), so it can fake or erase these conditions on
itself. Every poll re-asserts the instance's state: a faked True is set back to False, an
erased or falsified True is written again. An instance that was not listed (its compartment not
configured or not answering, or the instance long gone) changes nothing: not knowing is never
taken for "cleared".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from nodegate.core.rules.node import format_time
from nodegate.core.rules.node_marks import MAINTENANCE_REBOOT_DUE, STOPPED, TERMINATING

OWNED_TYPES = (TERMINATING, MAINTENANCE_REBOOT_DUE, STOPPED)
"""Every condition type nodegate writes; no other is ever written."""

TERMINATING_STATES = frozenset({"TERMINATING", "TERMINATED"})
STOPPED_STATES = frozenset({"STOPPING", "STOPPED"})

PROVIDER_PREFIX = "oci://"
"""What OKE's cloud-controller-manager puts before the instance OCID (`oci://ocid1.instance...`)."""
_OCID = re.compile(r"^ocid1\.instance\.[a-z0-9]+\.[a-z0-9-]*(?:\.[^.]*)?\.[a-z0-9]+$")
"""An instance OCID: `ocid1.instance.<realm>.<region>[.<future use>].<unique id>` (the region's
key or name as the OCID spells it, `phx` or `eu-frankfurt-1`, may be empty). The compartment is
not in an OCID: it is known only once the instance is listed in one."""


@dataclass(frozen=True)
class InstanceRecord:
    """One instance as ListInstances reports it (the fields decided on)."""

    id: str
    lifecycle_state: str
    time_maintenance_reboot_due: datetime | None = None


@dataclass(frozen=True)
class ObservedCondition:
    """One condition as the Node carries it now."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ConditionWrite:
    """One owned condition to write. `transition`: its status changes (a new
    lastTransitionTime), or it is new on the node."""

    type: str
    status: str
    reason: str
    message: str
    transition: bool

    def describe(self) -> str:
        return f"{self.type}={self.status} ({self.reason})"


def parse_provider_id(provider_id: str) -> str | None:
    """The instance OCID a Node's providerID names: `oci://<instance OCID>` as OKE's CCM writes it
    (the bare OCID too, which the CCM also accepts); None for any other provider or shape."""
    ocid = provider_id.strip().removeprefix(PROVIDER_PREFIX)
    return ocid if _OCID.match(ocid) else None


def utc_iso(when: datetime) -> str:
    """ISO 8601 in UTC, to the second (`2026-12-01T03:00:00Z`); a time without a zone is UTC."""
    return format_time(when if when.tzinfo is not None else when.replace(tzinfo=UTC))


def desired_conditions(instance: InstanceRecord) -> tuple[ConditionWrite, ...]:
    """Every owned condition as `instance` says it should be (transition left False)."""
    due = instance.time_maintenance_reboot_due
    return (
        _in_state(TERMINATING, TERMINATING_STATES, instance),
        ConditionWrite(
            MAINTENANCE_REBOOT_DUE,
            "True" if due is not None else "False",
            "MaintenanceRebootScheduled" if due is not None else "NoMaintenanceRebootScheduled",
            (
                f"maintenance reboot of OCI instance {instance.id} due at {utc_iso(due)}"
                if due is not None
                else f"no maintenance reboot scheduled for OCI instance {instance.id}"
            ),
            False,
        ),
        _in_state(STOPPED, STOPPED_STATES, instance),
    )


def _in_state(kind: str, states: frozenset[str], instance: InstanceRecord) -> ConditionWrite:
    """The condition `kind`, True while the instance's lifecycle state is one of `states`."""
    state = instance.lifecycle_state.upper()
    status = "True" if state in states else "False"
    reason = "Instance" + state.title().replace("_", "")
    return ConditionWrite(kind, status, reason, f"OCI instance {instance.id} is {state}", False)


def condition_writes(
    current: Iterable[ObservedCondition], instance: InstanceRecord | None
) -> tuple[ConditionWrite, ...]:
    """The owned conditions to write on a Node whose conditions are `current` and whose
    instance is `instance` (None: not listed, so nothing is known and nothing is written).

    Only what differs is written: a True condition that is missing or differs in status,
    reason or message; a False one only where the node carries the type (an instance with
    nothing to report costs no write, and a condition nodegate or the node set earlier is
    cleared)."""
    if instance is None:
        return ()
    owned: dict[str, ObservedCondition] = {}
    for condition in current:  # the first of a type, as the planner reads it and a patch merges
        if condition.type in OWNED_TYPES:
            owned.setdefault(condition.type, condition)
    writes = []
    for want in desired_conditions(instance):
        have = owned.get(want.type)
        if have is None:
            if want.status == "True":
                writes.append(replace(want, transition=True))
            continue
        if (have.status, have.reason, have.message) != (want.status, want.reason, want.message):
            writes.append(replace(want, transition=have.status != want.status))
    return tuple(writes)
