"""The node controller: watch nodes, decide cheaply which need work, and run the workers.

It only composes (as Karpenter's nodeclaim lifecycle controller does): the rules in force and
their guard (`rules`), what the rules read from the cluster, one source per kind (`sources`),
one node's reconcile and its collaborators (`decide`, `records`, `reports`), the read-backs at
start and the leader's periodic chores (`leading`); `run` starts every loop in one place. Every
decision is in `nodegate.core`; what each outcome means for the queue is decided by
`kit.worker` alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime

from nodegate.core.decisions.sources import Sources
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.gate_census import GateCensus, gate_census
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.fence import LeaderFence
from nodegate.reconciler.kit.health import Health, supervised
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import Selection
from nodegate.reconciler.kit.ratelimit import TokenBucket
from nodegate.reconciler.kit.server_clock import AnchoredClock, ClockReport
from nodegate.reconciler.kit.worker import Outcome, Worker
from nodegate.reconciler.kit.workqueue import Lane, WorkQueue
from nodegate.reconciler.nodes.decide.eviction_breaker import EvictionBreaker
from nodegate.reconciler.nodes.decide.node_facts import NodeFacts
from nodegate.reconciler.nodes.decide.node_writer import NodeWriter
from nodegate.reconciler.nodes.decide.reconcile import NodeReconciler, NodeSource
from nodegate.reconciler.nodes.fence.fenced_api import FencedApi
from nodegate.reconciler.nodes.intake import NodeIntake
from nodegate.reconciler.nodes.leading import Chores, ReadBacks, Resync
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.node_memory import NodeMemories
from nodegate.reconciler.nodes.node_view import CachedNode
from nodegate.reconciler.nodes.records.eviction_ledger_store import LedgerStore
from nodegate.reconciler.nodes.records.label_records import LabelRecords
from nodegate.reconciler.nodes.records.sightings_store import SightingsStore
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.reports.agent_reports import AgentReports
from nodegate.reconciler.nodes.reports.gate_reports import GateReports
from nodegate.reconciler.nodes.rules.object_status import ObjectStatusWriter
from nodegate.reconciler.nodes.rules.rules_in_force import RulesInForce
from nodegate.reconciler.nodes.rules.rules_objects import RulesObjects
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate, report_on_source
from nodegate.reconciler.nodes.rules.status_publisher import StatusPublisher
from nodegate.reconciler.nodes.sources.csi_nodes import CsiNodes
from nodegate.reconciler.nodes.sources.gate_pods import GatePods
from nodegate.reconciler.nodes.sources.node_agents import NodeAgents
from nodegate.reconciler.nodes.sources.watched import Watching
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.controller")


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
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """`api`: the one client every write of the controller goes through, fenced (the only
        type it takes, so it cannot be handed the raw one). `clock`: the API server's time
        (anchored on its `Date` as the run starts) unless a test gives one: every "since when"
        and every record nodegate writes is on it."""
        self._settings = settings
        self._metrics = metrics
        """The registry: the controller hands each collaborator its own group."""
        own = self._own_metrics = metrics.controller
        self._history = history
        self._health = health
        self._server_clock = AnchoredClock(
            api.server_time,
            on_reading=ClockReport(own.clock_disagreement_seconds.set, own.clock_disagreements.inc),
        )
        own.clock_correction_seconds.set_function(self._server_clock.correction)
        self._now: Callable[[], datetime] = clock or self._server_clock.now_or_host
        waits = {lane: own.queue_wait_seconds.labels(lane) for lane in ("event", "resync")}
        self.queue = WorkQueue(on_wait=lambda lane, seconds: waits[lane].observe(seconds))
        # Counted when scraped: counting on every add would cost O(n) per node in a resync.
        own.queue_depth.set_function(lambda: len(self.queue))
        own.cached_objects.labels("nodes").set_function(lambda: len(self.informer))
        self.informer: Informer[CachedNode] = Informer(
            "nodes",
            api,
            Selection("Node"),
            lambda raw: self.intake.slim(raw),  # noqa: PLW0108 (made below)
            lambda key, old, new: self.intake.on_event(key, old, new),  # noqa: PLW0108
            page_size=settings.list_page_size,
            watch_timeout_seconds=settings.watch_timeout_seconds,
            on_error=metrics.on_informer_error,
            on_synced=self._consider_rules,
        )
        self.status = StatusPublisher(
            api,
            settings.records_namespace,
            settings.leader_election.identity,
            self._now,
            settings.max_untaint_share,
            self._count_error,
        )
        self.rules_in_force = RulesInForce(
            history,
            recorder,
            metrics.rules_in_force,
            settings.max_untaint_share,
            self._on_rules_applied,
            self.status,
            self._now,
        )
        self._rules_objects_api = api
        self._memory = NodeMemories()
        """Everything that remembers something per node, forgotten through it (`node_memory`)."""
        self._running = threading.Event()
        """Set while `run` runs: only then are watches started for the rules."""
        self.rules_recovered = threading.Event()
        """Set once the rules in force were put back from the status record (or it had none,
        or cannot say); until then this leader is not ready."""
        self._compose(api, recorder, fence or LeaderFence(None))
        own.gate_census.source = self._gate_census

    def _compose(self, api: FencedApi, recorder: Recorder, fence: LeaderFence) -> None:
        """The collaborators of one node's reconcile, the sources, the worker that runs it, the
        read-backs and the chores."""
        settings, metrics, memory, clock = self._settings, self._metrics, self._memory, self._now

        def warn(reason: str, message: str) -> None:
            """A Warning Event on the rules source in force (its ConfigMap or object), where
            rules-wide Warnings go."""
            update = self.rules_in_force.update
            report_on_source(recorder, update.ref if update is not None else None, reason, message)

        self.labels = LabelRecords(
            api,
            settings.records_namespace,
            recorder,
            metrics.labels,
            clock,
            settings.dry_run,
            alive=lambda name: self.informer.get(name) is not None,
        )
        self.gates = GateReports(api, recorder, metrics.gates, clock, settings.dry_run)
        self._watching = watching = Watching(
            api,
            metrics.on_informer_error,
            self._health,
            lambda node: self.intake.on_node(node),  # noqa: PLW0108 (made below)
            settings.watch_timeout_seconds,
        )
        self.gate_pods = GatePods(watching, clock)
        self.csi_nodes = CsiNodes(watching)
        agents_changed = lambda: self._agent_reports.daemon_sets_changed()  # noqa: E731, PLW0108 (made below)
        self.node_agents = NodeAgents(watching, agents_changed)
        self.sources = Sources([self.gate_pods, self.gates, self.csi_nodes, self.node_agents])
        """What the rules read from the cluster, one source per kind (`cluster_reads`)."""
        self._writer = NodeWriter(
            api,
            recorder,
            metrics.writer,
            fence,
            TokenBucket(settings.write_qps, settings.write_burst),
            settings.dry_run,
        )
        self.breaker = EvictionBreaker(
            warn,
            metrics.breaker,
            lambda: [cached.state for _, cached in self.informer.items()],
            self._server_clock,
            LedgerStore(api, settings.records_namespace),
        )
        self._agent_reports: AgentReports = AgentReports(
            warn,
            metrics.controller.agents_cannot_run,
            lambda: self.node_agents,
            lambda: self.rules,
            lambda: self._enqueue_all("resync"),
        )
        self._node_facts = NodeFacts(
            clock,
            lambda: self.rules,
            self.informer.get,
            lambda: self._history.known,
            self.sources,
            self.gate_pods,
            self.csi_nodes,
            self.node_agents,
            self._agent_reports.saw,
        )
        memory.add(self.gates, self._writer, self.breaker, self._agent_reports, self._node_facts)
        self.intake = NodeIntake(
            self.queue,
            self._own_metrics,
            lambda: self.rules,
            self._node_facts,
            memory,
            self.labels,
        )
        self._node = NodeReconciler(
            NodeSource(
                lambda: self.rules, self.informer.get, api, self.intake.slim, self.intake.stale
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
            self._count_error,
            log,
            key_field="node",
        )
        facts = self._node_facts
        self.sightings = SightingsStore(
            api, settings.records_namespace, facts.conditions, facts.departures, self._count_error
        )
        self.read_backs = ReadBacks(
            self._history,
            self.breaker,
            self._server_clock,
            self.sightings,
            self.status,
            self.rules_in_force,
            self._count_error,
            self.rules_recovered,
        )
        resync = Resync(
            self.queue,
            self._own_metrics,
            lambda: self.rules is not None and self.informer.synced.is_set(),
            lambda: self._enqueue_all("resync"),
        )
        self._chores = Chores(
            settings.resync_seconds,
            often=[resync.finish, self.sightings.save, self.status.retry_when_due],
            periodic=(
                lambda: self._history.persisted or self._history.persist(),
                self._forget_gone,
                resync.start,
            ),
        )

    # --- the public surface ---------------------------------------------------------------------

    @property
    def rules(self) -> NodeRules | None:
        return self.rules_in_force.rules

    def report_rules_objects(self, objects: RulesObjects) -> None:
        """The rules are these NodeRules objects: merged again whenever the versions in force
        may have changed, and their status written by the leader (`object_status`)."""
        self.rules_in_force.on_standing = objects.remerge
        writer = ObjectStatusWriter(
            self._rules_objects_api,
            objects,
            self.rules_in_force,
            self._facts,
            self._now,
            self._count_error,
            self._watching.refused,
        )
        self._chores.often.extend((writer.write_when_due, objects.confirm_when_due))

    def offer_rules(self, update: RulesUpdate) -> None:
        """A valid rules update (any thread); it takes effect once the guard lets it."""
        self.rules_in_force.offer(update)
        if self.informer.synced.is_set():
            self._consider_rules()

    def flush_labels(self) -> int:
        """At a clean stop: the label records' deferred writes (`LabelRecords.flush`)."""
        return self.labels.flush(self._node.reconcile)

    def process(self, key: str) -> Outcome:
        """Reconcile one node as a worker does: the outcome applied to the queue and counted."""
        return self._worker.process(key)

    # --- running --------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Read back what the last leader left, then run every loop (the informer, the
        label-record collector, the server clock, the workers and, on this thread, the chores)
        until `stop` is set."""
        self._writer.stop = stop
        self.read_backs.run(stop)
        settings = self._settings
        loops: list[tuple[str, Callable[[threading.Event], None]]] = [
            ("informer", self.informer.run),
            ("label-gc", lambda s: self.labels.collect(s, lambda: self.rules, self._live_uids)),
            ("server-clock", lambda s: self._server_clock.follow(s, settings.clock_read_seconds)),
            *((f"worker-{i}", self._worker.run) for i in range(settings.workers)),
        ]
        threads = [supervised(name, loop, stop, self._health) for name, loop in loops]
        self._running.set()
        self._follow_records()
        self._chores.run(stop)
        self._running.clear()
        self.labels.follow(None, self._health)
        self.queue.shutdown()
        self.sources.stop()
        for thread in threads:
            thread.join(timeout=5)

    def _forget_gone(self) -> None:
        """Forget the nodes gone without a delete seen (a watch gap), or reported by a worker
        just after theirs; and the departures that decide nothing any more, once every source
        has listed."""
        if (live := self._live_uids()) is None:
            return
        self.gates.keep_only(live)
        names = set(self.informer.cached_keys())
        for member in (self._node_facts.conditions, self._agent_reports):
            member.keep_only(names)
        if self.sources.synced():
            self._node_facts.prune_departures()

    def _live_uids(self) -> set[str] | None:
        if not self.informer.synced.is_set():
            return None
        return {node.state.uid for _, node in self.informer.items()}

    # --- rules ----------------------------------------------------------------------------------

    def _consider_rules(self) -> None:
        """Judge the offered rules with facts gathered for them: their node agents' readiness
        (where their namespaces are watched), not the rules in force's."""
        self.rules_in_force.consider(self._facts)

    def _facts(self, rules: NodeRules) -> Iterator[tuple[NodeState, PlanFacts]]:
        return (
            (node.state, self._node_facts.of(key, rules)) for key, node in self.informer.items()
        )

    def _on_rules_applied(self, update: RulesUpdate) -> None:
        self.sources.follow(update.rules)
        self._agent_reports.report_problems(self.node_agents.problems(update.rules))
        self.labels.keys.rebuild(
            (cached.state for _, cached in self.informer.items()), update.rules.persistent_labels
        )
        self._follow_records()
        if self.intake.rules_applied(update.rules):
            self.informer.request_relist()
        self._enqueue_all("resync")

    def _follow_records(self) -> None:
        """Watch the label records while the rules in force persist labels (once running)."""
        if self._running.is_set():
            self.labels.follow(self.rules, self._health)

    def _gate_census(self) -> GateCensus | None:
        rules = self.rules
        if rules is None or not rules.startup_gates or not self.informer.synced.is_set():
            return None
        return gate_census((c.state for _, c in self.informer.items()), rules, self._now())

    def _enqueue_all(self, lane: Lane) -> None:
        for key in self.informer.cached_keys():
            self.queue.add(key, lane)

    def _count_error(self, kind: str) -> None:
        self._own_metrics.errors.labels(kind).inc()
