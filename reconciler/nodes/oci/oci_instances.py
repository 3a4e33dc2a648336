"""OCI instance state as node conditions, on the leader: list every configured compartment's
instances (paged, one batch per compartment and poll; never a call per node), decide each
Node's own conditions with `core/decisions/oci_instances.py`, write only what changed through
the fenced status write, and report each change (aggregated Event on the Node, metric, log).

It runs on a thread of its own and touches nothing the node workers wait for: a slow, throttled
or failing OCI API delays only these conditions. A compartment whose listing fails is said once
(log, `nodegate_oci_errors_total{kind}`) until it answers again, retried with backoff (from 0.8 s
doubling up to the poll interval), and its instances count as unknown meanwhile, so nothing is
cleared on the word of an API that did not answer.

What a Node carries is read from the node cache (status and reason); a condition's message is
not cached, so the message last written or read is remembered per Node, and a Node carrying an
owned condition whose message is not known (after a restart) is read once, fresh, before it is
decided on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from nodegate.core.decisions.fencing import UNFENCED
from nodegate.core.decisions.oci_instances import (
    OWNED_TYPES,
    ConditionWrite,
    InstanceRecord,
    ObservedCondition,
    condition_writes,
    parse_provider_id,
)
from nodegate.core.rules.node import NodeState, format_time
from nodegate.core.rules.node_marks import TERMINATING
from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import KubeError, NotFoundError, annotations_too_long
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.metrics import OciMetrics

log = logging.getLogger("nodegate.oci")

EVENT_REASON = "OCIInstanceConditions"
ErrorKind = Literal["auth", "not_found", "throttled", "server", "timeout", "other"]


RECHECK_SECONDS = 10.0
"""At most one correction per node this often on its own events (a node faking or erasing its
OCI conditions); whatever it does in between is set back at the next poll."""


class OciError(Exception):
    """A ListInstances call failed; `kind` says how (each kind is counted and said once)."""

    def __init__(self, kind: ErrorKind, message: str, request_id: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.request_id = request_id


class InstanceLister(Protocol):
    """What the poller needs from OCI: every instance of one compartment (all pages). The SDK's
    is `oci_compute.ComputeLister`; it raises `OciError`."""

    def list_instances(self, compartment_id: str) -> list[InstanceRecord]: ...


@dataclass
class _Compartment:
    """One compartment's schedule: when it is listed next, and how its failures back off."""

    id: str
    backoff: Backoff
    due: float = 0.0
    failing: str | None = None
    """The kind of error said for it (None: it answered last time)."""


class OciInstanceConditions:
    """The poller. `api`: the leader's fenced client, the only type it takes, so it cannot be
    handed the raw one (whose writes carry no term and skip the fence). `nodes()`: the cached
    Nodes (None until the cache is synced)."""

    def __init__(
        self,
        lister: InstanceLister,
        compartments: Iterable[str],
        poll_seconds: float,
        api: FencedApi,
        recorder: Recorder,
        metrics: OciMetrics,
        nodes: Callable[[], list[NodeState] | None],
        clock: Callable[[], datetime],
        dry_run: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lister = lister
        self._poll = poll_seconds
        self._compartments = [
            _Compartment(c, Backoff(cap_seconds=poll_seconds)) for c in compartments
        ]
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._nodes = nodes
        self._clock = clock
        self._dry_run = dry_run
        self._monotonic = monotonic
        self._messages: dict[str, dict[str, tuple[str, str, str]]] = {}
        """node uid -> type -> (status, reason, message) last written or read."""
        self._listings: dict[str, dict[str, InstanceRecord]] = {}
        """Each compartment's instances by OCID, as its latest listing gave them; a compartment
        whose latest listing failed has none (its nodes are left alone, not decided from an
        old listing). Compartments fall due at different moments, so a round lists some."""
        self._changed: set[str] = set()
        """Nodes (name) whose own OCI conditions changed since they were last decided."""
        self._corrected: dict[str, float] = {}
        """When each node was last corrected on its own event (monotonic)."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._write_failing: set[str] = set()
        """Nodes (uid) whose failing write was said."""

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop`; between polls, re-decide the nodes whose OCI conditions someone
        else changed. Every exception of a round is logged and the loop goes on."""

        def wake_on_stop() -> None:
            stop.wait()
            self._wake.set()

        threading.Thread(target=wake_on_stop, name="oci-stop", daemon=True).start()
        while not stop.is_set():
            try:
                self.recheck_changed()
                self.poll_once()
            except Exception:  # a round must never end the loop (STYLE 18)
                log.exception("OCI poll failed")
            self._wake.wait(self._next_wait())
            self._wake.clear()

    def node_changed(self, old: NodeState | None, new: NodeState) -> None:
        """A node event (the informer's thread): if the node's own OCI conditions changed and
        its instance was listed, it is decided again at once, not at the next poll, so a node
        that fakes or erases them on itself is corrected within a moment."""
        before = _owned(old) if old is not None else None
        if before == _owned(new):
            return
        ocid = parse_provider_id(new.provider_id)
        if ocid is None:
            return
        with self._lock:
            if self._listed(ocid) is None:
                return
            self._changed.add(new.name)
        self._wake.set()

    def _listed(self, ocid: str) -> InstanceRecord | None:
        """The instance as its compartment's latest listing gave it (the caller holds the
        lock)."""
        return next((listing[ocid] for listing in self._listings.values() if ocid in listing), None)

    def recheck_changed(self) -> None:
        """Decide again the nodes `node_changed` saw, with the last listing (no OCI call). A
        node flipping its own conditions must not drive our writes: a node corrected less than
        RECHECK_SECONDS ago waits for the end of that window."""
        now = self._monotonic()
        with self._lock:
            names = {n for n in self._changed if self._window_end(n) <= now}
            self._changed -= names
        nodes = self._nodes()
        if not names or nodes is None:
            return
        for node in nodes:
            if node.name in names:
                ocid = parse_provider_id(node.provider_id)
                with self._lock:
                    found = self._listed(ocid) if ocid is not None else None
                if found is not None and self._node(node, found):
                    with self._lock:
                        self._corrected[node.name] = now

    def _window_end(self, name: str) -> float:
        return self._corrected.get(name, -RECHECK_SECONDS) + RECHECK_SECONDS

    def _next_wait(self) -> float:
        now = self._monotonic()
        with self._lock:
            waiting = [self._window_end(name) for name in self._changed]
        return max(0.05, min([c.due for c in self._compartments] + waiting) - now)

    def poll_once(self) -> None:
        """List the compartments that are due, then decide and write every Node whose
        instance was listed."""
        nodes = self._nodes()
        if nodes is None:
            return
        now = self._monotonic()
        due = [c for c in self._compartments if c.due <= now]
        if not due:
            return
        for compartment in due:
            instances = self._list(compartment)
            with self._lock:
                if instances is None:
                    self._listings.pop(compartment.id, None)
                else:
                    self._listings[compartment.id] = {i.id: i for i in instances}
        with self._lock:
            listed = {ocid: i for listing in self._listings.values() for ocid, i in listing.items()}
            complete = len(self._listings) == len(self._compartments)
        self._metrics.instances.set(len(listed))
        if complete:
            self._metrics.last_poll.set(time.time())
        unlisted = 0
        for node in nodes:
            ocid = parse_provider_id(node.provider_id)
            if ocid is None:
                continue
            found = listed.get(ocid)
            if found is None:
                unlisted += 1
                continue
            self._node(node, found, verify=True)
        self._metrics.nodes_unlisted.set(unlisted)
        alive = {node.uid for node in nodes}
        self._messages = {uid: known for uid, known in self._messages.items() if uid in alive}
        names = {node.name for node in nodes}
        with self._lock:
            self._corrected = {name: at for name, at in self._corrected.items() if name in names}
        self._write_failing &= alive

    def _list(self, compartment: _Compartment) -> list[InstanceRecord] | None:
        try:
            instances = self._lister.list_instances(compartment.id)
        except OciError as err:
            self._metrics.errors.labels(err.kind).inc()
            delay = compartment.backoff.next_delay()
            compartment.due = self._monotonic() + delay
            if compartment.failing != err.kind:
                compartment.failing = err.kind
                log.error(
                    "OCI ListInstances failed; retrying with backoff (said once until it answers)",
                    extra={
                        "compartment": compartment.id,
                        "kind": err.kind,
                        "error": str(err),
                        "opc_request_id": err.request_id,
                        "retry_in_seconds": round(delay, 2),
                    },
                )
            return None
        if compartment.failing is not None:
            log.info(
                "OCI ListInstances answers again",
                extra={"compartment": compartment.id, "was": compartment.failing},
            )
        compartment.failing = None
        compartment.backoff.reset()
        compartment.due = self._monotonic() + self._poll
        return instances

    def _node(self, node: NodeState, instance: InstanceRecord, verify: bool = False) -> bool:
        """Whether a write was sent. `verify` (a poll): a node carrying an owned condition that
        is True is read again, so a message it forged (the cache holds no messages) is set back
        at the poll."""
        current = self._observed(node, verify)
        if current is None:
            return False
        writes = condition_writes(current, instance)
        if not writes:
            return False
        try:
            self._write(node, writes)
        except NotFoundError:
            self._messages.pop(node.uid, None)
        # Counted, said once per node until a write lands, retried at the next poll (a missing
        # nodes/status grant would otherwise say it for every node at every poll).
        except KubeError as err:
            self._metrics.errors.labels("write").inc()
            if node.uid not in self._write_failing:
                self._write_failing.add(node.uid)
                log.warning(
                    "could not write OCI conditions; retried at each poll (said once)",
                    extra={"node": node.name, "error": str(err)},
                )
        else:
            self._write_failing.discard(node.uid)
        return True

    def _observed(self, node: NodeState, verify: bool = False) -> list[ObservedCondition] | None:
        """The node's owned conditions with their messages: from the cache and what was last
        written or read, or read fresh when a message is not known (or `verify`, for a True
        one). None: the node is gone."""
        if verify and any(c.type in OWNED_TYPES and c.status == "True" for c in node.conditions):
            return self._read(node)
        known = self._messages.get(node.uid, {})
        observed = []
        for condition in node.conditions:
            if condition.type not in OWNED_TYPES:
                continue
            remembered = known.get(condition.type)
            if remembered is None or remembered[:2] != (condition.status, condition.reason):
                return self._read(node)
            observed.append(
                ObservedCondition(condition.type, condition.status, condition.reason, remembered[2])
            )
        return observed

    def _read(self, node: NodeState) -> list[ObservedCondition] | None:
        try:
            raw = self._api.get_node(node.name)
        except KubeError as err:
            log.warning("could not read node", extra={"node": node.name, "error": str(err)})
            return None
        if raw is None or (raw.get("metadata") or {}).get("uid") != node.uid:
            return None
        observed = [
            ObservedCondition(
                str(c.get("type")),
                str(c.get("status")),
                str(c.get("reason") or ""),
                str(c.get("message") or ""),
            )
            for c in (raw.get("status") or {}).get("conditions") or []
            if c.get("type") in OWNED_TYPES
        ]
        self._messages[node.uid] = {c.type: (c.status, c.reason, c.message) for c in observed}
        return observed

    def _write(self, node: NodeState, writes: tuple[ConditionWrite, ...]) -> None:
        summary = "; ".join(w.describe() for w in writes)
        warning = any(w.status == "True" and w.type == TERMINATING for w in writes)
        if self._dry_run:
            log.info(
                "dry run: would set OCI conditions", extra={"node": node.name, "change": summary}
            )
            self._recorder.on_node(
                node.name, node.uid, "NodegateDryRun", f"would set {summary}", warning=False
            )
            return
        patch = self._patch(node, writes)
        try:
            self._api.patch_node_status(node.name, patch)
        except KubeError as err:
            if not annotations_too_long(err):
                raise
            # A node that filled its annotations to the limit would refuse the fence's token,
            # and so its own conditions: they go without a term (fenced on the client only), as
            # a full node's taints do (reconcile.py, `_taints_alone`).
            unfenced = {**patch, "metadata": {"annotations": dict(UNFENCED)}}
            self._api.patch_node_status(node.name, unfenced)
        remembered = self._messages.setdefault(node.uid, {})
        for write in writes:
            remembered[write.type] = (write.status, write.reason, write.message)
            self._metrics.condition_writes.labels(write.type, write.status).inc()
        log.info("set OCI conditions", extra={"node": node.name, "change": summary})
        message = "set " + "; ".join(f"{w.describe()}: {w.message}" for w in writes)
        self._recorder.on_node(node.name, node.uid, EVENT_REASON, message, warning=warning)

    def _patch(self, node: NodeState, writes: tuple[ConditionWrite, ...]) -> RawObject:
        """A strategic merge patch of the written conditions alone (merged by type); a
        condition whose status does not change keeps its lastTransitionTime."""
        now = format_time(self._clock())
        cached = {c.type: c for c in node.conditions}
        conditions = []
        for write in writes:
            since = cached[write.type].last_transition_time if write.type in cached else None
            conditions.append(
                {
                    "type": write.type,
                    "status": write.status,
                    "reason": write.reason,
                    "message": write.message,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": (
                        now if write.transition or since is None else format_time(since)
                    ),
                }
            )
        return {"status": {"conditions": conditions}}


def _owned(node: NodeState) -> tuple[tuple[str, str, str], ...]:
    """The node's own OCI conditions as the cache holds them (type, status, reason)."""
    return tuple(
        sorted((c.type, c.status, c.reason) for c in node.conditions if c.type in OWNED_TYPES)
    )
