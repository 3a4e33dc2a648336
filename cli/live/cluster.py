"""The day-2 commands' one door to the cluster: read-only calls, answered as plain data.

`nodegate status|explain NODE|plan` read here what the reconciler reads (Nodes in pages, the
rules ConfigMap, the gates' init pods, the label records, the taint history) and what it
publishes (its Lease, its status record, its Warning Events), through the reconciler's own
client layer (`reconciler.kit`) and parsers (`NodeState.from_k8s`, `slim_pod`,
`stored_record`, `decode_history`). Nothing here decides anything, and nothing writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.decisions.eviction_budget import Grant
from nodegate.core.decisions.init_pods import pod_source, pods_read, sighted, slim_pod, spec_signals
from nodegate.core.decisions.persisted_labels import (
    QUARANTINE_LABEL,
    QUARANTINE_REASON_ANNOTATION,
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    StoredRecord,
    stored_record,
)
from nodegate.core.decisions.re_registration import Departure
from nodegate.core.decisions.sightings import ConditionKey, Sighting
from nodegate.core.objects.eviction_ledger import LEDGER_CONFIGMAP, LedgerError, decode_ledger
from nodegate.core.objects.installation import RULES_KEY, is_quarantine_of
from nodegate.core.objects.sightings_record import (
    SIGHTINGS_CONFIGMAP,
    SightingsRecordError,
    decode_departures,
    decode_sightings,
)
from nodegate.core.objects.status_record import (
    STATUS_CONFIGMAP,
    ReconcilerStatus,
    StatusRecordError,
    decode_status,
    rules_of_record,
)
from nodegate.core.objects.taint_history import HISTORY_CONFIGMAP, HistoryError, decode_history
from nodegate.core.reports.cluster_status import EventView, LeaseView, RecordsView, RulesSourceView
from nodegate.core.reports.node_waits import InitPod
from nodegate.core.rules.cluster_reads import cluster_reads
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.merge import (
    OBJECTS_SOURCE,
    Merged,
    RulesObject,
    merge,
    object_of_document,
    parts_of,
)
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState, parse_time
from nodegate.core.text.errors import RulesError
from nodegate.core.views.csi_nodes import registered_drivers, slim_csinode
from nodegate.core.views.daemon_sets import DAEMON_SET_POD_LABEL
from nodegate.core.views.pods import is_workload_pod
from nodegate.defaults.names import DEFAULT_LEASE, DEFAULT_NAMESPACE, DEFAULT_RULES_CONFIGMAP
from nodegate.reconciler.kit.client import REQUEST_TIMEOUT_SECONDS, load_api_client
from nodegate.reconciler.kit.errors import KubeError, NotFoundError
from nodegate.reconciler.kit.kube import KubeApi, RawObject, Selection
from nodegate.reconciler.kit.lease import KubeLeaseApi, LeaseRecord
from nodegate.reconciler.kit.server_clock import AnchoredClock

PAGE_SIZE = 500
"""Nodes per LIST page: 5,000 nodes are ten calls, and no page holds them all in memory twice."""
EVENTS_SHOWN = 10
EVENT_SELECTOR = "type=Warning,reportingComponent=nodegate.dev/reconciler"


@dataclass(frozen=True)
class Where:
    """Where the reconciler keeps its things (the shipped manifests' names by default)."""

    namespace: str = DEFAULT_NAMESPACE
    rules_configmap: str | None = None
    """namespace/name of the rules ConfigMap; default `<namespace>/nodegate-rules`."""
    lease: str = DEFAULT_LEASE

    @property
    def rules_ref(self) -> tuple[str, str]:
        namespace, _, name = (
            self.rules_configmap or f"{self.namespace}/{DEFAULT_RULES_CONFIGMAP}"
        ).partition("/")
        return namespace, name


@dataclass(frozen=True)
class ConfigMapRules:
    """The rules source's text, parsed (or why it cannot be): the rules ConfigMap's, or the
    NodeRules objects merged."""

    view: RulesSourceView
    rules: NodeRules | None
    text: str


ApiClient = client.ApiClient


def api_client(kubeconfig: Path | None, context: str | None) -> ApiClient:
    """As kubectl finds its cluster: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; in a
    Pod without any of them, its service account."""
    if kubeconfig is not None:
        return load_api_client(str(kubeconfig), context=context)
    configured = os.environ.get("KUBECONFIG") or "~/.kube/config"
    paths = [Path(p).expanduser() for p in configured.split(os.pathsep) if p]
    found = any(path.is_file() for path in paths)
    if not found and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return load_api_client(None)
    return load_api_client(os.pathsep.join(map(str, paths)), context=context)


class RecordUnreadableError(Exception):
    """One of the reconciler's records cannot be decoded (the message names it)."""


class RulesInForceUnknownError(Exception):
    """The reconciler's status record exists but cannot say which rules are in force."""


@dataclass(frozen=True)
class InForce:
    """The rules in force, as the reconciler's status record publishes them."""

    rules: NodeRules | None
    """None: no rules are in force yet (generation 0; an update may be held)."""
    which: str
    status: ReconcilerStatus


class Cluster:
    def __init__(self, api_client: client.ApiClient, where: Where) -> None:
        self.where = where
        self._api = KubeApi(api_client)
        self._leases = KubeLeaseApi(api_client, REQUEST_TIMEOUT_SECONDS)
        self._read: dict[str, Mapping[str, Any] | None] = {}

    # --- nodes ----------------------------------------------------------------------------------

    def nodes(self, on_page: Callable[[int], None] = lambda _n: None) -> list[NodeState]:
        """Every Node, in pages of PAGE_SIZE (one paginated LIST); `on_page(count so far)`."""
        found: list[NodeState] = []
        for items in pages(self._api, Selection("Node")):
            found += [NodeState.from_k8s(raw) for raw in items]
            on_page(len(found))
        return found

    def node(self, name: str) -> NodeState | None:
        raw = self._api.get_node(name)
        return NodeState.from_k8s(raw) if raw is not None else None

    # --- the rules ------------------------------------------------------------------------------

    def rules_configmap(self) -> ConfigMapRules:
        namespace, name = self.where.rules_ref
        reference = f"{namespace}/{name}"
        raw = self._api.read_configmap(namespace, name)
        if raw is None:
            view = RulesSourceView(reference, None, ("the rules ConfigMap does not exist",))
            return ConfigMapRules(view, None, "")
        text = (raw.get("data") or {}).get(RULES_KEY)
        if not isinstance(text, str):
            problem = f"the ConfigMap has no key '{RULES_KEY}'"
            return ConfigMapRules(RulesSourceView(reference, None, (problem,)), None, "")
        source = f"configmap {reference} key {RULES_KEY}"
        try:
            rules: NodeRules | None = parse_rules(text, source)
            problems: tuple[str, ...] = ()
        except RulesError as err:
            rules, problems = None, tuple(str(p) for p in err.problems)
        view = RulesSourceView(reference, rules_digest(text), problems)
        return ConfigMapRules(view, rules, text)

    def rules_source(self) -> ConfigMapRules:
        """The rules the reconciler reads: the NodeRules objects merged when its status record
        says so (or there is no record and no rules ConfigMap, but NodeRules objects exist),
        else the rules ConfigMap."""
        status, text, _problem = self.status_record()
        if status is not None and status.source == OBJECTS_SOURCE:
            return self.rules_objects(text)
        configmap = self.rules_configmap()
        if status is None and configmap.view.digest is None:
            objects = self.rules_objects("")
            if objects.rules is not None and objects.text:
                return objects
        return configmap

    def rules_objects(self, in_force_text: str) -> ConfigMapRules:
        """Every NodeRules object merged as the reconciler merges them, against the versions
        of them in force (`in_force_text`, the status record's); problems: each object's
        refused or conflicting generation."""
        merged = self._merged(in_force_text)
        if merged is None:
            problem = "the NodeRules API is not installed"
            return ConfigMapRules(RulesSourceView(OBJECTS_SOURCE, None, (problem,)), None, "")
        problems = tuple(
            f"NodeRules {name} generation {verdict.generation}: {why}"
            for name, verdict in sorted(merged.verdicts.items())
            for why in (*verdict.problems, *([verdict.conflict] if verdict.conflict else ()))
        )
        view = RulesSourceView(OBJECTS_SOURCE, rules_digest(merged.text), problems)
        return ConfigMapRules(view, merged.rules, merged.text)

    def merged_with(self, proposed: RulesObject) -> Merged | None:
        """The NodeRules objects merged with `proposed` in place of its namesake, as the
        reconciler would merge them; None when it does not read objects."""
        status, text, _problem = self.status_record()
        if status is None or status.source != OBJECTS_SOURCE:
            return None
        return self._merged(text, proposed)

    def _merged(self, in_force_text: str, proposed: RulesObject | None = None) -> Merged | None:
        try:
            listed = self._all(Selection("NodeRules"))
        except NotFoundError:
            return None
        objects = {found.name: found for found in map(object_of_document, listed)}
        if proposed is not None:
            before = objects.get(proposed.name)
            # A new generation of it (the API server would number it so), created as it was.
            generation = before.generation + 1 if before is not None else 1
            created = before.created if before is not None else "~"  # newest: sorts last
            objects[proposed.name] = replace(proposed, generation=generation, created=created)
        try:
            standing = {p.name: p for p in parts_of(in_force_text, "the status record")}
        except RulesError:
            standing = {}
        return merge(objects.values(), standing)

    def status_record(self) -> tuple[ReconcilerStatus | None, str, str | None]:
        """The reconciler's status record, the rules text in force, and why it is unreadable."""
        data = self._data(STATUS_CONFIGMAP)
        if data is None:
            return None, "", None
        try:
            status, text = decode_status(data)
        except StatusRecordError as err:
            return None, "", f"{self.where.namespace}/{STATUS_CONFIGMAP}: {err}"
        return status, text, None

    def rules_in_force(self) -> InForce | None:
        """The rules in force as the reconciler's status record publishes them; None when there
        is no record (no reconciler has written one). RulesInForceUnknownError when there is one and
        it cannot say: never guessed from the rules ConfigMap, which may hold a held update."""
        data = self._data(STATUS_CONFIGMAP)
        if data is None:
            return None
        try:
            recorded = rules_of_record(data)
        except StatusRecordError as err:
            raise RulesInForceUnknownError(
                f"{self.where.namespace}/{STATUS_CONFIGMAP}: {err}"
            ) from err
        status = recorded.status
        if recorded.rules is None:
            return InForce(None, "no rules (none are in force yet)", status)
        which = (
            f"the rules in force: generation {status.generation}, digest {status.digest} "
            f"({status.source})"
        )
        return InForce(recorded.rules, which, status)

    def lease(self) -> LeaseView | None:
        raw = self._leases.read_lease(self.where.namespace, self.where.lease)
        if raw is None:
            return None
        record = LeaseRecord.of(raw)
        return LeaseView(
            record.holder, parse_time(record.renew_time), record.lease_duration_seconds
        )

    def previously_owned(self) -> frozenset[tuple[str, str]]:
        """The taint history: what earlier rules generations owned (cleaned up if claimed)."""
        try:
            return frozenset(decode_history(self._data(HISTORY_CONFIGMAP)))
        except HistoryError:
            return frozenset()  # as the reconciler: unreadable means it removes less

    def ledger_grants(self) -> list[Grant]:
        """The eviction ledger's grants, as the leader counts them (none when there is none).
        RecordUnreadableError when it cannot be decoded: the leader grants nothing then."""
        try:
            return decode_ledger(self._data(LEDGER_CONFIGMAP))
        except LedgerError as err:
            raise RecordUnreadableError(f"{self.where.namespace}/{err}") from err

    def now(self) -> datetime:
        """The API server's time, as the reconciler reads it (`kit.server_clock`), so a laptop
        whose clock is off explains what the reconciler decides; this host's if the server
        cannot say."""
        clock = AnchoredClock(self._api.server_time)
        try:
            clock.anchor()
        except KubeError:
            return datetime.now(UTC)
        return clock.now()

    def condition_sightings(self, node: NodeState) -> Mapping[ConditionKey, Sighting]:
        """What the leader keeps of when it first saw the node's conditions (holds under way,
        re-gates), so explain counts `for` from the same moment it does; none when the record
        cannot say (then a hold counts from now, as after a restart)."""
        try:
            stored = decode_sightings(self._data(SIGHTINGS_CONFIGMAP)).get(node.name)
        except SightingsRecordError:
            return {}
        return stored.conditions if stored is not None and stored.uid == node.uid else {}

    def departures(self) -> dict[str, Departure]:
        """What the leader kept of the Node objects it saw go, by name (`re_registration`), so
        a pod Ready before a Node was created counts as the leader counts it; none when the
        record cannot say."""
        try:
            return decode_departures(self._data(SIGHTINGS_CONFIGMAP))
        except SightingsRecordError:
            return {}

    # --- gates, records, events -----------------------------------------------------------------

    def gate_pods(
        self, rules: NodeRules, node: str, at: datetime
    ) -> tuple[dict[str, tuple[Sighting, ...]], dict[str, tuple[InitPod, ...]]]:
        """For each rule that reads pods (a gate's init pods): the ready signals of those on
        `node` (the planner's `gate_pod_signals`), and the pods as explain shows them."""
        signals: dict[str, tuple[Sighting, ...]] = {}
        shown: dict[str, tuple[InitPod, ...]] = {}
        for name, spec in pods_read(rules):
            namespace, selector = pod_source(spec)
            raws = self._all(Selection("Pod", namespace, f"spec.nodeName={node}", selector))
            pair = spec.ready_annotation_pair
            read = frozenset({pair[0]} if pair is not None else ())
            # Seen now, as a reconciler that just started sees them (one that saw an episode
            # begin may judge it otherwise: docs/reconciler.md, "Time").
            views = [sighted(slim_pod(raw, read.__contains__), None, at) for raw in raws]
            if found := spec_signals(spec, views):
                signals[name] = signals.get(name, ()) + found
            shown[name] = shown.get(name, ()) + tuple(
                InitPod(
                    f"{namespace}/{(raw.get('metadata') or {}).get('name')}",
                    str((raw.get("status") or {}).get("phase") or "Unknown"),
                    view.ready_token is not None,
                )
                for raw, view in zip(raws, views, strict=True)
            )
        return signals, shown

    def csi_drivers(self, rules: NodeRules, node: NodeState) -> Mapping[str, bool]:
        """The CSI drivers registered on the node, as the reconciler reads them (its own
        CSINode's), when the rules wait for any."""
        if cluster_reads(rules).of("csi-nodes") is None:
            return {}
        named = Selection("CSINode", field_selector=f"metadata.name={node.name}")
        views = [slim_csinode(raw) for raw in self._all(named)]
        return registered_drivers(views[0] if views else None, node.uid)

    def workload_pods(self, node: str) -> int:
        """The workload pods bound to `node`, as the reconciler's backfill check counts them."""
        on_node = Selection("Pod", None, field_selector=f"spec.nodeName={node}")
        return sum(1 for raw in self._all(on_node) if is_workload_pod(raw))

    def agent_objects(
        self, rules: NodeRules, daemon_sets: bool, csi_nodes: bool, node: str | None = None
    ) -> tuple[list[RawObject], list[RawObject], list[RawObject]]:
        """What the rules' node agents read, as the reconciler's informers list it: the
        DaemonSets and the DaemonSet pods (on `node`, or every node) of the namespaces the rules
        read (`daemon_sets`), and the CSINodes (`csi_nodes`); each a paginated LIST."""
        read = cluster_reads(rules).of("node-agents") if daemon_sets else None
        scopes = read.scopes() if read is not None else []  # LIST scopes; None: every namespace
        on_node = f"spec.nodeName={node}" if node is not None else None
        return (
            [raw for scope in scopes for raw in self._all(Selection("DaemonSet", scope))],
            [
                raw
                for scope in scopes
                for raw in self._all(Selection("Pod", scope, on_node, DAEMON_SET_POD_LABEL))
            ],
            self._all(Selection("CSINode")) if csi_nodes else [],
        )

    def label_records(self) -> list[StoredRecord]:
        """Every persisted-label record (one paginated LIST)."""
        return list(map(stored_record, self._configmaps(f"{RECORD_LABEL}={RECORD_LABEL_VALUE}")))

    def records(self) -> RecordsView:
        stored = self.label_records()
        quarantined = self._configmaps(f"{QUARANTINE_LABEL}=true")
        return RecordsView(
            records=len(stored),
            gone=sum(1 for s in stored if s.record is not None and s.record.node_gone_at),
            unreadable=tuple(sorted(s.name for s in stored if s.record is None)),
            quarantined=tuple(
                sorted(
                    (
                        str(meta.get("name")),
                        str((meta.get("annotations") or {}).get(QUARANTINE_REASON_ANNOTATION, "")),
                    )
                    for meta in (raw.get("metadata") or {} for raw in quarantined)
                )
            ),
        )

    def label_record(self, name: str) -> tuple[StoredRecord | None, tuple[str, ...]]:
        """The persisted-label record called `name`, and the quarantined copies of it."""
        raw = self._api.read_configmap(self.where.namespace, name)
        copies = self._configmaps(f"{QUARANTINE_LABEL}=true")
        names = (str((c.get("metadata") or {}).get("name")) for c in copies)
        quarantined = tuple(sorted(n for n in names if is_quarantine_of(n, name)))
        return (stored_record(raw) if raw is not None else None), quarantined

    def warning_events(self) -> list[EventView]:
        """nodegate's recent Warning Events: about nodes, and about its rules ConfigMap.

        Every page is read: a LIST returns Events by name, not by time, so the first page alone
        (a busy cluster's, or one a node filled with Events named to sort first: a kubelet may
        create Events) need not hold the recent ones."""
        # `default`: where the reconciler writes its Events unless --event-namespace says.
        namespaces = sorted({"default", self.where.rules_ref[0]})
        found: list[EventView] = []
        for namespace in namespaces:
            for items in pages(self._api, Selection("Event", namespace, EVENT_SELECTOR)):
                found += [_event(raw) for raw in items]
                found.sort(key=lambda e: -(e.last_seen.timestamp() if e.last_seen else 0.0))
                del found[EVENTS_SHOWN:]
        return found

    def _data(self, name: str) -> Mapping[str, Any] | None:
        """The data of the reconciler's record `name` (None: there is none), read once: a
        command shows one version of each record, however many of its parts it reads."""
        if name not in self._read:
            raw = self._api.read_configmap(self.where.namespace, name)
            self._read[name] = None if raw is None else raw.get("data") or {}
        return self._read[name]

    def _all(self, selection: Selection) -> list[RawObject]:
        return [raw for items in pages(self._api, selection) for raw in items]

    def _configmaps(self, label_selector: str) -> list[RawObject]:
        return self._all(Selection("ConfigMap", self.where.namespace, None, label_selector))


def pages(api: KubeApi, selection: Selection) -> Iterator[list[RawObject]]:
    """One paginated LIST, page by page."""
    token: str | None = None
    while True:
        page = api.list_page(selection, PAGE_SIZE, token)
        yield page.items
        token = page.continue_token
        if token is None:
            return


def _event(raw: Mapping[str, Any]) -> EventView:
    involved = raw.get("involvedObject") or {}
    last = raw.get("lastTimestamp") or raw.get("eventTime") or raw.get("firstTimestamp")
    return EventView(
        reason=str(raw.get("reason") or ""),
        involved=f"{involved.get('kind', '')}/{involved.get('name', '')}",
        message=str(raw.get("message") or ""),
        count=int(raw.get("count") or 1),
        last_seen=parse_time(last),
    )
