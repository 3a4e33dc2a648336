"""Every mark nodegate writes on a Node, in one place: the ownership and fence annotations, the
registration seal, the conditions it reports for OCI instances, and the records of each startup
gate (when it was lifted, on which boot, after what, with which signals). On the rules floor
because rules read some of them back (a gate's records are part of `StartupGate.reads`), and
every floor above writes or reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodegate.core.rules.model import StartupGate

OWNED_TAINTS_ANNOTATION = "nodegate.dev/owned-taints"
"""key:Effect of every taint nodegate manages on this node, so deleted rules still clean up."""

FENCE_ANNOTATION = "nodegate.dev/fence"
"""On every object the leader writes: the term of leadership the write was made under."""

REGISTRATION_SEAL_KEY = "nodegate.dev/registered-pool"
"""The seal the admission webhook puts on a Node it creates, valued with the pool it was born
in (`node_trust`): a node cannot forge it, and the reconciler removes it on its first write."""
REGISTRATION_SEAL_EFFECT = "PreferNoSchedule"
"""The softest effect: the seal lives from the Node's creation to the reconciler's first write
(about a second), while the node is not Ready anyway, and must never keep a pod off it."""

TERMINATING = "OCIInstanceTerminating"
"""True while the instance is TERMINATING or TERMINATED (a preemptible instance being reclaimed
goes TERMINATING about two minutes before it is gone)."""

MAINTENANCE_REBOOT_DUE = "OCIMaintenanceRebootDue"
"""True while the instance has a scheduled maintenance reboot; the message holds its due time
(ISO 8601, UTC)."""

STOPPED = "OCIInstanceStopped"
"""True while the instance is STOPPING or STOPPED (from the console or the API): its own type,
since a stop is not a termination (the instance may start again with its volumes)."""

GATE_COMPLETED = "completed.gate.nodegate.dev/"
"""+ gate name: when the gate was lifted (RFC 3339), as nodetaintshandler's completedAt."""
GATE_BOOT = "boot.gate.nodegate.dev/"
"""+ gate name: the node's bootID when the gate was lifted (a new one means a reboot)."""
GATE_REGATED = "regated.gate.nodegate.dev/"
"""+ gate name: when the reboot that put the gate back was first seen (the new bootID): this
life of the gate began then, so its timeout and minHold count from it."""
GATE_REBOOTED_AFTER = "rebooted-after.gate.nodegate.dev/"
"""+ gate name, on a re-gated node: the last moment the previous boot was known up (its lift, or
a later sight of its bootID). The reboot came after it, so readiness that began after it is of
the new boot, even if the re-gate was written later (nodegate down, failing over, throttled)."""

GATE_SIGNALS = "signals.gate.nodegate.dev/"
"""+ gate name: digests of the gate's readiness episodes shown when it was lifted (its init
pods' and its conditions'), so that after a reboot an episode still shown from the previous
boot is known as such even by a process that did not see it begin (`sightings`)."""

GATE_BUSY = "busy.gate.nodegate.dev/"
"""+ gate name: when the node was found running workload pods while the gate would have been
backfilled: a node with workloads is never gated afterwards, whichever process looks next."""


def gate_annotation_keys(gate: StartupGate) -> tuple[str, str, str, str, str, str]:
    return (
        GATE_COMPLETED + gate.name,
        GATE_BOOT + gate.name,
        GATE_REGATED + gate.name,
        GATE_REBOOTED_AFTER + gate.name,
        GATE_SIGNALS + gate.name,
        GATE_BUSY + gate.name,
    )
