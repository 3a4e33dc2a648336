"""The annotations nodegate writes on a node about each of its startup gates: when it was
lifted, on which boot, after what, with which signals. Named here, on the rules floor, because a
gate reads them back: they are part of what a gate reads from its node (`StartupGate.reads`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodegate.core.rules.model import StartupGate

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
