"""A Node registered again under its name: whether a pod's status, written before this Node
object existed, is evidence for it. Pure; the node agents (`node_agents`) and the startup gates'
init pods (`gate_plan`) judge readiness with it alike.

Deleting a Node leaves the pods bound to its name running (the pod GC deletes them 40 s
later), and a kubelet restarted inside that grace (`kubectl delete node`, then a kubelet
restart) registers a new Node object of the name. The DaemonSet controller makes no new pod
(the old one is bound to the name), and a real kubelet (v1.36, tried) writes nothing new of a
pod whose state did not change: the pod stays Ready, its status last written before the new
Node was created. Counted only from the Node's creation, that readiness would hold the node for
ever; counted whatever, a new machine given the old one's name would be lifted by the old
machine's pod. What tells the two apart:

* **When nodegate saw the old Node object go** (`departure`): the machine it reported
  (`status.nodeInfo.bootID`, new at each boot, and `systemUUID`) and the pods Ready for it then,
  kept where nodes cannot write (the sightings record), so a restart in between loses nothing.
* **The new Node object reports the same machine in the same boot** (`same_machine`): a
  kubelet restart keeps the bootID; a reboot changes it (and the kubelet starts the pod's
  containers again and writes its status: counted then); another machine has another boot and
  another systemUUID. Then the recorded pods count, until they go.
* **For another machine** a recorded pod counts only once its status was written in a later
  second than nodegate saw it at the departure (the API server's stamps are whole seconds: the
  old machine's last write, in the second the new Node was created, would otherwise count).

Without a departure (nodegate did not watch the old Node go), a pod counts from the Node's
creation only: a machine that merely re-registered then waits for its kubelet to write the
pod again, or for the pod to be deleted and made again (docs/agents.md, "Registered again").

Trust: the bootID and systemUUID are written by the kubelet of the name (NodeRestriction: its
own Node only), which may write the status of the pods bound to it anyway; so a kubelet can
lift only its own name's taints with them, as it already can, never another node's. One
clock: API-server stamps against API-server stamps (a pod's status writes, the Node's
creation), and a pod's write against nodegate's own sight of a reboot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from nodegate.core.rules.node import NodeState

PodWrites = Mapping[str, datetime | None]
"""Pod uid -> when its status was last written (the API server's stamp; None: not known)."""


@dataclass(frozen=True)
class Departure:
    """A Node object nodegate saw go (deleted, or replaced under its name), with pods Ready for
    it then."""

    uid: str
    """The Node object that went."""
    boot_id: str
    system_uuid: str
    """The machine it last reported, in its boot."""
    pods: PodWrites = field(default_factory=dict)
    """The pods bound to its name that were Ready for it, and when each one's status had last
    been written, as nodegate saw it then."""
    left: datetime | None = None
    """When nodegate saw it go (its clock): which departures a full record keeps first."""


def departure(
    node: NodeState,
    ready: PodWrites,
    before: Departure | None,
    now: datetime,
    rebooted: datetime | None = None,
) -> Departure | None:
    """What to keep of the Node object `node` as it goes: the machine and boot it reported,
    and those of its `ready` pods (Ready, bound to its name) whose readiness counted for it
    (`of_this_node`, with the departure `before` it: a machine that re-registers twice in one
    boot still counts them) and was written after the boot before it was last seen
    (`rebooted`, nodegate's sight: a status the kubelet has not written again since a reboot
    is the previous boot's). None: nothing to keep (no boot reported, or no pod)."""
    if not node.boot_id:
        return None
    pods = {
        uid: written
        for uid, written in ready.items()
        if of_this_node(node, uid, written, before)
        and (rebooted is None or (written is not None and written > rebooted))
    }
    if not pods:
        return None
    return Departure(node.uid, node.boot_id, node.system_uuid, pods, now)


def same_machine(node: NodeState, departed: Departure) -> bool:
    """Whether `node`, another Node object than the one that went, reports its machine in the
    same boot (a bootID is random per boot: equal ones are one boot of one machine)."""
    return (
        node.uid != departed.uid
        and bool(departed.boot_id)
        and node.boot_id == departed.boot_id
        and node.system_uuid == departed.system_uuid
    )


def of_this_node(
    node: NodeState, pod: str, written: datetime | None, departed: Departure | None
) -> bool:
    """Whether the status of the pod `pod` bound to the node's name, last written at
    `written`, is evidence for this Node object: written since the Node was created (both
    stamped by the API server, in whole seconds: a write in the creation second counts), or
    the pod was Ready for the Node object before it, on this same machine in this same boot.
    A pod that was Ready for another machine counts only once written again after."""
    if departed is not None and pod in departed.pods and departed.uid != node.uid:
        if same_machine(node, departed):
            return True
        seen = departed.pods[pod]
        if seen is not None and (written is None or written <= seen):
            return False
    if node.created is None:
        return True
    return written is not None and written >= node.created


def still_deciding(
    departed: Departure, node: NodeState | None, bound: PodWrites | None
) -> Departure | None:
    """The departure with only the pods whose entry still changes a decision, given the Node of
    its name now (None: not registered again yet) and the pods bound to the name now (None: not
    known, the pod informers not synced): a pod gone is dropped; on the same machine, one
    written since the new Node was created (it counts without the entry); on another machine,
    one written again since (likewise). None: nothing left to keep."""
    if bound is None:
        return departed
    pods = {uid: seen for uid, seen in departed.pods.items() if uid in bound}
    if node is not None and node.uid != departed.uid and node.boot_id:
        same = same_machine(node, departed)
        pods = {uid: seen for uid, seen in pods.items() if _matters(node, bound[uid], seen, same)}
    return replace(departed, pods=pods) if pods else None


def _matters(node: NodeState, written: datetime | None, seen: datetime | None, same: bool) -> bool:
    if written is None or node.created is None:
        return True
    if same:
        return written < node.created
    return seen is not None and written <= seen
