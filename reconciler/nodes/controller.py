"""The node controller: watch nodes, decide cheaply which need work, and run the workers.

It composes collaborators with one job each: the rules in force and their guard
(`rules_in_force`), one node's reconcile (`reconcile`, which returns an outcome), the one write
path to Nodes (`node_writer`), persisted-label records (`label_records`) and startup-gate
reports (`gate_reports`, `gate_pods`). Every decision is in `nodegate.core`; what each outcome
means for the queue is decided by `kit.worker` alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from nodegate.core.decisions.node_agents import AgentReadiness
from nodegate.core.decisions.plan import annotations_read, relevant_view
from nodegate.core.objects.status_record import StatusRecordError
from nodegate.core.reports.gate_census import GateCensus, gate_census
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import KubeError, PermanentError, TemporaryError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import RawObject, Selection
from nodegate.reconciler.kit.ratelimit import TokenBucket
from nodegate.reconciler.kit.server_clock import AnchoredClock, ClockReport
from nodegate.reconciler.kit.worker import Outcome, Worker
from nodegate.reconciler.kit.workqueue import Lane, WorkQueue
from nodegate.reconciler.nodes.decide.eviction_breaker import EvictionBreaker
from nodegate.reconciler.nodes.decide.node_facts import NodeFacts
from nodegate.reconciler.nodes.decide.node_writer import NodeWriter
from nodegate.reconciler.nodes.decide.reconcile import NodeReconciler, NodeSource
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.node_memory import NodeMemories
from nodegate.reconciler.nodes.node_view import CachedNode, annotation_filter, slim_node
from nodegate.reconciler.nodes.records.eviction_ledger_store import LedgerStore
from nodegate.reconciler.nodes.records.label_records import LabelRecords
from nodegate.reconciler.nodes.records.label_store import LabelStore
from nodegate.reconciler.nodes.records.sightings_store import SAVE_INTERVAL_SECONDS, SightingsStore
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.reports.agent_reports import CannotRunReports
from nodegate.reconciler.nodes.reports.deadlock_reports import DeadlockReports
from nodegate.reconciler.nodes.reports.gate_reports import GateReports
from nodegate.reconciler.nodes.rules.rules_in_force import Applied, RulesInForce
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate, SourceRef, report_on_source
from nodegate.reconciler.nodes.rules.status_publisher import StatusPublisher
from nodegate.reconciler.nodes.sources.csi_nodes import CsiNodes
from nodegate.reconciler.nodes.sources.gate_pods import GatePods
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents
from nodegate.reconciler.nodes.sources.watched import Watching
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.controller")

Clock = Callable[[], datetime]
RESYNC_POLL_SECONDS = 0.02
"""How often the controller looks whether a resync under way is done (its timing's resolution)."""
HISTORY_LOAD_SECONDS = 30.0
"""How long the taint-key history is retried at start before going on without it."""


class Controller:
    def __init__(
        self,
        settings: ReconcilerSettings,
        api: FencedApi,
        recorder: Recorder,
        metrics: Metrics,
        history: TaintHistory,
        health: Health,
        fence: LeaderFence | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`api`: the one client every write of the controller goes through, fenced (the only
        type it takes, so it cannot be handed the raw one). `clock`: the API server's time
        (anchored on its `Date` as the run starts) unless a test gives one: every "since when"
        and every record nodegate writes is on it."""
        self._settings = settings
        self._metrics = metrics
        """The registry: the controller hands each collaborator its own group."""
        self._own_metrics = metrics.controller
        self._history = history
        self._health = health
        clock_metrics = self._own_metrics
        self._server_clock = AnchoredClock(
            api.server_time,
            on_reading=ClockReport(
                clock_metrics.clock_disagreement_seconds.set, clock_metrics.clock_disagreements.inc
            ),
        )
        clock_metrics.clock_correction_seconds.set_function(self._server_clock.correction)
        self._now: Clock = clock or self._server_clock.now_or_host
        clock = self._now
        self.queue = WorkQueue()
        # Counted when scraped: counting on every add would cost O(n) per node in a resync.
        self._own_metrics.queue_depth.set_function(lambda: len(self.queue))
        self._keep_annotation = annotation_filter(None)
        self._filters = 0  # how many annotation filters the cache has had (CachedNode.kept_under)
        self.informer: Informer[CachedNode] = Informer(
            "nodes",
            api,
            Selection("Node"),
            self._slim,
            self._on_node_event,
            page_size=settings.list_page_size,
            watch_timeout_seconds=settings.watch_timeout_seconds,
            on_error=self._own_metrics.on_informer_error,
            on_synced=self._consider_rules,
        )
        self.status = StatusPublisher(
            api,
            settings.records_namespace,
            settings.leader_election.identity,
            clock,
            settings.max_untaint_share,
            lambda kind: self._own_metrics.errors.labels(kind).inc(),
        )
        self._in_force = RulesInForce(
            history,
            recorder,
            metrics.rules_in_force,
            settings.max_untaint_share,
            self._on_rules_applied,
            self.status,
        )
        self._node_hooks: list[Callable[[NodeState | None, NodeState], None]] = []
        self._memory = NodeMemories()
        """Everything that remembers something per node, forgotten through it (`node_memory`)."""
        self._recorder = recorder
        self._agent_problems: tuple[str, ...] = ()
        """What was last reported of the node agents' DaemonSets (`daemon_set_problems`)."""
        self._agent_problems_lock = threading.Lock()
        self._compose(api, recorder, fence or LeaderFence(None), clock)
        self._own_metrics.gate_census.source = self._gate_census
        self._sightings_store = SightingsStore(api, settings.records_namespace)
        self._next_sightings_save = 0.0
        self._resync_started: float | None = None
        """When the periodic resync under way queued every node (monotonic), or None."""
        self._running = threading.Event()
        """Set while `run` runs: only then are watches started for the rules."""
        self.rules_recovered = threading.Event()
        """Set once the rules in force were put back from the status record (or it had none,
        or cannot say); until then this leader is not ready."""

    def _compose(
        self, api: FencedApi, recorder: Recorder, fence: LeaderFence, clock: Clock
    ) -> None:
        """The collaborators of one node's reconcile, and the worker that runs it."""
        settings, metrics, memory = self._settings, self._metrics, self._memory
        store = LabelStore(api, settings.records_namespace, metrics.label_store)
        self.labels = LabelRecords(
            store,
            recorder,
            metrics.labels,
            clock,
            settings.dry_run,
            alive=lambda name: self.informer.get(name) is not None,
        )
        self.gates = memory.add(GateReports(api, recorder, metrics.gates, clock, settings.dry_run))
        watching = Watching(
            api,
            metrics.on_informer_error,
            self._health,
            self._on_gate_pod_node,
            settings.watch_timeout_seconds,
        )
        self.gate_pods = GatePods(watching, clock)
        self.csi_nodes = CsiNodes(watching)
        self.node_agents = NodeAgents(watching, self._on_agents_changed)
        self._writer = memory.add(
            NodeWriter(
                api,
                recorder,
                metrics.writer,
                fence,
                TokenBucket(settings.write_qps, settings.write_burst),
                settings.dry_run,
            )
        )
        self.breaker = memory.add(
            EvictionBreaker(
                recorder,
                metrics.breaker,
                lambda: [cached.state for _, cached in self.informer.items()],
                self._rules_source,
                self._server_clock,
                LedgerStore(api, settings.records_namespace),
            )
        )
        self._cannot_run = memory.add(
            CannotRunReports(recorder, metrics.controller.agents_cannot_run, self._rules_source)
        )
        self._deadlocks = memory.add(DeadlockReports(recorder, self._rules_source))
        self._node_facts = memory.add(
            NodeFacts(
                clock,
                lambda: self.rules,
                self.informer.get,
                lambda: self._history.known,
                self.gate_pods,
                self.gates,
                self.csi_nodes,
                self.node_agents,
                self._on_agents,
            )
        )
        self._node = NodeReconciler(
            NodeSource(
                lambda: self.rules,
                self.informer.get,
                api,
                self._slim,
                lambda cached: cached.kept_under != self._filters,
            ),
            self._node_facts,
            self.labels,
            self.gates,
            self._writer,
            self.breaker,
            settings.max_conflict_retries,
        )
        self._worker = Worker(
            self.queue,
            self._node.reconcile,
            self._own_metrics.reconcile_seconds.observe,
            lambda kind: self._own_metrics.errors.labels(kind).inc(),
            log,
            key_field="node",
        )

    # --- the public surface ---------------------------------------------------------------------

    @property
    def applied(self) -> Applied | None:
        return self._in_force.applied

    @property
    def rules(self) -> NodeRules | None:
        return self._in_force.rules

    def offer_rules(self, update: RulesUpdate) -> None:
        """A valid rules update (any thread); it takes effect once the guard lets it."""
        self._in_force.offer(update)
        if self.informer.synced.is_set():
            self._consider_rules()

    def reconcile(self, key: str) -> Outcome:
        """One node's reconcile: what happened, for the worker to act on."""
        return self._node.reconcile(key)

    def flush_labels(self) -> int:
        """At a clean stop, before the Lease is handed back: the record writes still waiting
        for their interval (`label_records.COALESCE_SECONDS`) go out now, so a node deleted
        while no replica runs leaves its latest labels in its record. How many nodes."""
        deferred = self.labels.deferred()
        with self.labels.flushing():
            for key in deferred:
                self._node.reconcile(key)
        return len(deferred)

    def process(self, key: str) -> Outcome:
        """Reconcile one node as a worker does: the outcome applied to the queue and counted."""
        return self._worker.process(key)

    # --- rules ----------------------------------------------------------------------------------

    def _consider_rules(self) -> None:
        """Judge the offered rules with facts gathered for them: their node agents' readiness
        (where their namespaces are watched), not the rules in force's."""
        self._in_force.consider(
            lambda judged: (
                (node.state, self._node_facts.of(key, judged))
                for key, node in self.informer.items()
            )
        )

    def _on_rules_applied(self, update: RulesUpdate) -> None:
        self.gate_pods.follow(update.rules)
        self.csi_nodes.follow(update.rules)
        self.node_agents.follow(update.rules)
        self._report_agent_problems(update.rules)  # a rule edit may name a missing one
        self.labels.keys.rebuild(
            (cached.state for _, cached in self.informer.items()), update.rules.persistent_labels
        )
        self._follow_records()
        old = self._keep_annotation
        needs_relist = any(not old(key) for key in annotations_read(update.rules))
        self._keep_annotation = annotation_filter(update.rules)
        if needs_relist:  # the new rules read annotations the cache has been dropping
            # Entries slimmed before are stale: re-read before planning (counted after the
            # filter changes, so an entry slimmed in between is re-read, never trusted).
            self._filters += 1
            self.informer.request_relist()
        self._enqueue_all("resync")

    def _rules_source(self) -> SourceRef | None:
        """The rules ConfigMap in force, where rules-wide Warnings go."""
        applied = self.applied
        return applied.update.ref if applied is not None else None

    def _follow_records(self) -> None:
        """Watch the label records while the rules in force persist labels (once running)."""
        rules = self.rules
        wanted = rules is not None and rules.persistent_labels is not None
        if self._running.is_set():
            self.labels.follow(wanted, self._health)

    def _gate_census(self) -> GateCensus | None:
        rules = self.rules
        if rules is None or not rules.startup_gates or not self.informer.synced.is_set():
            return None
        nodes = (cached.state for _, cached in self.informer.items())
        return gate_census(nodes, rules, self._now())

    # --- event intake: decide cheaply whether a node needs work ---------------------------------

    def _slim(self, raw: RawObject) -> CachedNode:
        return slim_node(raw, self._keep_annotation, self._filters)

    def watch_nodes(
        self, hook: Callable[[NodeState | None, NodeState], None]
    ) -> Callable[[], None]:
        """Also call `hook(old, new)` on every node event but deletions, on the informer's
        thread (it must be cheap: the OCI poller's look at its own conditions), until the
        returned function is called (a leadership's poller must not outlive it)."""
        self._node_hooks.append(hook)
        return lambda: self._node_hooks.remove(hook)

    def _on_node_event(self, key: str, old: CachedNode | None, new: CachedNode | None) -> None:
        self._own_metrics.cached_objects.labels("nodes").set(len(self.informer))
        if new is not None:
            for hook in tuple(self._node_hooks):
                hook(old.state if old is not None else None, new.state)
        for rival in self.labels.keys.observe(key, new.state if new is not None else None):
            if self.rules is not None:
                self._enqueue(rival, "event")
        if new is None:
            self._on_node_deleted(key, old)
            return
        if old is not None and old.state.uid != new.state.uid:
            # Deleted and created again while the watch was down: a new node of the same name.
            self._node_facts.went(key, old.state)
            self._forget_node(key, old.state.uid)
            old = None
        self._node_facts.saw(key, new.state)
        rules = self.rules
        if rules is None:
            self._own_metrics.node_events.labels("no_rules").inc()
            return
        if old is not None and relevant_view(old.state, rules) == relevant_view(new.state, rules):
            self._own_metrics.node_events.labels("unchanged").inc()
            return  # a heartbeat or a change in something the rules don't read
        self._own_metrics.node_events.labels("queued").inc()
        self._enqueue(key, "event")

    def _on_node_deleted(self, key: str, old: CachedNode | None) -> None:
        """Forget the node everywhere; if labels persist, reconcile its key once more so its
        record is marked gone."""
        self._own_metrics.node_events.labels("deleted").inc()
        self.queue.discard(key)
        if old is not None:
            self._node_facts.went(key, old.state)
        self._forget_node(key, old.state.uid if old is not None else None)
        if old is None:
            return
        rules = self.rules
        if rules is not None and rules.persistent_labels is not None:
            self.labels.node_deleted(key, old.state)
            self._enqueue(key, "event")

    def _forget_node(self, key: str, uid: str | None) -> None:
        """What was remembered about a node that is gone, everywhere it was (`node_memory`)."""
        self._memory.forget(key, uid)

    def _on_gate_pod_node(self, node: str) -> None:
        if self.rules is not None:
            self._enqueue(node, "event")

    def _on_agents_changed(self) -> None:
        """A DaemonSet made, retargeted or deleted (rare): every node is looked at again,
        behind the events, and a listed DaemonSet that can never run where its rule's taint is
        (missing, or not tolerating the taint) is reported once, with the fix."""
        rules = self.rules
        if rules is None:
            return
        self._enqueue_all("resync")
        self._report_agent_problems(rules)

    def _on_agents(
        self, key: str, node: NodeState, rules: NodeRules, agents: Mapping[str, AgentReadiness]
    ) -> None:
        """What a reconcile found of the node's agents: the DaemonSets that cannot run there,
        and rules waiting for each other there, each reported once while it lasts."""
        self._cannot_run.saw(key, rules, agents)
        self._deadlocks.saw(key, self.node_agents.deadlocks(rules, node))

    def _report_agent_problems(self, rules: NodeRules) -> None:
        """Each problem once while it lasts (informer threads and the rules' thread call it)."""
        problems = self.node_agents.problems(rules)
        with self._agent_problems_lock:
            new = [p for p in problems if p not in self._agent_problems]
            self._agent_problems = problems
        for problem in new:
            log.warning("node agent cannot run: %s", problem)
            report_on_source(self._recorder, self._rules_source(), "NodeAgentCannotRun", problem)

    def _enqueue(self, key: str, lane: Lane) -> None:
        self.queue.add(key, lane)

    def _enqueue_all(self, lane: Lane) -> None:
        for key in self.informer.cached_keys():
            self.queue.add(key, lane)

    def _save_sightings(self) -> None:
        """Write what the sightings record should hold, if it changed (every few seconds at
        most); a write that fails is tried again then."""
        if time.monotonic() < self._next_sightings_save:
            return
        self._next_sightings_save = time.monotonic() + SAVE_INTERVAL_SECONDS
        facts = self._node_facts
        changed, departed = facts.conditions.changes(), facts.departures.changes()
        if changed is None and departed is None:
            return
        try:
            self._sightings_store.save(
                changed if changed is not None else facts.conditions.kept(),
                departed if departed is not None else facts.departures.all(),
            )
        except KubeError as err:
            facts.conditions.changed_again()
            facts.departures.changed_again()
            self._own_metrics.errors.labels("sightings").inc()
            log.warning("sightings record not written", extra={"error": str(err)})

    def _load_sightings(self, stop: threading.Event) -> None:
        """Read back the sightings the last leader kept (holds under way, re-gates) and the
        Node objects it saw go (`re_registration`), for as long as the taint history is tried;
        without them those holds start again (later, never earlier), and the pods of a name
        registered again count once written for the new Node."""
        backoff = Backoff()
        deadline = time.monotonic() + HISTORY_LOAD_SECONDS
        while not stop.is_set():
            try:
                sightings, departed = self._sightings_store.load()
                self._node_facts.conditions.restore(sightings)
                self._node_facts.departures.restore(departed)
                return
            except KubeError as err:
                if isinstance(err, TemporaryError) and time.monotonic() < deadline:
                    stop.wait(max(backoff.next_delay(), err.retry_after or 0.0))
                    continue
                self._own_metrics.errors.labels("sightings").inc()
                log.error("sightings record not read; holds start again", extra={"error": str(err)})
                return

    def _live_uids(self) -> set[str] | None:
        if not self.informer.synced.is_set():
            return None
        return {node.state.uid for _, node in self.informer.items()}

    # --- running --------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Run the informers, the workers and the periodic resync until `stop` is set."""
        self._writer.stop = stop
        self._load_history(stop)
        self._load_ledger(stop)
        self._wait_for_clock(stop)
        self._load_sightings(stop)
        self._recover_rules(stop)
        health = self._health
        threads = [
            supervised("informer", self.informer.run, stop, health),
            supervised(
                "label-gc",
                lambda s: self.labels.collect(s, lambda: self.rules, self._live_uids),
                stop,
                health,
            ),
        ]
        threads.append(
            supervised(
                "server-clock",
                lambda s: self._server_clock.follow(s, self._settings.clock_read_seconds),
                stop,
                health,
            )
        )
        threads += [
            supervised(f"worker-{i}", self._worker.run, stop, health)
            for i in range(self._settings.workers)
        ]
        self._running.set()
        self._follow_records()
        period = self._settings.resync_seconds
        next_period = time.monotonic() + period
        while not stop.wait(min(RESYNC_POLL_SECONDS, period)):
            self._finish_resync()
            self._save_sightings()
            if time.monotonic() < next_period:
                continue
            next_period = time.monotonic() + period
            if not self._history.persisted:
                self._history.persist()
            self.status.retry()
            if (live := self._live_uids()) is not None:
                self.gates.keep_only(live)
                names = set(self.informer.cached_keys())
                self._node_facts.conditions.keep_only(names)
                self._cannot_run.keep_only(names)
                self._deadlocks.keep_only(names)
                self._node_facts.prune_departures()
            self._start_resync()
        self._running.clear()
        self.labels.follow(False, health)
        self.queue.shutdown()
        self.gate_pods.stop_all()
        self.csi_nodes.stop_all()
        self.node_agents.stop_all()
        for thread in threads:
            thread.join(timeout=5)

    def _start_resync(self) -> None:
        """Queue every node in the resync lane, unless the last pass is still under way
        (re-queueing every node in the middle of a storm gains nothing)."""
        if self.rules is None or not self.informer.synced.is_set():
            return
        if self._resync_started is not None:
            log.info("resync skipped: the last one is still under way")
            return
        self._resync_started = time.monotonic()
        self._enqueue_all("resync")

    def _finish_resync(self) -> None:
        """A pass is done once every node it queued was reconciled; nodes that changed
        meanwhile went ahead in the event lane and are not waited for."""
        started = self._resync_started
        if started is None or self.queue.resync_pending():
            return
        self._resync_started = None
        self._own_metrics.resync_seconds.set(time.monotonic() - started)
        self._own_metrics.resyncs.inc()

    def _recover_rules(self, stop: threading.Event) -> None:
        """Read back the rules in force from the status record before the node cache syncs, so
        that no update is judged against nothing: a restart or a failover while an update is
        held leaves the rules that were in force in force. Retried while the API server cannot
        answer, for as long as the taint history is; a record that cannot say (or that cannot
        be read for that long) is reported and the reconciler goes on as on a first start."""
        backoff = Backoff()
        deadline = time.monotonic() + HISTORY_LOAD_SECONDS
        try:
            while not stop.is_set():
                try:
                    recorded = self.status.recover()
                except TemporaryError as err:
                    if time.monotonic() > deadline:
                        self._not_recovered(err)
                        return
                    log.warning("status record not read yet", extra={"error": str(err)})
                    stop.wait(max(backoff.next_delay(), err.retry_after or 0.0))
                    continue
                except (PermanentError, StatusRecordError) as err:
                    self._not_recovered(err)
                    return
                except Exception as err:  # whatever a hand-edited record does to the parsers
                    log.exception("status record could not be read")
                    self._not_recovered(err)
                    return
                if recorded is not None and recorded.rules is not None:
                    status = recorded.status
                    assert status.digest is not None  # rules_of_record checked it
                    update = RulesUpdate(
                        recorded.rules, status.digest, status.source, text=recorded.text
                    )
                    self._in_force.restore(update, status.generation)
                return
        finally:
            self.rules_recovered.set()

    def _not_recovered(self, err: Exception) -> None:
        log.error(
            "rules in force cannot be recovered from the status record; "
            "the rules source is judged as on a first start",
            extra={"error": f"{type(err).__name__}: {err}"},
        )
        self._own_metrics.errors.labels("status").inc()

    def _load_ledger(self, stop: threading.Event) -> None:
        """Read the eviction ledger and the API server's time before anything is planned, for
        as long as the taint history is tried; until they are read every evicting taint waits
        (the breaker tries again as nodes ask for one)."""
        backoff = Backoff()
        deadline = time.monotonic() + HISTORY_LOAD_SECONDS
        while not stop.is_set() and not self.breaker.load():
            if time.monotonic() > deadline:
                log.error("eviction ledger not read; evicting taints wait until it is")
                return
            stop.wait(backoff.next_delay())

    def _wait_for_clock(self, stop: threading.Event) -> None:
        """Nothing is planned before the API server's time is read: every first sight, record
        and `timeAdded` is dated on it, and one dated on this host's clock would move when the
        clock jumps to the server's (a `for` firing early, a grant out of its window)."""
        backoff, said = Backoff(), False
        while not stop.is_set() and not self._server_clock.anchored:
            try:
                self._server_clock.anchor()
            # Unreachable, or no readable Date: asked again; said once.
            except KubeError as err:
                if not said:
                    log.error(
                        "the API server's time not read; nothing is planned until it is",
                        extra={"error": str(err)},
                    )
                    said = True
                stop.wait(backoff.next_delay())

    def _load_history(self, stop: threading.Event) -> None:
        """Read the taint-key history before anything is planned; retried with backoff.

        Without it the planner removes only what the current rules own, which is safe, so a
        reconciler that cannot read it for long still runs (and keeps trying on each resync).
        """
        backoff = Backoff()
        deadline = time.monotonic() + HISTORY_LOAD_SECONDS
        while not stop.is_set():
            try:
                self._history.load()
                return
            except TemporaryError as err:
                if time.monotonic() > deadline:
                    log.error(
                        "taint history not loaded; going on without it", extra={"error": str(err)}
                    )
                    return
                stop.wait(backoff.next_delay())
            except PermanentError as err:
                log.error("taint history cannot be read", extra={"error": str(err)})
                self._own_metrics.errors.labels("permanent").inc()
                return
